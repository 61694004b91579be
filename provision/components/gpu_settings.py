"""GPU runtime settings as state (spec ``gpu:``): the persistence daemon, power limit, application
and locked clocks, compute mode and ECC, per GPU; and the boot unit that applies them again.

Steps (component ``gpu_settings``, role ``gpu_settings``, after the package transaction):

- ``nvidia-persistenced.service`` enabled and started (``gpu.persistence: true``) or stopped and
  disabled (false): NVIDIA recommends the daemon over legacy ``nvidia-smi -pm`` (PERSISTENCED);
- the settings now, as ``nvidia-smi -i <uuid> -pl/-ac/-lgc/-lmc/-c`` argv lists where an observed
  value differs from the spec (the locked clocks, which nvidia-smi does not show, through the boot
  unit: they are as the unit on disk says while it is provision's and active);
- the boot unit ``provision-gpu-settings.service`` (oneshot, ``After=nvidia-persistenced.service``):
  none of these settings survives a reboot or driver unload (NVML-DEVCMD), so the unit runs the
  same argv lists at every boot, and creates the MIG instances (``components/mig.py``);
- ECC (``nvidia-smi -i <uuid> -e 0|1``): the pending mode, which takes effect at the next reboot.

Refused before anything changes, naming the limit: a power limit outside the card's
``Min``/``Max Power Limit``, clocks above its ``Max Clocks``, ECC on a card without an ECC mode, a
GPU the spec names that nvidia-smi does not show, one setting set twice for one GPU.
Reported as drift whether or not the spec has a ``gpu:`` section: an enforced power limit below the
card's default that the spec did not set.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provision.catalog import Catalog
from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.gpu_targets import Target, past_count, resolve
from provision.components.steps import noop
from provision.detect.unknown import Unknown
from provision.findings import Finding
from provision.spec.models import GpuSection, Spec
from provision.unknown import because

if TYPE_CHECKING:
    from provision.detect.domains.gpu_state import GpuState

KEYS = ("NVML-DEVCMD",)
_TAGS = ("gpu_settings",)
ECC_TAG = "gpu_ecc"
PERSISTENCED = "nvidia-persistenced.service"
SETTINGS = (
    "power_limit_w",
    "application_clocks",
    "locked_gpu_clocks",
    "locked_memory_clocks",
    "compute_mode",
    "ecc",
)
_COMPUTE_MODE = {"Default": "DEFAULT", "Exclusive_Process": "EXCLUSIVE_PROCESS", "Prohibited": "PROHIBITED"}
"""Spec compute mode -> the name ``nvidia-smi -c`` takes (nvidia-smi(1))."""


class GpuSettingsComponent(InstallableComponent):
    """The persistence daemon, the GPUs' runtime settings, ECC and the boot unit."""

    name = Component.GPU_SETTINGS
    spec_section = "gpu"
    facts = ("gpu_state", "gpu_runtime", "gpus")
    role = "gpu_settings"
    tags = (*_TAGS, ECC_TAG)
    stage = 1  # after the driver: a driver the plan installs brings nvidia-smi and the daemon
    reboot_note = "a changed ECC mode takes effect at boot (nvmlDeviceSetEccMode)"
    verify_checks = ("gpu-settings", "gpu-power-limit-drift", "gpu-persistenced")

    def reboots_for(self, step: Step) -> bool:
        return ECC_TAG in step.tags

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        if spec.gpu is None:
            return ()
        return tuple(_index_findings(spec, catalog))

    def findings(self, ctx: PlanContext) -> Iterable[Finding]:
        drift = (*drift_findings(ctx), *ecc_pending_findings(ctx))
        if ctx.spec.gpu is None:
            return drift
        return (*self.spec_rules(ctx.spec, ctx.catalog), *drift, *limit_findings(ctx))

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        section = ctx.spec.gpu
        steps: list[Built] = []
        if section is not None and section.persistence is not None:
            steps += [*daemon_missing(ctx, section.persistence), persistence_step(ctx, section.persistence)]
        if section is not None and section.settings:
            steps += [settings_step(ctx), ecc_step(ctx)]
        if unit_text(ctx):
            steps.append(boot_unit_step(ctx))
        elif (gone := unit_removal_step(ctx)) is not None:
            steps.append(gone)
        return steps

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        from provision.detect.domains.gpu_runtime import BOOT_UNIT, BOOT_UNIT_PATH

        section = ctx.spec.gpu
        steps = {s.target: s for s in ctx.steps() if s.component is Component.GPU_SETTINGS}
        removing = _changes(steps.get(f"{BOOT_UNIT} removed"))
        if section is None:
            return {"unit_remove": removing, "unit_file": BOOT_UNIT_PATH, "unit_name": BOOT_UNIT}
        persistence = section.persistence if _changes(steps.get(PERSISTENCED)) else None
        return {
            "unit_remove": removing,
            "persistence": "" if persistence is None else ("enabled" if persistence else "disabled"),
            "commands": settings_argvs(ctx, only_changed=True)
            if _changes(steps.get("settings")) or _changes(steps.get(BOOT_UNIT))
            else [],
            "ecc_commands": ecc_argvs(ctx) if _changes(steps.get("ecc")) else [],
            "unit_text": unit_text(ctx),
            "unit_file": BOOT_UNIT_PATH,
            "unit_name": BOOT_UNIT,
        }


