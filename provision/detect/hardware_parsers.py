"""Hardware and firmware facts for the BIOS checklist: the pure parsers.

Every fact is one probe (:mod:`provision.detect.hardware_probes`) plus one pure parser (text in,
typed value or :class:`~provision.detect.unknown.Unknown` out); nothing here raises on odd output.
Where our probe script prints more than the H200 capture did, the parser reads both forms and
reports what the older form lacks as Unknown.

Sources: Linux ``Documentation/ABI/testing/sysfs-bus-pci`` (``numa_node``, ``*_link_*``,
``sriov_totalvfs``), the UEFI spec's ``SecureBoot`` global variable (4 attribute bytes then
1 data byte), ``lspci(8)`` ``ACSCtl`` output, ``nvidia-smi -q`` "BAR1 Memory Usage".
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Literal

from provision.detect.failure import failure
from provision.detect.hardware_models import (
    AcsControl,
    Board,
    Cpu,
    GpuHardware,
    Hardware,
    Iommu,
    KernelCmdline,
    NumaNode,
    PciLink,
    PowerProfile,
    SecureBoot,
)
from provision.detect.hardware_probes import HARDWARE_PROBE_IDS
from provision.detect.raw import MISSING_RC, ProbeOutput
from provision.detect.unknown import Unknown

NO_HARDWARE = "hardware not probed"


# --- Parsers: firmware and kernel ----------------------------------------------------------------


def parse_boot_mode(output: str, rc: int) -> Literal["uefi", "legacy"] | Unknown:
    """``efi: present|absent`` (our probe) or the capture's ``ls /sys/firmware/efi`` -> boot mode."""
    if rc == MISSING_RC:
        return Unknown(unknown=_first(output))
    if "efi: present" in output:
        return "uefi"
    if "efi: absent" in output or "cannot access '/sys/firmware/efi'" in output:
        return "legacy"
    if re.search(r"^efivars$", output, re.MULTILINE):
        return "uefi"
    return Unknown(unknown="boot mode not in the output (/sys/firmware/efi not listed)")


def parse_secure_boot(output: str, rc: int) -> SecureBoot | Unknown:
    """``mokutil --sb-state`` (``SecureBoot enabled``), else the EFI variable's last byte."""
    if rc == MISSING_RC:
        return Unknown(unknown=_first(output))
    if match := re.search(r"^SecureBoot (enabled|disabled)", output, re.MULTILINE):
        return SecureBoot(enabled=match.group(1) == "enabled", source="mokutil")
    if match := re.search(r"^efivar SecureBoot:((?:\s+\d+)+)\s*$", output, re.MULTILINE):
        return SecureBoot(enabled=match.group(1).split()[-1] == "1", source="efivar")
    return Unknown(unknown=_secure_boot_reason(output))


def _secure_boot_reason(output: str) -> str:
    mokutil = "mokutil: not found" if re.search(r"mokutil: not found", output) else "mokutil gave no state"
    if parse_boot_mode(output, 0) == "legacy":
        return f"{mokutil}; /sys/firmware/efi absent (legacy boot: Secure Boot cannot be on)"
    return f"{mokutil}; the SecureBoot EFI variable is not readable"


def parse_cmdline(output: str, rc: int) -> KernelCmdline | Unknown:
    """``cat /proc/cmdline`` -> the raw line and its iommu / intel_iommu / amd_iommu / pci values."""
    if (bad := failure("cat /proc/cmdline", output, rc)) is not None:
        return bad
    raw = output.strip()
    wanted = ("iommu", "intel_iommu", "amd_iommu", "pci")
    values = dict(word.split("=", 1) for word in raw.split() if "=" in word)
    return KernelCmdline(raw=raw, iommu={k: v for k, v in values.items() if k in wanted})


def parse_iommu(output: str, rc: int) -> Iommu | Unknown:
    """``groups: N`` and ``units: dmar0 ...`` -> :class:`Iommu` (0 groups: IOMMU not active)."""
    if (bad := failure("ls /sys/kernel/iommu_groups", output, rc)) is not None:
        return bad
    fields = dict(_colon_pairs(output))
    if not fields.get("groups", "").isdigit():
        return Unknown(unknown=f"no group count in: {_first(output)}")
    return Iommu(groups=int(fields["groups"]), units=tuple(fields.get("units", "").split()))


