"""Parsers of the driver, GPU and package domains: NVSwitch, fabric, DKMS, nouveau, apt locks, MOK, origins.

Inputs are the real H200 captures where they exist (tests/fixtures/raw/h200-ubuntu2404-spec and
the two-GPU h200x2 capture) and otherwise outputs in the tools' documented formats, marked below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.detect.domains.driver import parse_dkms, parse_mok, parse_nouveau
from provision.detect.domains.gpu import fabric_state, parse_lspci, parse_nvidia_smi_q
from provision.detect.facts import (
    DkmsStatus,
    FabricState,
    MokState,
    NouveauState,
    PackageLocks,
    PackageOrigins,
    PciDevice,
    Unknown,
)
from provision.detect.raw import read_raw
from provision.os.debian.probes import parse_apt_locks, parse_origins


def parse_fabric(output: str, rc: int) -> FabricState | Unknown:
    return fabric_state(parse_nvidia_smi_q(output, rc))


ROOT = Path(__file__).resolve().parents[2]
H200 = read_raw(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec")


def real(probe: str) -> tuple[str, int]:
    return H200[probe].output, H200[probe].rc


def test_real_h200_surroundings() -> None:
    assert parse_lspci(*real("lspci-nn")) == Unknown(unknown="lspci: not found")
    assert parse_fabric(*real("nvidia-smi-q")) == FabricState(states=(("N/A", "N/A"),))
    assert parse_dkms(*real("dkms-status")) == Unknown(unknown="dkms: not found")
    assert parse_nouveau(*real("nouveau")) == NouveauState(loaded=False)
    assert parse_apt_locks(*real("apt-locks")) == PackageLocks()
    assert parse_mok(*real("mok-key")) == MokState(key_present=False)


# Documented formats (lspci -nn, dkms status, apt-cache policy), written for these tests.
LSPCI = (
    "0000:18:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n"
    "0000:05:00.0 Bridge [0680]: NVIDIA Corporation GH100 [NVSwitch] [10de:22a3] (rev a1)\n"
)


def test_lspci_finds_gpus_and_nvswitch_bridges() -> None:
    devices = parse_lspci(LSPCI, 0)
    assert isinstance(devices, tuple)
    assert [(d.bdf, d.class_code, d.device_id, d.is_gpu, d.is_nvswitch) for d in devices] == [
        ("0000:18:00.0", "0302", "2330", True, False),
        ("0000:05:00.0", "0680", "22a3", False, True),
    ]
    assert isinstance(devices[0], PciDevice)
    assert [(d.revision, d.reads_all_ones) for d in devices] == [("a1", False), ("a1", False)]


def test_lspci_rev_ff_is_a_function_reading_all_ones() -> None:
    devices = parse_lspci(LSPCI.replace("[10de:2330] (rev a1)", "[10de:2330] (rev ff)"), 0)
    assert isinstance(devices, tuple)
    assert [(d.bdf, d.reads_all_ones) for d in devices] == [("0000:18:00.0", True), ("0000:05:00.0", False)]
    unrevised = parse_lspci("0000:18:00.0 3D controller [0302]: NVIDIA Corporation GH100 [10de:2330]\n", 0)
    assert isinstance(unrevised, tuple) and unrevised[0].revision is None and not unrevised[0].reads_all_ones


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            "nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed\n"
            "nvidia/580.95.05, 6.8.0-65-generic, x86_64: added\n",
            (("580.95.05", "6.8.0-60-generic", "installed"), ("580.95.05", "6.8.0-65-generic", "added")),
        ),
        (
            "nvidia, 535.113.01, 6.2.0-34-generic, x86_64: installed\n",
            (("535.113.01", "6.2.0-34-generic", "installed"),),
        ),
        ("", ()),
    ],
)
def test_dkms_status_forms(output: str, expected: tuple[tuple[str, str, str], ...]) -> None:
    status = parse_dkms(output, 0)
    assert status == DkmsStatus(modules=expected)


def test_nouveau_loaded_and_blacklisted() -> None:
    state = parse_nouveau("loaded yes\nblacklisted-by /etc/modprobe.d/blacklist-nvidia-nouveau.conf\n", 0)
    assert state == NouveauState(
        loaded=True, blacklisted_by=("/etc/modprobe.d/blacklist-nvidia-nouveau.conf",)
    )


def test_apt_locks_sections() -> None:
    out = (
        "=== /etc/apt/preferences.d/00-provision-nvidia\nPackage: libnccl*\nPin: version 2.28.3-*\n"
        "=== /etc/apt/apt.conf.d/51provision-nvidia-unattended\nUnattended-Upgrade::Package-Blacklist {\n};\n"
        "=== unattended-upgrades ii \n"
    )
    locks = parse_apt_locks(out, 0)
    assert isinstance(locks, PackageLocks)
    assert locks.pins == "Package: libnccl*\nPin: version 2.28.3-*\n"
    assert locks.upgrade_guard == "Unattended-Upgrade::Package-Blacklist {\n};\n"
    assert locks.upgrade_service_installed


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            "key present\nSKIP: /var/lib/dkms/mok.pub is already enrolled\n",
            MokState(key_present=True, enrolled=True),
        ),
        ("key present\n/var/lib/dkms/mok.pub is not enrolled\n", MokState(key_present=True, enrolled=False)),
        ("key present\nsh: 1: mokutil: not found\n", MokState(key_present=True, enrolled=None)),
    ],
)
def test_mok_enrollment(output: str, expected: MokState) -> None:
    assert parse_mok(output, 0) == expected


POLICY = """libnvidia-compute-580:
  Installed: 580.95.05-0ubuntu1
  Candidate: 580.95.05-0ubuntu1
  Version table:
 *** 580.95.05-0ubuntu1 500
        500 https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages
        100 /var/lib/dpkg/status
     580.65.06-0ubuntu1 500
        500 https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages
nvidia-fabricmanager-580:
  Installed: 580.95.05-0ubuntu0.24.04.1
  Candidate: 580.95.05-0ubuntu0.24.04.1
  Version table:
 *** 580.95.05-0ubuntu0.24.04.1 500
        500 http://archive.ubuntu.com/ubuntu noble-updates/multiverse amd64 Packages
        100 /var/lib/dpkg/status
nvidia-utils-580:
  Installed: 580.95.05-1
  Candidate: 580.95.05-1
  Version table:
 *** 580.95.05-1 100
        100 /var/lib/dpkg/status
"""


def test_origins_of_installed_versions() -> None:
    assert parse_origins(POLICY, 0) == PackageOrigins(
        origins={
            "libnvidia-compute-580": "developer.download.nvidia.com",
            "nvidia-fabricmanager-580": "archive.ubuntu.com",
            "nvidia-utils-580": "local",
        }
    )


def test_origins_without_apt_cache_is_unknown() -> None:
    assert parse_origins("sh: 1: apt-cache: not found\n", 127) == Unknown(unknown="apt-cache: not found")