def unit_removal_step(ctx: PlanContext) -> Step | None:
    """provision's boot unit disabled and removed where the spec has nothing left for it to apply
    (a ``gpu:`` section removed or emptied): it would set the old values again at the next boot."""
    from provision.detect.domains.gpu_runtime import BOOT_UNIT, BOOT_UNIT_PATH

    runtime = ctx.facts.gpu_runtime
    if runtime is None or isinstance(runtime.boot_unit, Unknown) or not runtime.boot_unit.present:
        return None
    return Step(
        component=Component.GPU_SETTINGS,
        action=Action.REMOVE,
        current=BOOT_UNIT_PATH,
        target=f"{BOOT_UNIT} removed",
        tags=_TAGS,
        reason=f"disable and remove {BOOT_UNIT_PATH}: the spec sets no GPU settings or MIG layout any more, "
        "and the unit would apply the old ones at the next boot (the values set now stay until then)",
    )


def unit_text(ctx: PlanContext) -> str:
    """The boot unit's text for the spec's ``gpu:`` section (:func:`gpu_unit.render`), empty when
    there is nothing to apply at boot."""
    from provision.components.gpu_unit import render
    from provision.components.mig import boot_argvs

    return render(settings_argvs(ctx), boot_argvs(ctx))


def _changes(step: Step | None) -> bool:
    return step is not None and step.changes


# --- what the spec wants, per GPU ----------------------------------------------------------------


@dataclass(frozen=True)
class Wanted:
    """One GPU and the settings the spec's groups give it (None: not managed)."""

    target: Target
    values: dict[str, Any]


def wanted(ctx: PlanContext) -> tuple[list[Wanted], list[Finding]]:
    """Each GPU's settings merged from the groups naming it, and the refusals on the way."""
    section = ctx.spec.gpu
    assert section is not None
    merged: dict[str, Wanted] = {}
    problems: list[Finding] = []
    for group in section.settings:
        targets, missing = resolve(group.gpus, ctx.facts, ctx.spec.gpus.count)
        problems += [_unknown_gpu(ctx, m) for m in missing if not past_count(m, ctx.spec.gpus.count)]
        for target in targets:
            have = merged.setdefault(target.ident, Wanted(target=target, values={}))
            for name in group.managed():
                if name in have.values and have.values[name] != getattr(group, name):
                    problems.append(_twice(ctx, target, name))
                have.values[name] = getattr(group, name)
    return list(merged.values()), problems


def _unknown_gpu(ctx: PlanContext, selector: str) -> Finding:
    shown = ctx.facts.gpu_state
    listed = "" if isinstance(shown, Unknown) else "; nvidia-smi shows " + ", ".join(s.name for s in shown)
    return _blocker(
        ctx, "gpu-settings-unknown-gpu", f"gpu: GPU {selector} is not a GPU nvidia-smi shows{listed}"
    )