# --- Parsers: PCI ------------------------------------------------------------------------------


def parse_sys_pci(output: str, rc: int) -> tuple[GpuHardware, ...] | Unknown:
    """The ``sys-pci`` probe (``== /sys/bus/pci/devices/<bdf>`` blocks of ``name: value``).

    Reads the capture's older form too, which lacks ``path`` and ``sriov_totalvfs``.
    """
    if rc == MISSING_RC:
        return Unknown(unknown=_first(output))
    blocks = list(_sysfs_blocks(output))
    if not blocks:
        return Unknown(unknown="no NVIDIA PCI devices in /sys/bus/pci/devices")
    return tuple(_gpu_from_sysfs(bdf, fields) for bdf, fields in blocks)


def _sysfs_blocks(output: str) -> Iterator[tuple[str, dict[str, str]]]:
    for block in re.split(r"^== ", output, flags=re.MULTILINE)[1:]:
        header, _, body = block.partition("\n")
        yield header.strip().rsplit("/", 1)[-1].lower(), dict(_colon_pairs(body))


def _gpu_from_sysfs(bdf: str, fields: Mapping[str, str]) -> GpuHardware:
    numa = _int(fields.get("numa_node"))
    extra: dict[str, object] = {}
    if "path" in fields:
        extra["upstream"] = upstream_bridges(fields["path"])
    if "sriov_totalvfs" in fields:
        extra["sriov_totalvfs"] = _int(fields["sriov_totalvfs"]) or 0
    return GpuHardware(
        bdf=bdf,
        pci_class=fields.get("class"),
        numa_node=numa if numa is not None and numa >= 0 else None,
        local_cpus=fields.get("local_cpulist"),
        link_max=_link(fields.get("max_link_speed"), fields.get("max_link_width")),
        **extra,
    )


_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def upstream_bridges(path: str) -> tuple[str, ...]:
    """The bridges above a device, nearest first, from its sysfs realpath.

    ``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0`` -> ``("0000:00:01.0",)``; a device on
    the root bus (as in most VMs) has none.
    """
    parts = [p.lower() for p in path.strip().split("/") if _BDF.match(p.lower())]
    return tuple(reversed(parts[:-1]))


def _link(speed: str | None, width: str | None) -> PciLink | None:
    match = re.match(r"([\d.]+) GT/s", speed or "")
    lanes = _int(width)
    return PciLink(speed_gts=float(match.group(1)), width=lanes) if match and lanes else None


def parse_nvidia_smi_q(output: str, rc: int) -> dict[str, tuple[int | None, int | None]] | Unknown:
    """``nvidia-smi -q`` -> ``{bdf: (FB memory total MiB, BAR1 total MiB)}`` per GPU."""
    if (bad := failure("nvidia-smi", output, rc)) is not None:
        return bad
    result: dict[str, tuple[int | None, int | None]] = {}
    for block in re.split(r"^GPU ", output, flags=re.MULTILINE)[1:]:
        bdf = normalize_bdf(block.split("\n", 1)[0])
        result[bdf] = (_section_total(block, "FB Memory Usage"), _section_total(block, "BAR1 Memory Usage"))
    return result or Unknown(unknown=f"no GPU sections in nvidia-smi -q: {_first(output)}")


def _section_total(block: str, section: str) -> int | None:
    match = re.search(rf"^\s*{re.escape(section)}\s*\n\s*Total\s*:\s*(\d+) MiB", block, re.MULTILINE)
    return int(match.group(1)) if match else None


def normalize_bdf(text: str) -> str:
    """``00000000:00:06.0`` (nvidia-smi) or ``00:06.0`` (lspci) -> ``0000:00:06.0``."""
    parts = text.strip().lower().split(":")
    domain = parts[0][-4:] if len(parts) == 3 else "0000"
    return f"{domain}:{parts[-2]}:{parts[-1]}"


