"""What the running system shows for each checklist item: confirmed, not confirmed, or not observable.

Pure functions of :class:`~provision.detect.facts.Facts` (hardware facts plus the GPU query
and topology). A firmware setting is never read directly: each observer reads its visible
effect (BAR1 size for Above 4G decoding, ``/sys/firmware/efi`` for CSM, ``ACSCtl`` for ACS)
and says which reading it used. Decision items (Secure Boot, SR-IOV, cooling at probe time)
have no right answer Linux can judge: they are ``observed`` with the reading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from provision.detect.facts import Facts, Gpu, GpuHardware, Hardware, Topology, Unknown
from provision.models import Frozen
from provision.unknown import because

Status = Literal["confirmed", "not-confirmed", "observed", "not-observable"]

SMALL_BAR1_MIB = 256
"""BAR1 of a GPU whose large aperture was not mapped (32-bit window); NVIDIA's data-center
GPUs expose many GiB with Above 4G decoding (nvidia-smi -q "BAR1 Memory Usage")."""


class Observation(Frozen):
    """One item's state on the running system, with the reading or the reason."""

    status: Status
    value: str


Observer = Callable[[Facts, Hardware], Observation]


def observe(item_id: str, facts: Facts) -> Observation:
    """The observation for checklist item ``item_id`` from ``facts``.

    Items without an observer (spec-added ids) are ``not-observable``; so is every item
    when hardware facts are missing, with that reason.
    """
    observer = OBSERVERS.get(item_id)
    if observer is None:
        return _unobservable("no Linux-side check is defined for this item")
    if isinstance(facts.hardware, Unknown):
        return _unobservable(facts.hardware.unknown)
    return observer(facts, facts.hardware)


def _unobservable(reason: str) -> Observation:
    return Observation(status="not-observable", value=reason)


def _result(problems: Sequence[str], unknowns: Sequence[str], good: str) -> Observation:
    if problems:
        return Observation(status="not-confirmed", value="; ".join([*problems, *unknowns]))
    if unknowns:
        return _unobservable("; ".join(unknowns))
    return Observation(status="confirmed", value=good)


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


# --- BAR1, boot mode -------------------------------------------------------------------------------


def above_4g(_: Facts, hw: Hardware) -> Observation:
    """BAR1 Total above 256 MiB on every GPU: the large aperture was mapped above 4 GiB."""
    gpus = hw.gpus
    if isinstance(gpus, Unknown):
        return _unobservable(f"GPU PCI devices: {gpus.unknown}")
    bars = _bar1(gpus)
    small = [f"{bdf} BAR1 {bar1} MiB" for bdf, bar1, _ in bars if bar1 <= SMALL_BAR1_MIB]
    good = ", ".join(f"{bdf} BAR1 {_gib(bar1)}" for bdf, bar1, _ in bars)
    return _result(small, _bar1_unknown(gpus), f"{good} (mapped above 4 GiB)")


def resizable_bar(_: Facts, hw: Hardware) -> Observation:
    """BAR1 at least the GPU memory: the whole memory is mappable (large or resized BAR)."""
    gpus = hw.gpus
    if isinstance(gpus, Unknown):
        return _unobservable(f"GPU PCI devices: {gpus.unknown}")
    pairs = [(bdf, bar1, memory) for bdf, bar1, memory in _bar1(gpus) if memory is not None]
    small = [f"{bdf} BAR1 {_gib(b)} < memory {_gib(m)}" for bdf, b, m in pairs if b < m]
    good = ", ".join(f"{bdf} BAR1 {_gib(b)} >= memory {_gib(m)}" for bdf, b, m in pairs)
    return _result(small, _bar1_unknown(gpus), good)


def _bar1(gpus: Sequence[GpuHardware]) -> list[tuple[str, int, int | None]]:
    """(BDF, BAR1 MiB, memory MiB or None) for the GPUs whose BAR1 is known."""
    return [
        (g.bdf, g.bar1_total_mib, g.memory_total_mib if isinstance(g.memory_total_mib, int) else None)
        for g in gpus
        if isinstance(g.bar1_total_mib, int)
    ]


def _bar1_unknown(gpus: Sequence[GpuHardware]) -> list[str]:
    return [
        f"{g.bdf} BAR1: {g.bar1_total_mib.unknown}" for g in gpus if isinstance(g.bar1_total_mib, Unknown)
    ]