def _twice(ctx: PlanContext, target: Target, name: str) -> Finding:
    return _blocker(
        ctx,
        "gpu-settings-overlap",
        f"gpu.settings: two groups set {name} of {target.label} to different values",
    )


def _blocker(ctx: PlanContext, rule: str, message: str, keys: tuple[str, ...] = KEYS) -> Finding:
    return Finding(rule=rule, severity="blocker", message=message, source=ctx.catalog.cite(keys))


def _index_findings(spec: Spec, catalog: Catalog) -> Iterator[Finding]:
    """Indices beyond ``gpus.count`` (``validate`` runs this too)."""
    section: GpuSection | None = spec.gpu
    assert section is not None
    for key, groups in (("settings", section.settings), ("mig", section.mig)):
        for group in groups:
            for sel in () if group.gpus == "all" else group.gpus:
                if isinstance(sel, int) and sel >= spec.gpus.count:
                    yield Finding(
                        rule="gpu-settings-unknown-gpu",
                        severity="blocker",
                        message=f"gpu.{key}: GPU index {sel} is beyond gpus.count {spec.gpus.count} "
                        f"(indices 0-{spec.gpus.count - 1})",
                        source=catalog.cite(KEYS),
                    )


# --- the card's own limits --------------------------------------------------------------------------


def limit_findings(ctx: PlanContext) -> Iterator[Finding]:
    """Each wanted value against the card's NVML limits; a warning where they were not read."""
    gpus, problems = wanted(ctx)
    yield from problems
    for want in gpus:
        state = want.target.state
        if state is None:
            if want.values:
                yield Finding(
                    rule="gpu-settings-unchecked",
                    severity="warning",
                    message=f"gpu.settings for {want.target.label} not checked against the card's limits: "
                    + because("nvidia-smi -q was not read", _why(ctx))
                    + "; nvidia-smi refuses a value outside them at apply",
                    source=ctx.catalog.cite(KEYS),
                    unconfirmed=True,
                )
            continue
        for message in _outside(want.values, state):
            yield _blocker(ctx, "gpu-setting-outside-limits", message)


def _why(ctx: PlanContext) -> str:
    states = ctx.facts.gpu_state
    return states.unknown if isinstance(states, Unknown) else "read"


def _outside(values: dict[str, Any], state: GpuState) -> Iterator[str]:
    power = values.get("power_limit_w")
    limits = state.power
    if power is not None and limits.min_w is not None and limits.max_w is not None:
        if not limits.min_w <= power <= limits.max_w:
            edge = "Max" if power > limits.max_w else "Min"
            yield (
                f"gpu.settings power_limit_w {power} W for {state.name} is "
                f"{'above' if edge == 'Max' else 'below'} its {edge} Power Limit "
                f"{_w(limits.max_w if edge == 'Max' else limits.min_w)} (the card's own NVML limits, "
                f"nvidia-smi -q: {_w(limits.min_w)} to {_w(limits.max_w)}, default {_w(limits.default_w)})"
            )
    elif power is not None:
        yield f"gpu.settings power_limit_w {power} W for {state.name}: the card shows no power limits (N/A)"
    yield from _clock_limits(values, state)
    if values.get("ecc") is not None and state.ecc_current is None:
        yield f"gpu.settings ecc for {state.name}: the card has no ECC mode (nvidia-smi -q ECC Mode: N/A)"


def _clock_limits(values: dict[str, Any], state: GpuState) -> Iterator[str]:
    top = state.max_clocks
    asked: list[tuple[str, int, float | None, str]] = []
    if (app := values.get("application_clocks")) is not None:
        asked += [
            ("application_clocks.graphics_mhz", app.graphics_mhz, top.graphics_mhz, "Graphics"),
            ("application_clocks.memory_mhz", app.memory_mhz, top.memory_mhz, "Memory"),
        ]
    if (gpu := values.get("locked_gpu_clocks")) is not None:
        asked.append(("locked_gpu_clocks.max_mhz", gpu.max_mhz, top.graphics_mhz, "Graphics"))
    if (mem := values.get("locked_memory_clocks")) is not None:
        asked.append(("locked_memory_clocks.max_mhz", mem.max_mhz, top.memory_mhz, "Memory"))
    for name, value, limit, kind in asked:
        if limit is None:
            yield f"gpu.settings {name} for {state.name}: the card shows no Max Clocks {kind} (N/A)"
        elif value > limit:
            yield (
                f"gpu.settings {name} {value} MHz for {state.name} is above its Max Clocks {kind} "
                f"{limit:g} MHz (the card's own NVML limit, nvidia-smi -q)"
            )


