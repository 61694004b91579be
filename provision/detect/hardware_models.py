"""Hardware and firmware facts for the BIOS checklist: the typed model.

Each field of :class:`Hardware` is its value or an :class:`~provision.detect.unknown.Unknown`
saying why it could not be read; :mod:`provision.detect.hardware_parsers` builds these from probe
output.

Sources: PCI-SIG base specifications 1.0 to 6.0 (transfer rate per generation), ``lspci(8)``
``ACSCtl`` output.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from provision.detect.unknown import Unknown
from provision.models import Frozen

GT_S_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
"""PCIe transfer rate per lane (GT/s) -> generation (PCI-SIG base specifications 1.0 to 6.0)."""

P2P_REDIRECT_FLAGS = ("ReqRedir", "CmpltRedir", "EgressCtrl")
"""ACS controls that send peer-to-peer requests or completions up to the root complex (FF-14)."""


class SecureBoot(Frozen):
    """Secure Boot state and where it was read (``mokutil`` or the EFI variable)."""

    enabled: bool
    source: Literal["mokutil", "efivar"]


class KernelCmdline(Frozen):
    """``/proc/cmdline`` and the parameters that decide IOMMU and ACS behaviour (FF-14)."""

    raw: str
    iommu: dict[str, str] = Field(
        default_factory=dict,
        description="iommu, intel_iommu, amd_iommu and pci values, e.g. {'iommu': 'pt'}.",
    )

    @property
    def passthrough(self) -> bool:
        """``iommu=pt`` is set (DMA bypasses translation; NCCL's advice for P2P)."""
        return self.iommu.get("iommu") == "pt"

    @property
    def noacs(self) -> bool:
        """``pci=noacs`` is set (honoured by kernels carrying that patch only)."""
        return "noacs" in self.iommu.get("pci", "").split(",")


class Iommu(Frozen):
    """IOMMU state: group count under /sys/kernel/iommu_groups (0: IOMMU off) and units."""

    groups: int
    units: tuple[str, ...] = ()


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
    numa_node: int | None = None
    local_cpus: str | None = None
    link_max: PciLink | None = None
    sriov_totalvfs: int | Unknown = Unknown(unknown="sriov_totalvfs not in this capture")
    upstream: tuple[str, ...] | Unknown = Unknown(unknown="sysfs path not in this capture")
    bar1_total_mib: int | Unknown = Unknown(unknown="not reported by nvidia-smi -q")
    memory_total_mib: int | Unknown = Unknown(unknown="not reported by nvidia-smi -q")

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


class Hardware(Frozen):
    """Hardware and firmware facts for the checklist; every field is its value or an Unknown."""

    boot_mode: Literal["uefi", "legacy"] | Unknown
    secure_boot: SecureBoot | Unknown
    cmdline: KernelCmdline | Unknown
    iommu: Iommu | Unknown
    pci: tuple[GpuHardware, ...] | Unknown
    acs: dict[str, AcsControl] | Unknown = Field(description="ACSCtl per bridge BDF, from lspci -vvv.")
    memory_total_kib: int | Unknown
    numa: tuple[NumaNode, ...] | Unknown
    cpu: Cpu | Unknown
    power: PowerProfile | Unknown
    board: Board | Unknown

    @property
    def gpus(self) -> tuple[GpuHardware, ...] | Unknown:
        """The PCI functions that are GPUs (display or 3D controllers)."""
        return self.pci if isinstance(self.pci, Unknown) else tuple(g for g in self.pci if g.is_gpu)
