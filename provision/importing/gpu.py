"""The GPUs' runtime state of an imported spec (``gpu:``): what differs from each card's own
defaults, or what provision's boot unit or systemd shows is managed.

Read from ``nvidia-smi -q`` (:mod:`provision.detect.domains.gpu_state`), ``nvidia-smi mig -lgi``
and ``systemctl show`` of nvidia-persistenced (:mod:`provision.detect.domains.gpu_runtime`), and
the boot unit's file for the locked clocks, which nvidia-smi does not show. A value at the card's
default is left out (not managed: the machine keeps it); a value that cannot be read is left out
with a note. Facts older than these probes give no section. Settings are grouped by equal values:
``all`` where every GPU shares one, else the GPUs' nvidia-smi indices (stable on one machine, and
equal across the hosts of one shape, where UUIDs are not).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_args

from pydantic import ValidationError

from provision.detect.domains.gpu_runtime import BOOT_UNIT_PATH, GpuRuntime
from provision.detect.domains.gpu_state import GpuState
from provision.detect.facts import Facts, Unknown
from provision.errors import first_error
from provision.importing.boot_unit import BootUnit, in_unit_order, read_boot_unit
from provision.importing.draft import DROP, Draft
from provision.spec.models import GpuSection, GpuSettings
from provision.unknown import because

PERSISTENCED = "nvidia-persistenced.service"
_COMPUTE_MODES = tuple(
    str(m) for m in get_args(get_args(GpuSettings.model_fields["compute_mode"].annotation)[0])
)
"""The compute modes a spec sets (nvidia-smi's deprecated Exclusive_Thread is not one)."""

Value = Any
"""One setting's spec value (an int, a str, a bool or a mapping)."""


def gpu_section(draft: Draft, facts: Facts) -> None:
    """``gpu:`` (persistence, settings, mig) where the facts show something to keep; else no
    section, with a note saying why."""
    states = facts.gpu_state
    if isinstance(states, Unknown) or not states:
        why = states.unknown if isinstance(states, Unknown) else "nvidia-smi -q shows no GPU"
        draft.note("gpu", because("gpu: not imported: the GPUs' settings were not read", why))
        return
    runtime = facts.gpu_runtime
    _persistence(draft, runtime, states)
    unit = read_boot_unit(runtime, states)
    _settings(draft, states, unit)
    _mig(draft, runtime, states, draft.data["gpus"]["model"], unit)
    _valid(draft)
    if "gpu" not in draft.data and not any(p in draft.notes for p in ("gpu", "gpu.settings", "gpu.mig")):
        draft.note("gpu", "gpu: every GPU setting nvidia-smi -q shows is the card's default (not managed)")


def _valid(draft: Draft) -> None:
    """The section dropped, with the first error, where the values read are not a valid ``gpu:``
    (a value past the spec's own bounds): the rest of the spec is still written."""
    if "gpu" not in draft.data:
        return
    try:
        GpuSection.model_validate(draft.data["gpu"])
    except ValidationError as exc:
        draft.put("gpu", DROP)
        draft.note("gpu", f"gpu: left out: the values read are not a valid gpu: section ({first_error(exc)})")


# --- persistence ------------------------------------------------------------------------------------


def _persistence(draft: Draft, runtime: GpuRuntime | None, states: Sequence[GpuState]) -> None:
    """``persistence`` as systemd shows the daemon: true for active and enabled, false for
    inactive and disabled (both plan no change); any other state is one the spec cannot say."""
    services = Unknown(unknown="not probed") if runtime is None else runtime.services
    if isinstance(services, Unknown):
        draft.note(
            "gpu.persistence",
            because(f"gpu.persistence left out: {PERSISTENCED} was not read", services.unknown)
            + _mode(states, "by the daemon or by nvidia-smi -pm 1"),
        )
        return
    unit = services.units.get(PERSISTENCED)
    state = None if unit is None else _DAEMON.get((unit.active, unit.enabled))
    if unit is None or not unit.exists:
        draft.note(
            "gpu.persistence", f"gpu.persistence left out: systemd has no {PERSISTENCED}" + _mode(states)
        )
    elif state is None:
        draft.note(
            "gpu.persistence",
            f"gpu.persistence left out: {PERSISTENCED} {unit.active}, {unit.enabled} (systemctl show), a "
            "state the spec cannot say (true is active and enabled, false inactive and disabled)",
        )
    else:
        draft.put("gpu.persistence", state, f"{PERSISTENCED} {unit.active}, {unit.enabled} (systemctl show)")
        if not state and (legacy := _mode(states)):
            draft.note("gpu.persistence", legacy.removeprefix("; "))


_DAEMON = {("active", "enabled"): True, ("inactive", "disabled"): False}
"""The daemon's (ActiveState, UnitFileState) the spec's persistence true and false mean."""


def _mode(states: Sequence[GpuState], why: str = "") -> str:
    """``; ...`` naming the GPUs whose Persistence Mode is Enabled, with ``why``; by default, for a
    daemon that does not run: the legacy persistence mode, which the spec does not manage. '' when
    none is."""
    on = [s.index for s in states if s.persistence]
    if not on:
        return ""
    why = why or "without the daemon, the legacy nvidia-smi -pm 1, which the spec does not manage"
    return f"; nvidia-smi -q shows Persistence Mode Enabled on {_gpus(on, states)} ({why})"


# --- settings ---------------------------------------------------------------------------------------


Reader = Callable[[GpuState], "tuple[Value | None, str | None]"]
"""One setting read from one GPU: (the value to write or None, a note: what it was read from, or
why it is left out)."""


def _settings(draft: Draft, states: Sequence[GpuState], unit: BootUnit) -> None:
    """``settings``: one group per set of GPUs sharing values, ``all`` first, then by index (or in
    the order provision's boot unit on disk lists the GPUs)."""
    readers: dict[str, Reader] = {
        "power_limit_w": _power,
        "application_clocks": _application_clocks,
        "compute_mode": _compute_mode,
        "ecc": _ecc,
    }
    per_gpu: dict[str, dict[int, Value]] = {}
    for name, read in readers.items():
        per_gpu[name] = _read_all(draft, name, states, read)
    for name in ("locked_gpu_clocks", "locked_memory_clocks"):
        per_gpu[name] = {i: v[name] for i, v in unit.locked.items() if name in v}
        if per_gpu[name]:
            draft.note("gpu.settings", f"{name}: {_where(per_gpu[name], states)}, read from {BOOT_UNIT_PATH}")
    everyone = [s.index for s in states]
    groups = in_unit_order(_grouped(per_gpu, everyone), unit.settings_order, everyone, _has_argv)
    if groups:
        draft.put("gpu.settings", groups)


def _has_argv(group: dict[str, Value]) -> bool:
    """The group sets something the boot unit runs (ECC is not in it)."""
    return bool(set(group) - {"gpus", "ecc"})


def _read_all(draft: Draft, name: str, states: Sequence[GpuState], read: Reader) -> dict[int, Value]:
    """GPU index -> the value to write; each GPU's note under ``gpu.settings``, the same notes said once."""
    values: dict[int, Value] = {}
    said: dict[tuple[str, bool], list[int]] = {}
    for state in states:
        value, note = read(state)
        if value is not None:
            values[state.index] = value
        if note:
            said.setdefault((note, value is None), []).append(state.index)
    for (note, left_out), indices in said.items():
        where = _gpus(indices, states)
        draft.note(
            "gpu.settings",
            f"gpu.settings {name} left out for {where}: {note}" if left_out else f"{name}: {where}: {note}",
        )
    return values


def _power(state: GpuState) -> tuple[Value | None, str | None]:
    """The requested limit (what ``nvidia-smi -pl`` set and the plan compares) where it is not the
    default; the limit enforced beside it is said when it differs."""
    power = state.power
    requested, default, enforced = power.requested_w, power.default_w, power.enforced_w
    if requested is None or default is None:
        if requested is None and enforced is None:
            return None, None  # the card shows no power limits (N/A): nothing to manage
        return (
            None,
            f"Requested {_w(requested)} or Default Power Limit {_w(default)} (nvidia-smi -q)",
        )
    if requested == default:
        if enforced is not None and enforced != default:
            return None, (
                f"Current Power Limit {enforced:g} W with the Requested one at the default "
                f"{default:g} W: something other than nvidia-smi -pl limits it"
            )
        return None, None
    if not requested.is_integer() or power.min_w is None or power.max_w is None:
        return None, f"Requested Power Limit {requested:g} W is not a whole W within known limits"
    return int(requested), (
        f"Requested Power Limit {requested:g} W, Current {_w(enforced)}, Default {default:g} W "
        f"(nvidia-smi -q; the card takes {power.min_w:g} W to {power.max_w:g} W)"
    )


def _application_clocks(state: GpuState) -> tuple[Value | None, str | None]:
    """Application clocks where they are not the Default Applications Clocks."""
    seen, default = state.applications_clocks, state.default_applications_clocks
    pair, default_pair = (seen.memory_mhz, seen.graphics_mhz), (default.memory_mhz, default.graphics_mhz)
    if seen.memory_mhz is None or seen.graphics_mhz is None or None in default_pair or pair == default_pair:
        return None, None  # at the default, or N/A (a card without application clocks)
    memory, graphics = int(seen.memory_mhz), int(seen.graphics_mhz)
    return {"memory_mhz": memory, "graphics_mhz": graphics}, (
        f"Applications Clocks memory {memory} MHz, graphics {graphics} MHz; Default Applications Clocks "
        f"{default.memory_mhz:g}, {default.graphics_mhz:g} MHz (nvidia-smi -q)"
    )


def _compute_mode(state: GpuState) -> tuple[Value | None, str | None]:
    mode = state.compute_mode
    if mode is None:
        return None, "Compute Mode not read (nvidia-smi -q)"
    if mode == "Default":
        return None, None
    if mode not in _COMPUTE_MODES:
        return None, f"Compute Mode {mode}, one the spec cannot set ({', '.join(_COMPUTE_MODES)})"
    return mode, f"Compute Mode {mode} (nvidia-smi -q)"


def _ecc(state: GpuState) -> tuple[Value | None, str | None]:
    """The pending ECC mode (what ``nvidia-smi -e`` sets and the plan compares) where it is off, or
    where it differs from the current one: the mode the GPU has after its next reboot."""
    current, pending = state.ecc_current, state.ecc_pending
    if current is None:
        return None, None  # ECC Mode N/A: a card without ECC
    if pending is None:
        return None, "ECC Mode Pending not read (nvidia-smi -q)"
    if pending and current:
        return None, None
    if pending == current:
        return False, "ECC Mode Current and Pending Disabled (nvidia-smi -q)"
    return pending, (
        f"ECC Mode Current {_on(current)}, Pending {_on(pending)} (nvidia-smi -q): the spec keeps the "
        "pending mode, which the next reboot makes current (the plan warns of it until then)"
    )


def _grouped(per_gpu: Mapping[str, Mapping[int, Value]], indices: Sequence[int]) -> list[dict[str, Value]]:
    """Groups of the settings: a setting every GPU has with one value goes to ``all``, the others to
    the GPUs sharing a value; groups naming the same GPUs merged."""
    groups: dict[tuple[int, ...], dict[str, Value]] = {}
    for name, values in per_gpu.items():
        for value, gpus in _by_value(values):
            groups.setdefault(gpus, {})[name] = value
    everyone = tuple(indices)
    out = []
    for gpus in sorted(groups, key=lambda g: (g != everyone, g)):
        out.append({"gpus": "all" if gpus == everyone else list(gpus), **groups[gpus]})
    return out


def _by_value(values: Mapping[int, Value]) -> list[tuple[Value, tuple[int, ...]]]:
    """(value, the GPUs with it) in index order."""
    found: list[tuple[Value, list[int]]] = []
    for index in sorted(values):
        match = next((f for f in found if f[0] == values[index]), None)
        if match is None:
            found.append((values[index], [index]))
        else:
            match[1].append(index)
    return [(v, tuple(g)) for v, g in found]


# --- MIG --------------------------------------------------------------------------------------------


def _mig(
    draft: Draft, runtime: GpuRuntime | None, states: Sequence[GpuState], model: str, unit: BootUnit
) -> None:
    """``mig``: the GPU instances (profile -> count) of each GPU in MIG mode, grouped by equal
    layouts; a GPU with MIG mode off is left unset (whole GPUs are what the spec means without it)."""
    layouts: dict[int, Value] = {}
    for state in states:
        layout, note = _mig_layout(runtime, state, model)
        if layout is not None:
            layouts[state.index] = layout
        if note:
            where = f"GPU {state.index}" if layout is not None else f"gpu.mig left out for GPU {state.index}"
            draft.note("gpu.mig", f"{where}: {note}")
    everyone = tuple(s.index for s in states)
    groups = [
        {"gpus": "all" if gpus == everyone else list(gpus), "layout": dict(layout)}
        for layout, gpus in _by_value(layouts)
    ]
    groups = in_unit_order(groups, unit.mig_order, everyone, lambda _: True)
    if groups:
        draft.put("gpu.mig", groups)


def _mig_layout(runtime: GpuRuntime | None, state: GpuState, model: str) -> tuple[Value | None, str | None]:
    """One GPU's layout where MIG mode is on (and stays on: the pending mode is the current one),
    with its note."""
    from provision.catalog.mig import load_mig

    if state.mig_pending is not None and state.mig_pending != state.mig_current:
        return None, (
            f"MIG Mode Current {_on(state.mig_current)}, Pending {_on(state.mig_pending)} (nvidia-smi -q): "
            "a GPU reset or reboot changes it, and the spec neither undoes that change nor keeps the GPU "
            "instances of now"
        )
    if not state.mig_current:
        return None, None
    mig = load_mig()
    product = mig.for_device(state.device_id) or mig.for_model(model)
    if product is None:
        return None, "MIG mode on, but the catalog has no MIG profiles of this card"
    instances = Unknown(unknown="not probed") if runtime is None else runtime.mig
    if isinstance(instances, Unknown):
        return (
            None,
            because("MIG Mode Current Enabled, but its GPU instances were not read", instances.unknown),
        )
    layout = instances.layout(state.index)
    shown = ", ".join(f"{n} x{c}" for n, c in layout.items()) or "no GPU instances"
    unknown = sorted(set(layout) - {p.name for p in product.profiles})
    if unknown:
        return None, (
            f"{shown} (nvidia-smi mig -lgi): {', '.join(unknown)} is not a profile of the catalog's "
            f"{product.name} (the MIG catalog)"
        )
    return layout, f"MIG Mode Current Enabled (nvidia-smi -q); {shown} (nvidia-smi mig -lgi)"


# --- words ------------------------------------------------------------------------------------------


def _on(value: bool | None) -> str:
    return "N/A" if value is None else ("Enabled" if value else "Disabled")


def _w(value: float | None) -> str:
    return "N/A" if value is None else f"{value:g} W"


def _gpus(indices: Sequence[int], states: Sequence[GpuState]) -> str:
    if len(indices) == len(states):
        return "every GPU" if len(states) > 1 else f"GPU {indices[0]}"
    return f"GPU {', '.join(str(i) for i in indices)}"


def _where(values: Mapping[int, Value], states: Sequence[GpuState]) -> str:
    return _gpus(sorted(values), states)
