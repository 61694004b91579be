"""Hardware and firmware facts for the BIOS checklist: probes, pure parsers, and the model.

The one import point for them; each concept lives in its own module:
:mod:`~provision.detect.hardware_models` (the typed facts),
:mod:`~provision.detect.hardware_probes` (the fixed commands) and
:mod:`~provision.detect.hardware_parsers` (text in, typed value or
:class:`~provision.detect.unknown.Unknown` out; nothing raises on odd output).
"""

from __future__ import annotations

from provision.detect.hardware_models import (
    GT_S_TO_GEN,
    P2P_REDIRECT_FLAGS,
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
from provision.detect.hardware_parsers import (
    NO_HARDWARE,
    merge_bar1,
    normalize_bdf,
    parse_boot_mode,
    parse_cmdline,
    parse_cpufreq,
    parse_dmi,
    parse_hardware,
    parse_iommu,
    parse_lscpu,
    parse_lspci_acs,
    parse_meminfo,
    parse_numactl,
    parse_nvidia_smi_q,
    parse_secure_boot,
    parse_sys_pci,
    upstream_bridges,
)
from provision.detect.hardware_probes import HARDWARE_PROBE_IDS, SECURE_BOOT_VAR, hardware_probes

__all__ = [
    "GT_S_TO_GEN",
    "HARDWARE_PROBE_IDS",
    "NO_HARDWARE",
    "P2P_REDIRECT_FLAGS",
    "SECURE_BOOT_VAR",
    "AcsControl",
    "Board",
    "Cpu",
    "GpuHardware",
    "Hardware",
    "Iommu",
    "KernelCmdline",
    "NumaNode",
    "PciLink",
    "PowerProfile",
    "SecureBoot",
    "hardware_probes",
    "merge_bar1",
    "normalize_bdf",
    "parse_boot_mode",
    "parse_cmdline",
    "parse_cpufreq",
    "parse_dmi",
    "parse_hardware",
    "parse_iommu",
    "parse_lscpu",
    "parse_lspci_acs",
    "parse_meminfo",
    "parse_numactl",
    "parse_nvidia_smi_q",
    "parse_secure_boot",
    "parse_sys_pci",
    "upstream_bridges",
]