def _w(value: float | None) -> str:
    return "N/A" if value is None else f"{value:g} W"


# --- drift ------------------------------------------------------------------------------------------


def drift_findings(ctx: PlanContext) -> Iterator[Finding]:
    """An enforced power limit below the card's default that the spec does not set."""
    states = ctx.facts.gpu_state
    if isinstance(states, Unknown):
        return
    managed = _power_managed(ctx)
    for state in states:
        enforced, default = state.power.enforced_w, state.power.default_w
        if enforced is None or default is None or enforced >= default or state.uuid in managed:
            continue
        yield Finding(
            rule="gpu-power-limit-drift",
            severity="warning",
            message=f"{state.name}: enforced power limit {_w(enforced)} < default {_w(default)}, set by "
            "someone else (the spec does not set it): it caps the GPU's clocks under load; set gpu.settings "
            f"power_limit_w to keep it, or restore it with nvidia-smi -i {state.index} -pl {default:g}",
            source=ctx.catalog.cite(KEYS),
        )


def _power_managed(ctx: PlanContext) -> set[str | None]:
    section = ctx.spec.gpu
    if section is None:
        return set()
    groups = [g for g in section.settings if g.power_limit_w is not None]
    return {
        t.state.uuid for g in groups for t in resolve(g.gpus, ctx.facts, ctx.spec.gpus.count)[0] if t.state
    }


# --- steps ------------------------------------------------------------------------------------------


def persistence_step(ctx: PlanContext, enabled: bool) -> Step:
    """``nvidia-persistenced.service`` enabled and active (or disabled and inactive)."""
    runtime = ctx.facts.gpu_runtime
    unit = runtime.unit(PERSISTENCED) if runtime is not None else None
    want = ("active", "enabled") if enabled else ("inactive", "disabled")
    target = f"{PERSISTENCED} {want[0]}, {want[1]}"
    if unit is not None and (unit.active, unit.enabled) == want:
        return noop(Component.GPU_SETTINGS, current=target, target=PERSISTENCED, reason=f"{target}")
    current = f"{unit.active or 'unknown'}, {unit.enabled or 'unknown'}" if unit else "not observed"
    verb = "enable and start" if enabled else "stop and disable"
    return Step(
        component=Component.GPU_SETTINGS,
        action=Action.CONFIGURE,
        current=current,
        target=PERSISTENCED,
        tags=_TAGS,
        reason=f"{verb} {PERSISTENCED}"
        + (
            " (NVIDIA's recommended persistence; legacy nvidia-smi -pm is near end of life)"
            if enabled
            else ""
        ),
    )


def daemon_missing(ctx: PlanContext, enabled: bool) -> Iterator[Finding]:
    """``gpu.persistence: true`` where systemd has no nvidia-persistenced.service and the plan does
    not install a driver (which brings it)."""
    from provision.components.dkms import driver_changes

    runtime = ctx.facts.gpu_runtime
    unit = runtime.unit(PERSISTENCED) if runtime is not None else None
    if enabled and unit is not None and not unit.exists and not driver_changes(ctx):
        yield _blocker(
            ctx,
            "gpu-persistenced-missing",
            f"gpu.persistence: true, but systemd has no {PERSISTENCED} here (LoadState {unit.load}) and this "
            "plan installs no driver: it comes with the driver's utilities (NVIDIA's nvidia-persistenced "
            "package; nvidia-compute-utils-<branch> on Ubuntu); install them, or leave gpu.persistence unset",
            ("PERSISTENCED",),
        )