def parse_lspci_acs(output: str, rc: int) -> dict[str, AcsControl] | Unknown:
    """``lspci -D -vvv`` (or ``-vvv``) -> ACSCtl flags per device that has the capability.

    Without root, lspci prints ``Capabilities: <access denied>`` and ACS is unreadable.
    """
    if (bad := failure("lspci", output, rc)) is not None:
        return bad
    found: dict[str, AcsControl] = {}
    for bdf, body in _lspci_blocks(output):
        if match := re.search(r"^\s*ACSCtl:\s*(.+)$", body, re.MULTILINE):
            found[bdf] = AcsControl(bdf=bdf, flags=_flags(match.group(1)))
    if not found and "<access denied>" in output:
        return Unknown(unknown="lspci printed <access denied>: reading ACS needs root")
    return found


def _lspci_blocks(output: str) -> Iterator[tuple[str, str]]:
    for block in re.split(r"\n(?=[0-9a-fA-F]{2,4}:[0-9a-fA-F]{2}[:.])", "\n" + output):
        header = block.strip().split(" ", 1)[0]
        if re.match(r"^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$", header):
            yield normalize_bdf(header), block


def _flags(text: str) -> dict[str, bool]:
    return {m.group(1): m.group(2) == "+" for m in re.finditer(r"(\w+)([+-])", text)}


# --- Parsers: memory, CPU, power, board ----------------------------------------------------------


def parse_meminfo(output: str, rc: int) -> int | Unknown:
    """``/proc/meminfo`` -> MemTotal in KiB (the file's ``kB`` are KiB)."""
    if (bad := failure("cat /proc/meminfo", output, rc)) is not None:
        return bad
    match = re.search(r"^MemTotal:\s+(\d+) kB", output, re.MULTILINE)
    return int(match.group(1)) if match else Unknown(unknown="no MemTotal line in /proc/meminfo")


def parse_numactl(output: str, rc: int) -> tuple[NumaNode, ...] | Unknown:
    """``numactl -H`` -> nodes with CPUs and size; the probe's sysfs fallback is not parsed."""
    if rc == MISSING_RC:
        return Unknown(unknown=_first(output))
    cpus = dict(re.findall(r"^node (\d+) cpus:(.*)$", output, re.MULTILINE))
    sizes = dict(re.findall(r"^node (\d+) size: (\d+) MB$", output, re.MULTILINE))
    if not cpus:
        return Unknown(unknown=f"numactl -H gave no nodes: {_first(output)}")
    return tuple(
        NumaNode(node=int(n), cpus=_cpu_ranges(c.split()), size_mb=_int(sizes.get(n)))
        for n, c in cpus.items()
    )


def _cpu_ranges(cpus: list[str]) -> str:
    numbers = sorted(int(c) for c in cpus if c.isdigit())
    ranges: list[str] = []
    for n in numbers:
        if ranges and int(ranges[-1].split("-")[-1]) == n - 1:
            ranges[-1] = f"{ranges[-1].split('-')[0]}-{n}"
        else:
            ranges.append(str(n))
    return ",".join(ranges)


def parse_lscpu(output: str, rc: int) -> Cpu | Unknown:
    """``lscpu`` -> model name, sockets, NUMA nodes, hypervisor vendor."""
    if (bad := failure("lscpu", output, rc)) is not None:
        return bad
    fields = dict(_colon_pairs(output))
    if "Model name" not in fields:
        return Unknown(unknown="lscpu printed no Model name")
    return Cpu(
        model=fields["Model name"],
        sockets=_int(fields.get("Socket(s)")),
        numa_nodes=_int(fields.get("NUMA node(s)")),
        hypervisor=fields.get("Hypervisor vendor"),
    )


def parse_cpufreq(output: str, rc: int) -> PowerProfile | Unknown:
    """``policyN governor epp`` lines and ``aspm: ...`` -> :class:`PowerProfile`."""
    if rc == MISSING_RC:
        return Unknown(unknown=_first(output))
    aspm = re.search(r"^aspm: .*\[(\w+)\]", output, re.MULTILINE)
    rows = re.findall(r"^policy\d+ (\S+) (\S+)$", output, re.MULTILINE)
    if not rows and aspm is None:
        return Unknown(unknown="no cpufreq policies and no pcie_aspm policy in /sys")
    return PowerProfile(
        governors=tuple(g for g, _ in rows if g != "-"),
        epp=tuple(e for _, e in rows if e != "-"),
        aspm_policy=aspm.group(1) if aspm else None,
    )


