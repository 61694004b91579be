"""Which architecture each NVIDIA GPU of the machine is, from what Linux shows of it.

lspci's device id (where the catalog recorded it) or its chip name (pci.ids: GB202, AD102, GP106GL),
else sysfs's device id (lspci is not installed everywhere: minimal cloud images, containers). The
flavour rules of the planner and the invariants that explain a GPU the driver does not serve read
the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from provision.catalog import Architecture, Catalog
from provision.detect.facts import Facts, Unknown

# NVIDIA chip names in lspci/pci.ids start with the architecture's code (GB202, AD102, GA100, ...);
# data center and workstation boards add a suffix of up to two letters (GV100GL, AD102GL, GM204M).
_CHIP = re.compile(r"\b(GB|GH|AD|GA|TU|GV|GP|GM)\d{3}[A-Z]{0,2}\b")
_CHIP_ARCH = {
    "GB": "blackwell",
    "GH": "hopper",
    "AD": "ada",
    "GA": "ampere",
    "TU": "turing",
    "GV": "volta",
    "GP": "pascal",
    "GM": "maxwell",
}


def sysfs_gpus(facts: Facts, catalog: Catalog) -> Iterator[tuple[str, Architecture]]:
    """GPUs sysfs shows whose device id the catalog knows (where lspci is not installed)."""
    if isinstance(facts.hardware, Unknown) or isinstance(facts.hardware.pci, Unknown):
        return
    for fn in facts.hardware.pci:
        model = catalog.gpu_by_pci_device(f"0x{fn.device_id}") if fn.device_id and fn.is_gpu else None
        if model is not None:
            yield f"{model.name} [10de:{fn.device_id}] at {fn.bdf}", model.architecture


def arch_by_bdf(facts: Facts, catalog: Catalog) -> dict[str, Architecture]:
    """GPU bus address -> architecture, from lspci (device id or chip name), else sysfs's device id
    (lspci is not installed everywhere: minimal cloud images, containers)."""
    found = {label.rsplit(" at ", 1)[-1]: arch for label, arch in sysfs_gpus(facts, catalog)}
    if not isinstance(facts.nvidia_pci, Unknown):
        for dev in (d for d in facts.nvidia_pci if d.is_gpu):
            arch = pci_arch(dev.device_id, dev.description, catalog)
            if arch is not None:
                found[dev.bdf.lower()] = arch
    return found


def pci_arch(device_id: str, description: str, catalog: Catalog) -> Architecture | None:
    model = catalog.gpu_by_pci_device(f"0x{device_id}")
    if model is not None:
        return model.architecture
    chip = _CHIP.search(description)
    return Architecture(_CHIP_ARCH[chip[1]]) if chip else None


OPEN_LOWEST_DEVICE = 0x1E02
"""The lowest PCI device id in the open kernel modules' "Compatible GPUs" table (NVIDIA TITAN RTX,
Turing; NVIDIA/open-gpu-kernel-modules README, 595.45.04:
https://github.com/NVIDIA/open-gpu-kernel-modules#compatible-gpus). NVIDIA numbers its chips in
release order, so a GPU below it predates Turing: it has no GSP and only the proprietary modules
drive it. A GPU missing from the table above that id may merely be newer than the table."""


def pre_gsp_gpus(facts: Facts) -> tuple[tuple[str, str], ...]:
    """(bus address, label) of every GPU function sysfs shows with a device id below
    :data:`OPEN_LOWEST_DEVICE` (lspci is not needed: minimal images lack it)."""
    hw = facts.hardware
    if isinstance(hw, Unknown) or isinstance(hw.pci, Unknown):
        return ()
    return tuple(
        (
            fn.bdf,
            f"NVIDIA GPU [10de:{fn.device_id}] at {fn.bdf} (device id below {OPEN_LOWEST_DEVICE:04x}, the "
            "lowest of the open kernel modules' compatible GPUs: pre-Turing)",
        )
        for fn in hw.pci
        if fn.is_gpu and fn.device_id and int(fn.device_id, 16) < OPEN_LOWEST_DEVICE
    )