def csm_off(_: Facts, hw: Hardware) -> Observation:
    """``/sys/firmware/efi`` exists: the kernel was started by UEFI firmware, not CSM."""
    if isinstance(hw.boot_mode, Unknown):
        return _unobservable(hw.boot_mode.unknown)
    if hw.boot_mode == "uefi":
        return Observation(status="confirmed", value="booted in UEFI mode (/sys/firmware/efi present)")
    return Observation(status="not-confirmed", value="legacy (CSM) boot: /sys/firmware/efi absent")


# --- PCIe link, power --------------------------------------------------------------------------


def pcie_link(facts: Facts, hw: Hardware) -> Observation:
    """Current PCIe generation and width (nvidia-smi) equal to the maximum on every GPU (FF-16)."""
    if isinstance(facts.gpus, Unknown):
        maxima = _sysfs_maxima(hw)
        return _unobservable(because("current link needs nvidia-smi", facts.gpus.unknown) + maxima)
    problems: list[str] = []
    good: list[str] = []
    for gpu in facts.gpus:
        line = _link_line(gpu)
        (good if _link_full(gpu) else problems).append(line)
    if problems:
        problems.append("idle GPUs drop to Gen1 legitimately: re-check under load before acting")
    return _result(problems, [], ", ".join(good))


def _link_line(gpu: Gpu) -> str:
    return (
        f"GPU {gpu.index} Gen{gpu.pcie_gen_current} x{gpu.pcie_width_current} "
        f"(max Gen{gpu.pcie_gen_max} x{gpu.pcie_width_max})"
    )


def _link_full(gpu: Gpu) -> bool:
    return (gpu.pcie_gen_current, gpu.pcie_width_current) == (gpu.pcie_gen_max, gpu.pcie_width_max)


def _sysfs_maxima(hw: Hardware) -> str:
    if isinstance(hw.gpus, Unknown):
        return ""
    maxima = ", ".join(f"{g.bdf} max {g.link_max}" for g in hw.gpus if g.link_max)
    return f"; sysfs: {maxima}" if maxima else ""


def power_profile(_: Facts, hw: Hardware) -> Observation:
    """The OS side of the profile: cpufreq governor ``performance``, ASPM not ``powersave``."""
    power = hw.power
    if isinstance(power, Unknown):
        return _unobservable(power.unknown)
    aspm = f"PCIe ASPM policy {power.aspm_policy}" if power.aspm_policy else "ASPM policy not readable"
    if not power.governors:
        return _unobservable(f"no cpufreq governor readable (VM or no cpufreq driver); {aspm}")
    slow = sorted({g for g in power.governors if g != "performance"})
    problems = [f"cpufreq governor {', '.join(slow)}"] if slow else []
    if power.aspm_policy in ("powersave", "powersupersave"):
        problems.append(aspm)
    epp = f"; EPP {', '.join(sorted(set(power.epp)))}" if power.epp else ""
    return _result(problems, [], f"governor performance on {len(power.governors)} policies{epp}; {aspm}")


# --- ACS and IOMMU (FF-14) --------------------------------------------------------------------------


def acs_iommu(_: Facts, hw: Hardware) -> Observation:
    """No ACS redirection on the bridges above the GPUs, and the IOMMU off or in passthrough."""
    gpus = hw.gpus
    if isinstance(gpus, Unknown):
        return _unobservable(f"GPU PCI devices: {gpus.unknown}")
    acs_problems, acs_unknown, acs_good = _acs_state(gpus, hw)
    iommu_problems, iommu_unknown, iommu_good = _iommu_state(hw)
    good = f"{acs_good}; {iommu_good}"
    return _result([*acs_problems, *iommu_problems], [*acs_unknown, *iommu_unknown], good)


def _acs_state(gpus: Sequence[GpuHardware], hw: Hardware) -> tuple[list[str], list[str], str]:
    unknown = [
        f"{g.bdf} upstream bridges: {g.upstream.unknown}" for g in gpus if isinstance(g.upstream, Unknown)
    ]
    bridges = sorted({b for g in gpus if not isinstance(g.upstream, Unknown) for b in g.upstream})
    if unknown:
        return [], unknown, ""
    if not bridges:
        return [], [], "no PCIe bridges above the GPUs (root bus)"
    if isinstance(hw.acs, Unknown):
        return [], [f"ACS on bridges {', '.join(bridges)}: {hw.acs.unknown}"], ""
    redirecting = [(b, hw.acs[b].redirecting) for b in bridges if b in hw.acs and hw.acs[b].redirecting]
    problems = [
        f"ACS redirect on bridge {b} ({' '.join(f + '+' for f in flags)})" for b, flags in redirecting
    ]
    return problems, [], f"no ACS redirect on bridges {', '.join(bridges)}"


