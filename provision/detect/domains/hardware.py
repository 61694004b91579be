"""The hardware and firmware facts the BIOS checklist reads, as one :class:`Hardware` value.

Its fields come from the firmware, PCI and host facts, and the per-GPU BAR1 and memory totals
from the one parse of ``nvidia-smi -q`` (:mod:`provision.detect.domains.gpu`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from provision.detect.domains import firmware, host, pci
from provision.detect.domains.firmware import Iommu, KernelCmdline, SecureBoot
from provision.detect.domains.gpu import SmiGpu, SmiQuery, SmiQueryFact
from provision.detect.domains.host import Board, Cpu, NumaNode, PowerProfile
from provision.detect.domains.pci import AcsControl, GpuHardware
from provision.detect.fact import Derive, FactType, Parsed, Unknown
from provision.models import Frozen

NO_HARDWARE = "hardware not probed"


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


FACTS: tuple[FactType, ...] = (
    firmware.EfiFact,
    firmware.CmdlineFact,
    firmware.IommuFact,
    pci.SysPciFact,
    pci.AcsFact,
    host.MeminfoFact,
    host.NumaFact,
    host.CpuFact,
    host.PowerFact,
    host.BoardFact,
)
"""The facts only the checklist reads (nvidia-smi -q is shared with the fabric state)."""


def hardware(p: Parsed) -> Hardware | Unknown:
    """:class:`Hardware` from the parsed outputs; Unknown when no hardware probe ran at all."""
    if not p.any_ran((*FACTS, SmiQueryFact)):
        return Unknown(unknown=NO_HARDWARE)
    efi = p.of(firmware.EfiFact)
    return Hardware(
        boot_mode=efi if isinstance(efi, Unknown) else efi.boot_mode,
        secure_boot=efi if isinstance(efi, Unknown) else efi.secure_boot,
        cmdline=p.of(firmware.CmdlineFact),
        iommu=p.of(firmware.IommuFact),
        pci=_pci(p),
        acs=p.of(pci.AcsFact),
        memory_total_kib=p.of(host.MeminfoFact),
        numa=p.of(host.NumaFact),
        cpu=p.of(host.CpuFact),
        power=p.of(host.PowerFact),
        board=p.of(host.BoardFact),
    )


def _pci(p: Parsed) -> tuple[GpuHardware, ...] | Unknown:
    devices, smi = p.of(pci.SysPciFact), p.of(SmiQueryFact)
    return merge_bar1(devices, smi)


def merge_bar1(
    devices: tuple[GpuHardware, ...] | Unknown, smi: SmiQuery | Unknown
) -> tuple[GpuHardware, ...] | Unknown:
    """Add ``nvidia-smi -q`` memory and BAR1 totals, product brand and architecture to the sysfs
    devices, matched by BDF."""
    if isinstance(devices, Unknown):
        return devices
    if isinstance(smi, Unknown) or not smi.gpus:
        why = smi.unknown if isinstance(smi, Unknown) else f"no GPU sections in nvidia-smi -q: {smi.note}"
        reason = Unknown(unknown=f"nvidia-smi -q: {why}")
        update = {"bar1_total_mib": reason, "memory_total_mib": reason}
        return tuple(g.model_copy(update=update) for g in devices)
    totals = {g.bdf: g for g in smi.gpus}
    return tuple(_with_totals(g, totals.get(g.bdf)) for g in devices)


def _with_totals(gpu: GpuHardware, smi: SmiGpu | None) -> GpuHardware:
    if smi is None:
        return gpu
    update = {
        "memory_total_mib": smi.memory_total_mib,
        "bar1_total_mib": smi.bar1_total_mib,
        "product_brand": smi.product_brand,
        "product_architecture": smi.product_architecture,
    }
    return gpu.model_copy(update={k: v for k, v in update.items() if v is not None})


FIELDS: dict[str, Derive] = {"hardware": hardware}
