"""What each supported Debian-family release carries that provision plans with: NVIDIA's repository
code, the code name, the kernel series and the Python the release ships.

A release not listed here (Ubuntu 26.04, which NVIDIA's 610 guide adds, until its facts are sourced)
is still accepted by the spec: NVIDIA's repository code is the distribution and its version without
the dot, and the spec's rules say whether NVIDIA serves it (``os-repo-unserved``).

Sources:
    NVIDIA Driver Installation Guide, "Supported distributions" (repository codes ``ubuntu2204``,
    ``ubuntu2404``, ``debian12``, ``debian13``),
    https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/ ;
    Ubuntu 22.04 LTS release notes (jammy: kernel 5.15, Python 3.10),
    https://documentation.ubuntu.com/release-notes/22.04/ ;
    Ubuntu 24.04 LTS release notes (noble: kernel 6.8, Python 3.12),
    https://documentation.ubuntu.com/release-notes/24.04/ ;
    Debian 12 release notes, "What's new" (bookworm: kernel 6.1, Python 3.11),
    https://www.debian.org/releases/bookworm/release-notes/whats-new.en.html ;
    Debian 13 release notes, "What's new" (trixie: kernel 6.12, Python 3.13),
    https://www.debian.org/releases/trixie/release-notes/whats-new.en.html .
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    """One Debian or Ubuntu release.

    Attributes:
        distro: ``/etc/os-release`` ``ID`` (``ubuntu``, ``debian``).
        version: ``VERSION_ID`` (``24.04``, ``12``).
        series: The code name, as apt's suites name it (``noble``, ``bookworm``).
        repo_code: NVIDIA's CUDA repository code for it (``ubuntu2404``).
        kernel_series: The series of the release's general-availability kernel (``6.8``); Ubuntu's
            hardware-enablement kernels are newer.
        interpreters: The Python versions the release ships as packages (``3.12``).
        signed_open_kmods: None: whether the distribution's archive has signed NVIDIA modules is the
            catalog's ``distro_archives`` (Ubuntu's ``linux-modules-nvidia-*``; Debian builds with DKMS).
    """

    distro: str
    version: str
    series: str
    repo_code: str
    kernel_series: str
    interpreters: tuple[str, ...]
    signed_open_kmods: bool | None = None


RELEASES: dict[tuple[str, str], Release] = {
    (r.distro, r.version): r
    for r in (
        Release("ubuntu", "22.04", "jammy", "ubuntu2204", "5.15", ("3.10",)),
        Release("ubuntu", "24.04", "noble", "ubuntu2404", "6.8", ("3.12",)),
        Release("debian", "12", "bookworm", "debian12", "6.1", ("3.11",)),
        Release("debian", "13", "trixie", "debian13", "6.12", ("3.13",)),
    )
}
"""The releases whose facts provision carries, by (distro, version)."""
DISTROS = ("ubuntu", "debian")
"""``/etc/os-release`` IDs of the family that the spec accepts."""


def repo_code(distro: str, version: str) -> str:
    """NVIDIA's repository code: the distribution and its version without the dot (``ubuntu2404``)."""
    found = RELEASES.get((distro, version))
    return found.repo_code if found else f"{distro}{version.replace('.', '')}"


class DebianReleases:
    """The Debian family's :class:`provision.os.base.FamilyReleases`: Debian and Ubuntu."""

    distros: tuple[str, ...] = DISTROS

    def release(self, distro: str, version: str) -> Release | None:
        """The listed release ``version`` of ``distro``, None for any other."""
        return RELEASES.get((distro, version))

    def repo_code(self, distro: str, version: str) -> str:
        """See :func:`repo_code`."""
        return repo_code(distro, version)

    def same_release(self, spec_version: str, version_id: str) -> bool:
        """Only the same ``VERSION_ID``: every release is its own repository."""
        return spec_version == version_id

    def unsupported(self, distro: str, version: str, architecture: str) -> str | None:
        """None: any release may be named; the rules refuse one NVIDIA does not serve."""
        return None

    def wrong_release(self, spec_code: str, machine_code: str) -> tuple[str, str] | None:
        """None: the mismatch itself is the whole finding."""
        return None


FACTS = DebianReleases()
"""The family's releases, as :mod:`provision.os.select` chooses them."""
