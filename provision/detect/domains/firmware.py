"""Firmware and boot: UEFI or legacy boot, Secure Boot, the kernel command line, the IOMMU.

Sources: Linux ``Documentation/ABI/testing/sysfs-firmware-efi``; the UEFI specification's
``SecureBoot`` global variable (GUID 8be4df61-..., efivarfs prepends 4 attribute bytes);
mokutil(1) ``--sb-state``; the kernel's ``admin-guide/kernel-parameters`` (iommu, pci=noacs).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from provision.detect.fact import (
    Fact,
    Unknown,
    colon_pairs,
    failure,
    first_text,
    is_count,
)
from provision.detect.raw import MISSING_RC
from provision.models import Frozen

SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
"""EFI global variable; efivarfs prepends 4 attribute bytes, the last byte is 1 when enabled."""


_HW_SCRIPT_EFI = (
    "mokutil --sb-state; "
    'if [ -d /sys/firmware/efi ]; then echo "efi: present"; else echo "efi: absent"; fi; '
    f'f={SECURE_BOOT_VAR}; if [ -r "$f" ]; then echo "efivar SecureBoot: $(od -An -tu1 "$f")"; fi'
)
_HW_SCRIPT_IOMMU = (
    'echo "groups: $(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l)"; '
    'echo "units: $(ls /sys/class/iommu 2>/dev/null | tr "\\n" " ")"'
)


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


def parse_boot_mode(output: str, rc: int) -> Literal["uefi", "legacy"] | Unknown:
    """``efi: present|absent`` (our probe) or the capture's ``ls /sys/firmware/efi`` -> boot mode."""
    if rc == MISSING_RC:
        return Unknown(unknown=first_text(output))
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
        return Unknown(unknown=first_text(output))
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
    fields = dict(colon_pairs(output))
    if not is_count(fields.get("groups", "")):
        return Unknown(unknown=f"no group count in: {first_text(output)}")
    return Iommu(groups=int(fields["groups"]), units=tuple(fields.get("units", "").split()))


class Efi(Frozen):
    """Boot mode and Secure Boot, both read from the one EFI probe."""

    boot_mode: Literal["uefi", "legacy"] | Unknown
    secure_boot: SecureBoot | Unknown


def parse_efi(output: str, rc: int) -> Efi:
    """The EFI probe's output -> boot mode and Secure Boot (each its value or an Unknown)."""
    return Efi(boot_mode=parse_boot_mode(output, rc), secure_boot=parse_secure_boot(output, rc))


class EfiFact(Fact[Efi]):
    """Boot mode and Secure Boot: ``mokutil --sb-state``, ``/sys/firmware/efi``, the EFI variable."""

    id = "mokutil"
    argv = ("sh", "-c", _HW_SCRIPT_EFI)
    parse = staticmethod(parse_efi)


class CmdlineFact(Fact[KernelCmdline]):
    """The kernel command line: ``/proc/cmdline``."""

    id = "cmdline"
    argv = ("cat", "/proc/cmdline")
    parse = staticmethod(parse_cmdline)


class IommuFact(Fact[Iommu]):
    """IOMMU groups and units under ``/sys``."""

    id = "iommu"
    argv = ("sh", "-c", _HW_SCRIPT_IOMMU)
    parse = staticmethod(parse_iommu)
