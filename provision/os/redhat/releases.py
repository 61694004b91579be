"""What each supported RHEL-family release carries that provision plans with: NVIDIA's repository code,
whether the driver branch is a module stream or a versionlock, the kernel series, and the Python the
release ships.

Sources:
    NVIDIA Driver Installation Guide, "Kernel Modules" (Table 5, open kernel modules: RHEL/Rocky 8/9
    ``dnf module enable nvidia-driver:<branch>-open`` then ``dnf install nvidia-open``; RHEL/Rocky 10
    ``dnf versionlock`` on ``*nvidia*<branch>*`` then ``dnf install nvidia-open``),
    https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html ;
    "Version locking" (python3-dnf-plugin-versionlock, ``/etc/dnf/plugins/versionlock.list``; NVIDIA's
    packages carry epoch 3),
    https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/version-locking.html ;
    Rocky Linux release notes (9: kernel 5.14, python3.9 default, 3.11 and 3.12 as packages; 10: kernel
    6.12, python3.12), https://docs.rockylinux.org/release_notes/ ; Red Hat Enterprise Linux 9 and 10
    release notes (the same kernels and interpreters; RHEL 10 has no modularity),
    https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/10/html/10.0_release_notes/ .
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    """One RHEL-family major release.

    Attributes:
        major: ``9``.
        repo_code: NVIDIA's CUDA repository code for it (``rhel9``): the OS's own major only; the
            rhel9 repository on a 10 host fails with "filtered out by modular filtering".
        modules: The driver's branch and flavour are a dnf module stream (8, 9); else the branch is
            held with versionlock (10 has no modularity).
        kernel_series: The kernel series the release's updates stay on (``5.14``).
        interpreters: The Python versions the release ships as packages (``3.9``, ``3.11``, ``3.12``).
        signed_open_kmods: Whether the distribution ships NVIDIA's open modules signed with its own
            Secure Boot key; none of these releases does in what the catalog could confirm.
    """

    major: int
    repo_code: str
    modules: bool
    kernel_series: str
    interpreters: tuple[str, ...]
    signed_open_kmods: bool = False


RELEASES: dict[int, Release] = {
    9: Release(
        major=9, repo_code="rhel9", modules=True, kernel_series="5.14", interpreters=("3.9", "3.11", "3.12")
    ),
    10: Release(major=10, repo_code="rhel10", modules=False, kernel_series="6.12", interpreters=("3.12",)),
}
"""The releases provision supports (x86_64), by major."""
WRONG_MAJOR_SOURCE = (
    "NVIDIA Driver Installation Guide, Kernel Modules (one repository per RHEL major: rhel9, rhel10; "
    "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html); "
    "dnf Modularity: packages of a module not enabled for the platform are filtered out "
    "(https://dnf.readthedocs.io/en/latest/modularity.html)"
)
"""Why a RHEL-family host takes only its own major's repository."""
DISTROS = ("rocky", "rhel")
"""``/etc/os-release`` IDs of the family that the spec accepts."""


def major_of(version: str) -> int | None:
    """``"9.5"`` or ``"9"`` -> 9; None when ``version`` does not start with a number."""
    head = version.split(".")[0]
    return int(head) if head.isascii() and head.isdigit() and len(head) <= 3 else None


def release(version: str) -> Release | None:
    """The supported release of ``version`` (``VERSION_ID`` or the spec's), None when unsupported."""
    major = major_of(version)
    return RELEASES.get(major) if major is not None else None


class RedHatReleases:
    """The RHEL family's :class:`provision.os.base.FamilyReleases`: Rocky Linux and RHEL 9 and 10."""

    distros: tuple[str, ...] = DISTROS

    def release(self, distro: str, version: str) -> Release | None:
        """The supported release of ``version`` (any minor of a major), for rocky and rhel alike."""
        return release(version)

    def repo_code(self, distro: str, version: str) -> str:
        """The OS's own major (``rocky`` ``9.5`` -> ``rhel9``), also for a major not supported."""
        major = major_of(version)
        return f"rhel{major}" if major is not None else f"rhel{version}"

    def same_release(self, spec_version: str, version_id: str) -> bool:
        """Equal, or the same major when the spec names only the major (``9`` and ``9.5``)."""
        if spec_version == version_id:
            return True
        return "." not in spec_version and major_of(version_id) == major_of(spec_version)

    def unsupported(self, distro: str, version: str, architecture: str) -> str | None:
        """Releases 9 and 10 only, x86_64 only (NVIDIA's rhel9/rhel10 repositories)."""
        if release(version) is None:
            return f"{distro} {version} is not supported: provision supports releases 9 and 10"
        if architecture != "x86_64":
            return f"{distro} is supported on x86_64 only, not {architecture}"
        return None

    def wrong_release(self, spec_code: str, machine_code: str) -> tuple[str, str] | None:
        """Another major's repository: its packages are filtered out by modular filtering. None for the
        same major, and for another family's repository (``ubuntu2404``: not a dnf repository at all,
        which the mismatch of distributions already says)."""
        if spec_code == machine_code or not spec_code.startswith("rhel"):
            return None
        note = (
            f"; NVIDIA's {spec_code} repository on it fails (its packages are \"filtered out by modular "
            f"filtering\", built for another platform): use the machine's own {machine_code}"
        )
        return note, WRONG_MAJOR_SOURCE


FACTS = RedHatReleases()
"""The family's releases, as :mod:`provision.os.select` chooses them."""
