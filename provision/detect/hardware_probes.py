"""Hardware and firmware facts for the BIOS checklist: the probes (fixed commands).

Probe ids that match a captured file in ``shared/fixtures/h200-ubuntu2404`` keep that file's id
so a capture parses through the same code (``sys-pci``, ``numactl``, ``meminfo``, ``mokutil``,
``lscpu``, ``dmi``, ``nvidia-smi-q``); where our script prints more than the capture did, the
parser reads both forms.

Sources: Linux ``Documentation/ABI/testing/sysfs-bus-pci`` (``numa_node``, ``*_link_*``,
``sriov_totalvfs``), ``sysfs-firmware-efi`` and the UEFI spec's ``SecureBoot`` global
variable (GUID 8be4df61-...).
"""

from __future__ import annotations

from provision.detect.probes import Probe

SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
"""EFI global variable; efivarfs prepends 4 attribute bytes, the last byte is 1 when enabled."""


_HW_SCRIPT_EFI = (
    "mokutil --sb-state; "
    'if [ -d /sys/firmware/efi ]; then echo "efi: present"; else echo "efi: absent"; fi; '
    f'f={SECURE_BOOT_VAR}; if [ -r "$f" ]; then echo "efivar SecureBoot: $(od -An -tu1 "$f")"; fi'
)
_HW_SCRIPT_PCI = (
    'for d in /sys/bus/pci/devices/*; do v=$(cat "$d/vendor"); if [ "$v" = 0x10de ]; then '
    'echo "== $d"; echo "path: $(readlink -f "$d")"; '
    "for f in class device current_link_speed current_link_width max_link_speed max_link_width "
    'numa_node local_cpulist sriov_totalvfs; do echo "$f: $(cat "$d/$f" 2>&1)"; done; fi; done'
)
_HW_SCRIPT_IOMMU = (
    'echo "groups: $(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l)"; '
    'echo "units: $(ls /sys/class/iommu 2>/dev/null | tr "\\n" " ")"'
)
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


def hardware_probes() -> list[Probe]:
    """Probes for :class:`Hardware`; ids match the H200 capture's file stems where they overlap."""
    return [
        _sh("mokutil", _HW_SCRIPT_EFI),
        Probe(id="cmdline", argv=("cat", "/proc/cmdline")),
        _sh("iommu", _HW_SCRIPT_IOMMU),
        _sh("sys-pci", _HW_SCRIPT_PCI),
        Probe(id="nvidia-smi-q", argv=("nvidia-smi", "-q"), timeout=20.0),
        Probe(id="lspci-vvv", argv=("lspci", "-D", "-vvv"), timeout=20.0),
        Probe(id="meminfo", argv=("cat", "/proc/meminfo")),
        _sh("numactl", "numactl -H || cat /sys/devices/system/node/node*/cpulist"),
        Probe(id="lscpu", argv=("lscpu",)),
        _sh("cpufreq", _HW_SCRIPT_CPUFREQ),
        _sh("dmi", _HW_SCRIPT_DMI),
    ]


def _sh(probe_id: str, script: str) -> Probe:
    return Probe(id=probe_id, argv=("sh", "-c", script))


HARDWARE_PROBE_IDS = frozenset(p.id for p in hardware_probes())
