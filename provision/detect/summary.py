"""Readable summary of Facts for ``provision detect``: one line per fact, unknowns with their reason."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision.detect.facts import Facts, Gpu, GpuHealth, GpuState, PciDevice, Unknown


def render_facts(facts: Facts, console: Console) -> None:
    """Print a two-column table: fact name, value or ``unknown: reason``."""
    table = Table(title=f"Facts for {facts.host}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for name, text in _rows(facts):
        table.add_row(name, text)
    console.print(table)


def _rows(facts: Facts) -> list[tuple[str, str]]:
    return [
        ("os", _or_unknown(facts.os, lambda o: o.pretty_name or f"{o.id} {o.version_id}")),
        ("kernel", _or_unknown(facts.kernel, lambda k: f"{k.release} (built with {k.compiler or '?'})")),
        ("driver", _or_unknown(facts.driver, lambda d: f"{d.version} ({d.flavor} kernel modules, loaded)")),
        ("gpus", _or_unknown(facts.gpus, _gpus)),
        (
            "topology",
            _or_unknown(
                facts.topology,
                lambda t: (
                    " ".join(f"{a}-{b}:{t.links[a][b]}" for a in t.gpus for b in t.gpus if a < b)
                    or f"{len(t.gpus)} GPU(s)"
                ),
            ),
        ),
        (
            "packages",
            _or_unknown(
                facts.packages,
                lambda ps: (
                    f"{len(ps)} NVIDIA stack packages, "
                    f"{sum(p.held for p in ps)} held, {sum(p.unfinished for p in ps)} broken"
                ),
            ),
        ),
        (
            "cuda",
            _or_unknown(
                facts.cuda,
                lambda c: (
                    ", ".join(str(v) for v in c.installed)
                    + (f"; nvcc {c.nvcc_version}" if c.nvcc_version else "")
                ),
            ),
        ),
        ("torch", _or_unknown(facts.torch, lambda t: f"{t.version} (CUDA {t.cuda}) in {t.venv}")),
        ("nvswitch", _or_unknown(facts.nvidia_pci, _nvswitch)),
        (
            "fabric",
            _or_unknown(facts.fabric, lambda f: ", ".join(f"{a} / {b}" for a, b in f.states) or "none"),
        ),
        (
            "dkms",
            _or_unknown(
                facts.dkms,
                lambda d: (
                    "; ".join(f"{v} {k}: {st}" for v, k, st in d.modules) or "no nvidia module registered"
                ),
            ),
        ),
        (
            "nouveau",
            _or_unknown(
                facts.nouveau,
                lambda n: (
                    ("loaded" if n.loaded else "not loaded")
                    + (f", blacklisted by {', '.join(n.blacklisted_by)}" if n.blacklisted_by else "")
                ),
            ),
        ),
        (
            "package locks",
            _or_unknown(
                facts.package_locks,
                lambda a: (
                    f"{facts.package_manager().lock_noun} {'present' if a.pins else 'absent'}"
                    + (
                        "; old pins file present (read after NVIDIA's; apply moves it)"
                        if a.legacy_pins is not None
                        else ""
                    )
                    + ", "
                    f"{facts.package_manager().guard_noun} {'present' if a.upgrade_guard else 'absent'}"
                ),
            ),
        ),
        ("secure boot", _secure_boot(facts)),
        ("binding", _binding(facts)),
        (
            "initramfs",
            _or_unknown(facts.initramfs, lambda i: i.image or "none (the kernel boots without one)"),
        ),
        ("gpu health", _or_unknown(facts.gpu_health, _health)),
        ("gpu settings", _or_unknown(facts.gpu_state, _settings)),
        (
            "libcuda",
            _or_unknown(facts.ld_cache, lambda c: c.first("libcuda.so.1") or "not in the loader cache"),
        ),
    ]


def _binding(facts: Facts) -> str:
    hw = facts.hardware
    if isinstance(hw, Unknown):
        return _or_unknown(hw, str)
    gpus = hw.gpus
    if isinstance(gpus, Unknown):
        return _or_unknown(gpus, str)
    parts = [
        f"{g.bdf}: " + (g.driver.unknown if isinstance(g.driver, Unknown) else g.driver or "unbound")
        for g in gpus
    ]
    return escape("; ".join(parts) or "no GPU function")


def _health(health: tuple[GpuHealth, ...]) -> str:
    rows = []
    for h in health:
        flags = [
            "row remap pending" if h.remapped_rows_pending else "",
            "row remapping FAILED" if h.remapping_failed else "",
            f"{h.dram_uncorrectable_volatile} uncorrectable DRAM errors"
            if h.dram_uncorrectable_volatile
            else "",
            *(e for e in h.clock_events if e != "Idle"),
        ]
        rows.append(f"{h.bdf}: {', '.join(f for f in flags if f) or 'ok'}")
    return "\n".join(rows) or "no GPU"


def _settings(states: tuple[GpuState, ...]) -> str:
    """Per GPU: the power limit in force and its range, compute mode, ECC and MIG (and pending modes)."""

    def mode(current: bool | None, pending: bool | None) -> str:
        word = {True: "on", False: "off"}
        now = word.get(current, "n/a") if current is not None else "n/a"
        return now if pending in (None, current) else f"{now} (pending {word[pending]})"

    rows = []
    for s in states:
        p = s.power
        power = (
            "power n/a"
            if p.enforced_w is None
            else (
                f"{p.enforced_w:g} W (default {p.default_w:g}, {p.min_w:g}-{p.max_w:g})"
                if None not in (p.default_w, p.min_w, p.max_w)
                else f"{p.enforced_w:g} W"
            )
        )
        rows.append(
            f"{s.bdf}: {power}, {s.compute_mode or 'compute mode n/a'}, "
            f"ECC {mode(s.ecc_current, s.ecc_pending)}, MIG {mode(s.mig_current, s.mig_pending)}"
        )
    return "\n".join(rows) or "no GPU"


def _gpus(gpus: tuple[Gpu, ...]) -> str:
    lines = [
        f"{g.index}: {g.name}, cc {g.compute_capability}, {g.memory_total_mib} MiB, "
        f"PCIe gen {g.pcie_gen_current}/{g.pcie_gen_max} x{g.pcie_width_current}/{g.pcie_width_max}"
        for g in gpus
    ]
    return "\n".join(lines) or "none"


def _or_unknown(value: object, describe: object) -> str:
    if isinstance(value, Unknown):
        return f"[yellow]unknown:[/] {escape(value.unknown)}"
    return escape(str(describe(value)))  # type: ignore[operator]


def _nvswitch(devices: tuple[PciDevice, ...]) -> str:
    switches = [d.bdf for d in devices if d.is_nvswitch]
    return f"{len(switches)} NVSwitch function(s)" if switches else "no NVSwitch in lspci"


def _secure_boot(facts: Facts) -> str:
    hw = facts.hardware
    if isinstance(hw, Unknown):
        return _or_unknown(hw, str)
    state = _or_unknown(
        hw.secure_boot, lambda sb: ("enabled" if sb.enabled else "disabled") + f" ({sb.source})"
    )
    return state + _mok(facts)


def _mok(facts: Facts) -> str:
    mok = facts.mok
    if isinstance(mok, Unknown):
        return ""
    cert = mok.signing_certificate
    if mok.signing_enrolled:
        return f"; DKMS key {cert} enrolled"
    if cert == mok.certificate and not mok.key_present:
        return f"; DKMS key {cert} absent"
    return f"; DKMS key {cert} not enrolled"
