"""The host around the GPUs: memory, NUMA nodes, CPU, power settings, board identification.

Sources: proc(5) (``/proc/meminfo`` sizes are KiB), numactl(8), lscpu(1), Linux
``Documentation/admin-guide/pm/cpufreq.rst`` (governor, energy_performance_preference), the
``pcie_aspm`` module parameter, ``/sys/class/dmi/id``.
"""

from __future__ import annotations

import re

from pydantic import Field

from provision.detect.fact import (
    Fact,
    Unknown,
    colon_pairs,
    failure,
    first_text,
    int_or_none,
    is_count,
)
from provision.detect.raw import MISSING_RC
from provision.models import Frozen

_HW_SCRIPT_CPUFREQ = (
    'echo "aspm: $(cat /sys/module/pcie_aspm/parameters/policy 2>&1)"; '
    "for p in /sys/devices/system/cpu/cpufreq/policy*; do "
    '[ -d "$p" ] || { echo "no cpufreq policies"; break; }; '
    'echo "${p##*/} $(cat "$p/scaling_governor" 2>/dev/null || echo -)'
    ' $(cat "$p/energy_performance_preference" 2>/dev/null || echo -)"; done'
)
_HW_SCRIPT_DMI = (
    "for f in sys_vendor product_name board_vendor board_name bios_version; do "
    'echo "$f: $(cat /sys/class/dmi/id/$f 2>&1)"; done'
)


class Cpu(Frozen):
    """``lscpu``: model name, sockets and NUMA nodes."""

    model: str
    sockets: int | None = None
    numa_nodes: int | None = None
    hypervisor: str | None = None


class NumaNode(Frozen):
    """One NUMA node from ``numactl -H``: CPUs and memory size in MB."""

    node: int
    cpus: str
    size_mb: int | None = None


class PowerProfile(Frozen):
    """OS-side power settings: governor and EPP per cpufreq policy, and the PCIe ASPM policy."""

    governors: tuple[str, ...] = ()
    epp: tuple[str, ...] = ()
    aspm_policy: str | None = Field(None, description="Bracketed choice of pcie_aspm policy, e.g. default.")


class Board(Frozen):
    """DMI identification (``/sys/class/dmi/id``)."""

    vendor: str | None = None
    product: str | None = None
    board: str | None = None
    bios_version: str | None = None


def parse_meminfo(output: str, rc: int) -> int | Unknown:
    """``/proc/meminfo`` -> MemTotal in KiB (the file's ``kB`` are KiB)."""
    if (bad := failure("cat /proc/meminfo", output, rc)) is not None:
        return bad
    match = re.search(r"^MemTotal:\s+(\d+) kB", output, re.MULTILINE)
    return int(match.group(1)) if match else Unknown(unknown="no MemTotal line in /proc/meminfo")


def parse_numactl(output: str, rc: int) -> tuple[NumaNode, ...] | Unknown:
    """``numactl -H`` -> nodes with CPUs and size; the probe's sysfs fallback is not parsed."""
    if rc == MISSING_RC:
        return Unknown(unknown=first_text(output))
    cpus = dict(re.findall(r"^node (\d+) cpus:(.*)$", output, re.MULTILINE))
    sizes = dict(re.findall(r"^node (\d+) size: (\d+) MB$", output, re.MULTILINE))
    if not cpus:
        return Unknown(unknown=f"numactl -H gave no nodes: {first_text(output)}")
    return tuple(
        NumaNode(node=int(n), cpus=_cpu_ranges(c.split()), size_mb=int_or_none(sizes.get(n)))
        for n, c in cpus.items()
    )


def _cpu_ranges(cpus: list[str]) -> str:
    numbers = sorted(int(c) for c in cpus if is_count(c))
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
    fields = dict(colon_pairs(output))
    if "Model name" not in fields:
        return Unknown(unknown="lscpu printed no Model name")
    return Cpu(
        model=fields["Model name"],
        sockets=int_or_none(fields.get("Socket(s)")),
        numa_nodes=int_or_none(fields.get("NUMA node(s)")),
        hypervisor=fields.get("Hypervisor vendor"),
    )


def parse_cpufreq(output: str, rc: int) -> PowerProfile | Unknown:
    """``policyN governor epp`` lines and ``aspm: ...`` -> :class:`PowerProfile`."""
    if rc == MISSING_RC:
        return Unknown(unknown=first_text(output))
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
        return Unknown(unknown=first_text(output))
    known = ("sys_vendor", "product_name", "board_vendor", "board_name", "bios_version")
    fields = {k: v for k, v in colon_pairs(output) if k in known and not v.startswith("cat:")}
    if not fields:
        return Unknown(unknown="no DMI data (/sys/class/dmi/id not readable or absent)")
    return Board(
        vendor=fields.get("sys_vendor") or fields.get("board_vendor"),
        product=fields.get("product_name"),
        board=fields.get("board_name"),
        bios_version=fields.get("bios_version"),
    )


class MeminfoFact(Fact[int]):
    """Host memory, KiB: ``MemTotal`` of ``/proc/meminfo``."""

    id = "meminfo"
    argv = ("cat", "/proc/meminfo")
    parse = staticmethod(parse_meminfo)


class NumaFact(Fact[tuple[NumaNode, ...]]):
    """NUMA nodes with their CPUs and memory: ``numactl -H``."""

    id = "numactl"
    argv = ("sh", "-c", "numactl -H || cat /sys/devices/system/node/node*/cpulist")
    parse = staticmethod(parse_numactl)


class CpuFact(Fact[Cpu]):
    """CPU model, sockets, NUMA nodes, hypervisor: ``lscpu``."""

    id = "lscpu"
    argv = ("lscpu",)
    parse = staticmethod(parse_lscpu)


class PowerFact(Fact[PowerProfile]):
    """cpufreq governors and EPP per policy, and the PCIe ASPM policy."""

    id = "cpufreq"
    argv = ("sh", "-c", _HW_SCRIPT_CPUFREQ)
    parse = staticmethod(parse_cpufreq)


class BoardFact(Fact[Board]):
    """Vendor, product, board and BIOS version from ``/sys/class/dmi/id``."""

    id = "dmi"
    argv = ("sh", "-c", _HW_SCRIPT_DMI)
    parse = staticmethod(parse_dmi)
