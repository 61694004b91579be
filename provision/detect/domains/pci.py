"""The GPUs' PCI functions as sysfs shows them, and ACS on the bridges above them.

Sources: PCI-SIG base specifications 1.0 to 6.0 (transfer rate per generation); Linux
``Documentation/ABI/testing/sysfs-bus-pci`` (``numa_node``, ``*_link_*``, ``sriov_totalvfs``);
lspci(8) ``ACSCtl`` output.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from pydantic import Field

from provision.detect.fact import (
    Fact,
    Unknown,
    colon_pairs,
    failure,
    first_text,
    int_or_none,
)
from provision.detect.raw import MISSING_RC
from provision.models import Frozen

_HW_SCRIPT_PCI = (
    'for d in /sys/bus/pci/devices/*; do v=$(cat "$d/vendor"); if [ "$v" = 0x10de ]; then '
    'echo "== $d"; echo "path: $(readlink -f "$d")"; '
    "for f in class device current_link_speed current_link_width max_link_speed max_link_width "
    'numa_node local_cpulist sriov_totalvfs; do echo "$f: $(cat "$d/$f" 2>&1)"; done; '
    'echo "driver: $(if [ -e "$d/driver" ]; then basename "$(readlink "$d/driver")"; fi)"; '
    'm=$(cat "$d/modalias" 2>/dev/null); echo "modalias: $m"; '
    "if command -v modprobe >/dev/null 2>&1; then "
    'echo "claimants: $(modprobe -R "$m" 2>/dev/null | tr "\\n" " ")"; '
    'else echo "claimants: (modprobe: not found)"; fi; fi; done'
)
"""Per NVIDIA function: sysfs attributes, the driver bound to it, and every module whose alias
matches its modalias (``modprobe -R``, kmod's ``--resolve-alias``: the kernel's own
``modules.alias``, so a new in-kernel driver such as nova_core is found without a list)."""

GT_S_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
"""PCIe transfer rate per lane (GT/s) -> generation (PCI-SIG base specifications 1.0 to 6.0)."""

P2P_REDIRECT_FLAGS = ("ReqRedir", "CmpltRedir", "EgressCtrl")
"""ACS controls that send peer-to-peer requests or completions up to the root complex (FF-14)."""


class PciLink(Frozen):
    """A PCIe link: transfer rate per lane in GT/s and width in lanes."""

    speed_gts: float
    width: int

    @property
    def gen(self) -> int | None:
        """PCIe generation for the rate, or None for a rate not in :data:`GT_S_TO_GEN`."""
        return GT_S_TO_GEN.get(self.speed_gts)

    def __str__(self) -> str:
        gen = f"Gen{self.gen} " if self.gen else ""
        return f"{gen}x{self.width} ({self.speed_gts:g} GT/s)"


class GpuHardware(Frozen):
    """One NVIDIA PCI function as sysfs and ``nvidia-smi -q`` report it.

    ``numa_node`` is None when sysfs says -1 (no affinity reported, as in a VM);
    ``sriov_totalvfs`` is 0 when the device has no SR-IOV capability. The current link
    speed is deliberately absent: it changes with load, and ``Facts.gpus`` carries it.
    """

    bdf: str = Field(description="Domain:bus:device.function, lower case, e.g. 0000:00:06.0.")
    pci_class: str | None = None
    device_id: str | None = Field(None, description="PCI device id from sysfs, lower case hex, e.g. 2335.")
    numa_node: int | None = None
    local_cpus: str | None = None
    link_max: PciLink | None = None
    sriov_totalvfs: int | Unknown = Unknown(unknown="sriov_totalvfs not in this capture")
    upstream: tuple[str, ...] | Unknown = Unknown(unknown="sysfs path not in this capture")
    product_brand: str | None = Field(None, description="nvidia-smi -q Product Brand (GeForce, NVIDIA, ...).")
    product_architecture: str | None = Field(None, description="nvidia-smi -q Product Architecture.")
    bar1_total_mib: int | Unknown = Unknown(unknown="not reported by nvidia-smi -q")
    memory_total_mib: int | Unknown = Unknown(unknown="not reported by nvidia-smi -q")
    driver: str | Unknown | None = Field(
        Unknown(unknown="bound driver not in this capture"),
        description="The kernel driver bound to the function (sysfs driver link), None when unbound.",
    )
    claimants: tuple[str, ...] | Unknown = Field(
        Unknown(unknown="module aliases not in this capture"),
        description="Modules whose alias matches the modalias (modprobe -R): nouveau, nvidia.",
    )

    @property
    def is_gpu(self) -> bool:
        """Display or 3D controller (class 0x03xxxx), not an NVSwitch or audio function."""
        return self.pci_class is None or self.pci_class.startswith("0x03")


class AcsControl(Frozen):
    """The ``ACSCtl:`` flags of one bridge, e.g. ``{"ReqRedir": True, "TransBlk": False}``."""

    bdf: str
    flags: dict[str, bool]

    @property
    def redirecting(self) -> tuple[str, ...]:
        """The enabled flags of :data:`P2P_REDIRECT_FLAGS`."""
        return tuple(flag for flag in P2P_REDIRECT_FLAGS if self.flags.get(flag))


NO_NVIDIA_PCI = "no NVIDIA PCI devices in /sys/bus/pci/devices"
"""The ``sys-pci`` probe's reason when it ran and found no function of NVIDIA's vendor id (0x10de):
the machine has no NVIDIA GPU on its PCI bus, not merely no driver for one."""


def parse_sys_pci(output: str, rc: int) -> tuple[GpuHardware, ...] | Unknown:
    """The ``sys-pci`` probe (``== /sys/bus/pci/devices/<bdf>`` blocks of ``name: value``).

    Reads the capture's older form too, which lacks ``path`` and ``sriov_totalvfs``.
    """
    if rc == MISSING_RC:
        return Unknown(unknown=first_text(output))
    blocks = list(_sysfs_blocks(output))
    if not blocks:
        return Unknown(unknown=NO_NVIDIA_PCI)
    return tuple(_gpu_from_sysfs(bdf, fields) for bdf, fields in blocks)


def _sysfs_blocks(output: str) -> Iterator[tuple[str, dict[str, str]]]:
    for block in re.split(r"^== ", output, flags=re.MULTILINE)[1:]:
        header, _, body = block.partition("\n")
        yield header.strip().rsplit("/", 1)[-1].lower(), dict(colon_pairs(body))


def _gpu_from_sysfs(bdf: str, fields: Mapping[str, str]) -> GpuHardware:
    numa = int_or_none(fields.get("numa_node"))
    extra: dict[str, object] = {}
    if "path" in fields:
        extra["upstream"] = upstream_bridges(fields["path"])
    if "sriov_totalvfs" in fields:
        extra["sriov_totalvfs"] = int_or_none(fields["sriov_totalvfs"]) or 0
    if "driver" in fields:
        extra["driver"] = fields["driver"] or None
    if "claimants" in fields:
        extra["claimants"] = _claimants(fields["claimants"], fields.get("modalias", ""))
    return GpuHardware(
        bdf=bdf,
        pci_class=fields.get("class"),
        device_id=_device_id(fields.get("device")),
        numa_node=numa if numa is not None and numa >= 0 else None,
        local_cpus=fields.get("local_cpulist"),
        link_max=_link(fields.get("max_link_speed"), fields.get("max_link_width")),
        **extra,
    )


def _device_id(text: str | None) -> str | None:
    """``0x2335`` (sysfs ``device``) -> ``2335``; None for anything else."""
    match = re.fullmatch(r"0x([0-9a-fA-F]{4})", (text or "").strip())
    return match[1].lower() if match else None


def _claimants(text: str, modalias: str) -> tuple[str, ...] | Unknown:
    if not modalias:
        return Unknown(unknown="no modalias in sysfs")
    if "not found" in text:
        return Unknown(unknown="modprobe: not found")
    names = [w for w in text.split() if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", w)]
    return tuple(dict.fromkeys(n.replace("-", "_") for n in names))


_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def upstream_bridges(path: str) -> tuple[str, ...]:
    """The bridges above a device, nearest first, from its sysfs realpath.

    ``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0`` -> ``("0000:00:01.0",)``; a device on
    the root bus (as in most VMs) has none.
    """
    parts = [p.lower() for p in path.strip().split("/") if _BDF.match(p.lower())]
    return tuple(reversed(parts[:-1]))


def _link(speed: str | None, width: str | None) -> PciLink | None:
    # sysfs prints "16.0 GT/s PCIe" (drivers/pci/pci-sysfs.c); anything else is no link reading.
    match = re.match(r"([0-9]{1,3}(?:\.[0-9]{1,3})?) GT/s", speed or "")
    lanes = int_or_none(width)
    return PciLink(speed_gts=float(match.group(1)), width=lanes) if match and lanes else None


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


def normalize_bdf(text: str) -> str:
    """``00000000:00:06.0`` (nvidia-smi) or ``00:06.0`` (lspci) -> ``0000:00:06.0``."""
    parts = text.strip().lower().split(":")
    if len(parts) < 2:
        return text.strip().lower()
    domain = parts[0][-4:] if len(parts) == 3 else "0000"
    return f"{domain}:{parts[-2]}:{parts[-1]}"


class SysPciFact(Fact[tuple[GpuHardware, ...]]):
    """Every NVIDIA PCI function in sysfs: class, NUMA node, local CPUs, link maximum, SR-IOV, path."""

    id = "sys-pci"
    argv = ("sh", "-c", _HW_SCRIPT_PCI)
    parse = staticmethod(parse_sys_pci)


class AcsFact(Fact[dict[str, AcsControl]]):
    """ACS controls of every PCI function: ``lspci -D -vvv`` (needs root to read capabilities)."""

    id = "lspci-vvv"
    argv = ("lspci", "-D", "-vvv")
    timeout = 20.0
    aliases = ("lspci-nv",)
    parse = staticmethod(parse_lspci_acs)