def _iommu_state(hw: Hardware) -> tuple[list[str], list[str], str]:
    if isinstance(hw.iommu, Unknown):
        return [], [f"IOMMU: {hw.iommu.unknown}"], ""
    if hw.iommu.groups == 0:
        return [], [], "IOMMU off (no IOMMU groups)"
    if isinstance(hw.cmdline, Unknown):
        return [], [f"kernel command line: {hw.cmdline.unknown}"], ""
    if hw.cmdline.passthrough:
        return [], [], f"IOMMU in passthrough (iommu=pt, {hw.iommu.groups} groups)"
    return (
        [f"IOMMU translating ({hw.iommu.groups} groups) and no iommu=pt on the kernel command line"],
        [],
        "",
    )


# --- Decisions: SR-IOV, Secure Boot ------------------------------------------------------------------


def sr_iov(_: Facts, hw: Hardware) -> Observation:
    """``sriov_totalvfs`` per GPU: the VFs the device offers (0: no SR-IOV capability)."""
    gpus = hw.gpus
    if isinstance(gpus, Unknown):
        return _unobservable(f"GPU PCI devices: {gpus.unknown}")
    if any(isinstance(g.sriov_totalvfs, Unknown) for g in gpus):
        return _unobservable(
            "; ".join(
                f"{g.bdf}: {g.sriov_totalvfs.unknown}" for g in gpus if isinstance(g.sriov_totalvfs, Unknown)
            )
        )
    return Observation(status="observed", value=", ".join(_vfs(g) for g in gpus))


def _vfs(gpu: GpuHardware) -> str:
    return f"{gpu.bdf}: {gpu.sriov_totalvfs} VFs offered" if gpu.sriov_totalvfs else f"{gpu.bdf}: no SR-IOV"


def secure_boot(_: Facts, hw: Hardware) -> Observation:
    """Secure Boot state; when on, DKMS-built modules need the MOK console step (FF-11)."""
    state = hw.secure_boot
    if isinstance(state, Unknown):
        if hw.boot_mode == "legacy":
            return Observation(status="observed", value="off: legacy (CSM) boot has no Secure Boot")
        return _unobservable(state.unknown)
    if state.enabled:
        value = f"enabled ({state.source}): use signed modules or enroll the MOK at the console"
    else:
        value = f"disabled ({state.source})"
    return Observation(status="observed", value=value)


# --- Placement, cooling, power supply, memory, storage ---------------------------------------------


def slot_placement(facts: Facts, hw: Hardware) -> Observation:
    """All GPUs on one NUMA node, and no GPU pair on a NODE or SYS path (FF-15)."""
    gpus = hw.gpus
    if isinstance(gpus, Unknown):
        return _unobservable(f"GPU PCI devices: {gpus.unknown}")
    nodes = {g.bdf: g.numa_node for g in gpus}
    far = _far_pairs(facts.topology)
    problems = [f"path {pair}" for pair in far]
    if len(set(nodes.values()) - {None}) > 1:
        problems.insert(0, ", ".join(f"{bdf} on NUMA node {n}" for bdf, n in nodes.items()))
    return _result(problems, [], _placement_good(nodes, hw))


def _far_pairs(topology: Topology | Unknown) -> list[str]:
    return [] if isinstance(topology, Unknown) else topology.far_pairs()


def _placement_good(nodes: dict[str, int | None], hw: Hardware) -> str:
    known = sorted({n for n in nodes.values() if n is not None})
    if known:
        return f"{len(nodes)} GPU(s) on NUMA node {known[0]}"
    single = not isinstance(hw.numa, Unknown) and len(hw.numa) == 1
    where = "one NUMA node on this host" if single else "sysfs numa_node -1 (no affinity reported)"
    return f"{len(nodes)} GPU(s); {where}"


def cooling(facts: Facts, _: Hardware) -> Observation:
    """Temperatures at probe time (nvidia-smi); only a reading under sustained load settles it."""
    if isinstance(facts.gpus, Unknown):
        return _unobservable(f"temperatures need nvidia-smi: {facts.gpus.unknown}")
    readings = ", ".join(
        f"GPU {g.index} {_temp(g.temperature_gpu_c)} core / {_temp(g.temperature_memory_c)} memory"
        for g in facts.gpus
    )
    return Observation(status="observed", value=f"{readings} at probe time; re-check under load")


def _temp(value: float | None) -> str:
    return "?" if value is None else f"{value:g} °C"