def ecc_pending_findings(ctx: PlanContext) -> Iterator[Finding]:
    """A GPU whose pending ECC mode differs from the current one: it changes at the next reboot."""
    states = ctx.facts.gpu_state
    if isinstance(states, Unknown):
        return
    for state in states:
        if (
            state.ecc_current is not None
            and state.ecc_pending is not None
            and state.ecc_current != state.ecc_pending
        ):
            yield Finding(
                rule="gpu-ecc-pending-reboot",
                severity="warning",
                message=f"{state.name}: ECC mode current {_on(state.ecc_current)}, pending "
                f"{_on(state.ecc_pending)}: it changes at the next reboot (nvmlDeviceSetEccMode)",
                source=ctx.catalog.cite(KEYS),
            )


def observed_differences(want: Wanted) -> list[str]:
    """What differs between the wanted and the observed values of one GPU (clocks locked by the boot
    unit are not shown by nvidia-smi: :func:`boot_unit_step` holds them)."""
    state, values = want.target.state, want.values
    if state is None:
        return [f"{want.target.label}: not observed"] if set(values) - {"ecc"} else []
    out = []
    power = values.get("power_limit_w")
    if power is not None and state.power.requested_w != power:
        out.append(f"{state.name}: power limit {_w(state.power.requested_w)} -> {power} W")
    app = values.get("application_clocks")
    seen = state.applications_clocks
    if app is not None and (seen.memory_mhz, seen.graphics_mhz) != (app.memory_mhz, app.graphics_mhz):
        out.append(
            f"{state.name}: application clocks {_mhz(seen.memory_mhz)},{_mhz(seen.graphics_mhz)} -> "
            f"{app.memory_mhz},{app.graphics_mhz} MHz (memory,graphics)"
        )
    mode = values.get("compute_mode")
    if mode is not None and state.compute_mode != mode:
        out.append(f"{state.name}: compute mode {state.compute_mode or 'unknown'} -> {mode}")
    return out


def _mhz(value: float | None) -> str:
    return "N/A" if value is None else f"{value:g}"


def settings_step(ctx: PlanContext) -> Step:
    """The settings now, where an observed value differs; a no-op saying what was compared."""
    gpus, _ = wanted(ctx)
    diffs = [d for w in gpus for d in observed_differences(w)]
    if not diffs:
        locked = any("locked_gpu_clocks" in w.values or "locked_memory_clocks" in w.values for w in gpus)
        return noop(
            Component.GPU_SETTINGS,
            target="settings",
            reason="power limits, application clocks and compute modes as the spec sets them"
            + ("; locked clocks held by the boot unit" if locked else ""),
        )
    return Step(
        component=Component.GPU_SETTINGS,
        action=Action.CONFIGURE,
        current=f"{len(diffs)} setting(s) differ",
        target="settings",
        tags=_TAGS,
        reason="set with nvidia-smi now (argv lists, no shell): " + "; ".join(diffs),
    )


def ecc_step(ctx: PlanContext) -> Step:
    """ECC's pending mode where it differs from the spec (it takes effect at the next reboot)."""
    gpus, _ = wanted(ctx)
    changes, pending = [], []
    for want in gpus:
        ecc, state = want.values.get("ecc"), want.target.state
        if ecc is None or (state is not None and state.ecc_current is None):
            continue
        if state is None or state.ecc_pending != ecc:
            changes.append(
                f"{want.target.label}: ECC {_on(state.ecc_current if state else None)} -> {_on(ecc)}"
            )
        elif state.ecc_current != ecc:
            pending.append(f"{state.name}: ECC {_on(state.ecc_current)}, pending {_on(ecc)}")
    if changes:
        return Step(
            component=Component.GPU_SETTINGS,
            action=Action.CONFIGURE,
            current="; ".join(changes),
            target="ecc",
            tags=(*_TAGS, ECC_TAG),
            reason="set the pending ECC mode with nvidia-smi -e; it takes effect at the next reboot: "
            + "; ".join(changes),
        )
    reason = (
        "ECC change already pending, takes effect at the next reboot: " + "; ".join(pending)
        if pending
        else "ECC modes as the spec sets them"
    )
    return noop(Component.GPU_SETTINGS, target="ecc", reason=reason)