def parse_dmi(output: str, rc: int) -> Board | Unknown:
    """``name: value`` lines from /sys/class/dmi/id -> :class:`Board`."""
    if rc == MISSING_RC:
        return Unknown(unknown=_first(output))
    known = ("sys_vendor", "product_name", "board_vendor", "board_name", "bios_version")
    fields = {k: v for k, v in _colon_pairs(output) if k in known and not v.startswith("cat:")}
    if not fields:
        return Unknown(unknown="no DMI data (/sys/class/dmi/id not readable or absent)")
    return Board(
        vendor=fields.get("sys_vendor") or fields.get("board_vendor"),
        product=fields.get("product_name"),
        board=fields.get("board_name"),
        bios_version=fields.get("bios_version"),
    )


# --- Assembly ------------------------------------------------------------------------------------


def parse_hardware(outputs: Mapping[str, ProbeOutput]) -> Hardware | Unknown:
    """Hardware facts from probe outputs keyed by probe id; Unknown if no hardware probe ran.

    ``lspci-vvv`` falls back to the H200 capture's ``lspci-nv`` (NVIDIA devices only).
    """
    if not HARDWARE_PROBE_IDS & outputs.keys():
        return Unknown(unknown=NO_HARDWARE)

    def text(probe_id: str) -> tuple[str, int]:
        out = outputs.get(probe_id) or ProbeOutput.missing(probe_id)
        return out.output, out.rc

    lspci = "lspci-vvv" if "lspci-vvv" in outputs else "lspci-nv"
    return Hardware(
        boot_mode=parse_boot_mode(*text("mokutil")),
        secure_boot=parse_secure_boot(*text("mokutil")),
        cmdline=parse_cmdline(*text("cmdline")),
        iommu=parse_iommu(*text("iommu")),
        pci=merge_bar1(parse_sys_pci(*text("sys-pci")), parse_nvidia_smi_q(*text("nvidia-smi-q"))),
        acs=parse_lspci_acs(*text(lspci)),
        memory_total_kib=parse_meminfo(*text("meminfo")),
        numa=parse_numactl(*text("numactl")),
        cpu=parse_lscpu(*text("lscpu")),
        power=parse_cpufreq(*text("cpufreq")),
        board=parse_dmi(*text("dmi")),
    )


def merge_bar1(
    pci: tuple[GpuHardware, ...] | Unknown, smi: dict[str, tuple[int | None, int | None]] | Unknown
) -> tuple[GpuHardware, ...] | Unknown:
    """Add ``nvidia-smi -q`` memory and BAR1 totals to the sysfs devices, matched by BDF."""
    if isinstance(pci, Unknown) or isinstance(smi, Unknown):
        return pci if isinstance(pci, Unknown) else tuple(_with_smi(g, None, smi) for g in pci)
    return tuple(_with_smi(g, smi.get(g.bdf), smi) for g in pci)


def _with_smi(gpu: GpuHardware, totals: tuple[int | None, int | None] | None, smi: object) -> GpuHardware:
    if isinstance(smi, Unknown):
        reason = Unknown(unknown=f"nvidia-smi -q: {smi.unknown}")
        return gpu.model_copy(update={"bar1_total_mib": reason, "memory_total_mib": reason})
    if totals is None:
        return gpu
    memory, bar1 = totals
    update: dict[str, int] = {}
    if memory is not None:
        update["memory_total_mib"] = memory
    if bar1 is not None:
        update["bar1_total_mib"] = bar1
    return gpu.model_copy(update=update)


# --- Helpers ------------------------------------------------------------------------------------


def _colon_pairs(text: str) -> Iterator[tuple[str, str]]:
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            yield key.strip(), value.strip()


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _first(output: str) -> str:
    return next((line.strip() for line in output.splitlines() if line.strip()), "")