def psu_sizing(facts: Facts, _: Hardware) -> Observation:
    """Not observable: Linux cannot read the PSU rating; the GPU power limits are shown."""
    limits = "GPU power limits unknown"
    if not isinstance(facts.gpus, Unknown):
        watts = [g.power_limit_w for g in facts.gpus if g.power_limit_w is not None]
        limits = f"GPU power limits sum to {sum(watts):g} W ({len(watts)} GPU(s))"
    return _unobservable(f"the PSU rating is not visible to Linux (read the label or BMC); {limits}")


def host_memory(facts: Facts, hw: Hardware) -> Observation:
    """MemTotal at least the total GPU memory (this project's 1x minimum)."""
    if isinstance(hw.memory_total_kib, Unknown):
        return _unobservable(hw.memory_total_kib.unknown)
    gpu_mib = _gpu_memory_mib(facts, hw)
    if gpu_mib is None:
        return _unobservable("total GPU memory unknown (nvidia-smi)")
    host_mib = hw.memory_total_kib / 1024
    value = f"host {_gib(host_mib)} for {_gib(gpu_mib)} GPU memory (2x recommended: {_gib(2 * gpu_mib)})"
    return Observation(status="confirmed" if host_mib >= gpu_mib else "not-confirmed", value=value)


def _gpu_memory_mib(facts: Facts, hw: Hardware) -> int | None:
    if not isinstance(facts.gpus, Unknown) and all(g.memory_total_mib for g in facts.gpus) and facts.gpus:
        return sum(g.memory_total_mib or 0 for g in facts.gpus)
    if isinstance(hw.gpus, Unknown) or not hw.gpus:
        return None
    sizes = [g.memory_total_mib for g in hw.gpus]
    return sum(s for s in sizes if isinstance(s, int)) if all(isinstance(s, int) for s in sizes) else None


def fast_storage(_: Facts, __: Hardware) -> Observation:
    """Not observable: provision does not know which disk will hold the models."""
    return _unobservable(
        "which disk holds the models is not known to provision; run the lsblk and fio checks"
    )


OBSERVERS: dict[str, Observer] = {
    "above-4g-decoding": above_4g,
    "resizable-bar": resizable_bar,
    "csm-off": csm_off,
    "pcie-link-speed": pcie_link,
    "power-profile": power_profile,
    "acs-iommu": acs_iommu,
    "sr-iov": sr_iov,
    "secure-boot": secure_boot,
    "slot-placement": slot_placement,
    "cooling": cooling,
    "psu-sizing": psu_sizing,
    "host-memory": host_memory,
    "fast-storage": fast_storage,
}
"""Observer per default item id; a spec item replacing a default keeps its observer."""


def machine_summary(facts: Facts) -> tuple[str, ...]:
    """Header lines describing the host as detected: board, CPU, memory, GPUs' PCI addresses."""
    hw = facts.hardware
    if isinstance(hw, Unknown):
        return (f"Hardware: {hw.unknown}",)
    return tuple(line for line in (_board_line(hw), _cpu_line(hw), _memory_line(hw), _gpus_line(hw)) if line)


def _board_line(hw: Hardware) -> str:
    if isinstance(hw.board, Unknown):
        return f"Board: {hw.board.unknown}"
    names = [n for n in (hw.board.vendor, hw.board.product, hw.board.board) if n]
    bios = f", BIOS {hw.board.bios_version}" if hw.board.bios_version else ""
    return f"Board: {' '.join(names) or 'unnamed'}{bios}"


def _cpu_line(hw: Hardware) -> str:
    if isinstance(hw.cpu, Unknown):
        return f"CPU: {hw.cpu.unknown}"
    vm = f", {hw.cpu.hypervisor} virtual machine" if hw.cpu.hypervisor else ""
    return f"CPU: {hw.cpu.model}, {hw.cpu.sockets} socket(s), {hw.cpu.numa_nodes} NUMA node(s){vm}"


def _memory_line(hw: Hardware) -> str:
    if isinstance(hw.memory_total_kib, Unknown):
        return f"Memory: {hw.memory_total_kib.unknown}"
    return f"Memory: {_gib(hw.memory_total_kib / 1024)} (MemTotal)"


def _gpus_line(hw: Hardware) -> str:
    if isinstance(hw.gpus, Unknown):
        return f"GPU PCI devices: {hw.gpus.unknown}"
    return "GPU PCI devices: " + ", ".join(f"{g.bdf} (NUMA {_node(g.numa_node)})" for g in hw.gpus)


def _node(node: int | None) -> str:
    return "none reported" if node is None else str(node)