def _on(value: bool | None) -> str:
    return {True: "on", False: "off"}.get(value, "unknown")  # type: ignore[arg-type]


def boot_unit_step(ctx: PlanContext) -> Step:
    """The boot unit written and enabled unless the one on disk is this text and enabled."""
    from provision.detect.domains.gpu_runtime import BOOT_UNIT, BOOT_UNIT_PATH

    runtime = ctx.facts.gpu_runtime
    text = unit_text(ctx)
    if runtime is None or isinstance(runtime.boot_unit, Unknown):
        why = "not probed" if runtime is None else runtime.boot_unit.unknown  # type: ignore[union-attr]
        current = because("not observed", why)
    elif not runtime.boot_unit.present:
        current = "absent"
    elif runtime.boot_unit.text != text:
        current = "another text (the spec's settings changed, or it was edited)"
    else:
        unit = runtime.unit(BOOT_UNIT)
        if unit is None or unit.enabled == "enabled":
            return noop(
                Component.GPU_SETTINGS,
                current=BOOT_UNIT_PATH,
                target=BOOT_UNIT,
                reason=f"{BOOT_UNIT_PATH} applies the spec's settings at boot, after {PERSISTENCED}",
            )
        current = f"{BOOT_UNIT} {unit.enabled or 'not enabled'}"
    return Step(
        component=Component.GPU_SETTINGS,
        action=Action.CONFIGURE,
        current=current,
        target=BOOT_UNIT,
        tags=_TAGS,
        reason=f"write and enable {BOOT_UNIT_PATH}: a oneshot unit ordered after {PERSISTENCED} that sets "
        "the power limits, clocks and compute modes and creates the MIG instances at every boot (none of "
        "them survives a reboot or driver unload)",
    )


# --- argv lists ---------------------------------------------------------------------------------


def gpu_argvs(ident: str, values: dict[str, Any]) -> list[list[str]]:
    """nvidia-smi argv lists for one GPU's runtime settings (not ECC), in a fixed order."""
    base = ["nvidia-smi", "-i", ident]
    out: list[list[str]] = []
    if (power := values.get("power_limit_w")) is not None:
        out.append([*base, "-pl", str(power)])
    if (app := values.get("application_clocks")) is not None:
        out.append([*base, "-ac", f"{app.memory_mhz},{app.graphics_mhz}"])
    if (gpu := values.get("locked_gpu_clocks")) is not None:
        out.append([*base, "-lgc", f"{gpu.min_mhz},{gpu.max_mhz}"])
    if (mem := values.get("locked_memory_clocks")) is not None:
        out.append([*base, "-lmc", f"{mem.min_mhz},{mem.max_mhz}"])
    if (mode := values.get("compute_mode")) is not None:
        out.append([*base, "-c", _COMPUTE_MODE[mode]])
    return out


def settings_argvs(ctx: PlanContext, only_changed: bool = False) -> list[list[str]]:
    """Every GPU's settings argv lists (those of GPUs whose observed values differ, with
    ``only_changed``; locked clocks are always set again then, as they cannot be observed)."""
    if ctx.spec.gpu is None or not ctx.spec.gpu.settings:
        return []
    gpus, _ = wanted(ctx)
    return [
        argv
        for w in gpus
        if not only_changed
        or observed_differences(w)
        or {"locked_gpu_clocks", "locked_memory_clocks"} & set(w.values)
        for argv in gpu_argvs(w.target.ident, w.values)
    ]


def ecc_argvs(ctx: PlanContext) -> list[list[str]]:
    """``nvidia-smi -i ID -e 0|1`` for each GPU whose pending ECC mode differs from the spec."""
    gpus, _ = wanted(ctx)
    out = []
    for want in gpus:
        ecc, state = want.values.get("ecc"), want.target.state
        if ecc is not None and (
            state is None or (state.ecc_current is not None and state.ecc_pending != ecc)
        ):
            out.append(["nvidia-smi", "-i", want.target.ident, "-e", "1" if ecc else "0"])
    return out
