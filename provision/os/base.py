"""The interface every OS family's package manager implements, and the pieces common to all of them.

Nothing here names a tool: :mod:`provision.os.debian` (apt, dpkg) and :mod:`provision.os.redhat`
(dnf, rpm) implement :class:`PackageManager` and give their probes as :class:`FamilyProbe` values,
which :mod:`provision.detect.domains.packages` turns into facts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from provision.os.models import Package, PackageLocks
from provision.unknown import Unknown
from provision.versions import DottedVersion


@dataclass(frozen=True)
class FamilyProbe:
    """One probe of an OS family's detection: the command and its pure parser.

    Attributes:
        id: Probe id and raw file stem (``dpkg-nvidia``, ``rpm-nvidia``).
        argv: The command, run without a shell (``sh -c`` with a fixed script where it needs one).
        timeout: Seconds before the collector kills it.
        parse: ``(output, rc) -> value | Unknown``; never raises.
        doc: One line for the fact's reader.
        requires: The binary the command needs, when it is not ``argv[0]``.
    """

    id: str
    argv: tuple[str, ...]
    timeout: float
    parse: Callable[[str, int], Any]
    doc: str
    requires: str | None = None


@dataclass(frozen=True)
class FamilyProbes:
    """An OS family's probes, by the neutral Facts field each feeds.

    Attributes:
        packages: The package database (``Facts.packages``).
        locks: provision's locks, guard and key (``Facts.package_locks``).
        origins: Where the installed driver packages come from (``Facts.origins``).
    """

    packages: FamilyProbe
    locks: FamilyProbe
    origins: FamilyProbe


@dataclass(frozen=True)
class Pin:
    """One package family locked to a version pattern in one transaction.

    Attributes:
        packages: Space-separated package-name globs (``libcudnn9* cudnn9*``).
        version: Version pattern in the manager's syntax (``9.14.0.*``).
        why: One line for the lock file's reader.
    """

    packages: str
    version: str
    why: str


@dataclass(frozen=True)
class ManagedFiles:
    """Files provision owns on the target for the NVIDIA repository and the locks.

    ``legacy_pins``: where earlier releases of provision wrote the pins; apply removes them.
    """

    keyring: str
    sources: str
    pins: str
    upgrade_guard: str
    legacy_pins: tuple[str, ...] = ()


@dataclass(frozen=True)
class LockState:
    """provision's lock files as found on the machine (None: absent), and the legacy pin files
    (:attr:`ManagedFiles.legacy_pins`) still present."""

    pins: str | None
    upgrade_guard: str | None
    legacy_pins: tuple[str, ...] = ()


class ReleaseFacts(Protocol):
    """What one supported release of a family carries that provision plans with.

    Attributes:
        repo_code: NVIDIA's CUDA repository code for it (``ubuntu2404``, ``rhel9``).
        kernel_series: The kernel series the release's general-availability kernel is of (``6.8``).
        interpreters: The Python versions (X.Y) the release ships as packages.
        signed_open_kmods: Whether the distribution ships NVIDIA's open modules signed with its own
            Secure Boot key; None where the family leaves it to the catalog's distribution archives
            (``distro_archives``: Ubuntu's signed ``linux-modules-nvidia-*``).
    """

    @property
    def repo_code(self) -> str: ...

    @property
    def kernel_series(self) -> str: ...

    @property
    def interpreters(self) -> tuple[str, ...]: ...

    @property
    def signed_open_kmods(self) -> bool | None: ...


class FamilyReleases(Protocol):
    """One OS family's releases: which it supports, NVIDIA's repository codes, how a spec's release
    matches the machine's. Implemented by ``provision/os/<family>/releases.py``; all pure.

    Attributes:
        distros: ``/etc/os-release`` IDs of the family that the spec accepts.
    """

    distros: tuple[str, ...]

    def release(self, distro: str, version: str) -> ReleaseFacts | None:
        """The supported release ``version`` of ``distro``, None when the family does not list it."""
        ...

    def repo_code(self, distro: str, version: str) -> str:
        """NVIDIA's repository code for ``distro`` ``version`` (also for a release not listed)."""
        ...

    def same_release(self, spec_version: str, version_id: str) -> bool:
        """Whether ``/etc/os-release``'s ``version_id`` is the spec's release."""
        ...

    def unsupported(self, distro: str, version: str, architecture: str) -> str | None:
        """Why the spec may not name this release (the spec's validation error), None when it may."""
        ...

    def wrong_release(self, spec_code: str, machine_code: str) -> tuple[str, str] | None:
        """What happens with the spec's repository on a machine of another release of the family:
        (the words that end the ``os-mismatch`` message, their public source), None for nothing more."""
        ...


class PackageManager(Protocol):
    """What the planner needs to know about one OS family's package manager. All methods are pure.

    Attributes:
        family: Ansible's ``ansible_os_family`` for it (``Debian``, ``RedHat``); the roles include
            ``tasks/<family>.yml``.
        package_format: The catalog's key for its package names (``deb``, ``rpm``).
        files: Where the repository, the pins and the upgrade guard go.
        repair_command: The command that finishes a broken package state.
        interrupted_note: What an unfinished transaction is, for the broken-package-state blocker.
        state_source: The public source of the package states it reads.
        reboot_flag: How the OS flags a pending reboot, for plans.
        index_source: Where the versions a repository serves were read on the host, for plans.
        command_prefixes: How its commands' lines start in Ansible's failure messages.
        credentials_note: Where it reads a repository's credentials (never from the URL).
        source_note: How the repository source is written and signed, for plans.
        lock_noun: What its locks are called in plans (``apt pins``, ``dnf versionlock entries``).
        guard_noun: What its automatic-upgrade guard is called (``unattended-upgrades guard``).
        probes: Its detection probes.
    """

    family: str
    package_format: str
    files: ManagedFiles
    repair_command: str
    source_note: str
    credentials_note: str
    index_source: str
    command_prefixes: tuple[str, ...]
    interrupted_note: str
    state_source: str
    reboot_flag: str
    lock_noun: str
    guard_noun: str
    probes: FamilyProbes

    def upstream(self, version: str) -> str:
        """The upstream part of a package version (``2.28.3-1+cuda13.0`` -> ``2.28.3``)."""
        ...

    def compare(self, a: str, b: str) -> int:
        """Negative, zero or positive as version ``a`` sorts before, equal to or after ``b``."""
        ...

    def version_glob(self, target: DottedVersion, suffix: str = "", full_parts: int = 3) -> str:
        """A version pattern: any revision of a full ``target``, any release under a prefix."""
        ...

    def request(self, name: str, version: str | None = None) -> str:
        """One install request: ``name`` or ``name`` at the version pattern ``version``."""
        ...

    def request_name(self, request: str) -> str:
        """The package name of a request made by :meth:`request`."""
        ...

    def pins_text(self, pins: Sequence[Pin]) -> str:
        """The pins file provision writes, exactly (compared on the next plan for drift)."""
        ...

    def upgrade_guard_text(self, patterns: tuple[str, ...]) -> str:
        """The file keeping automatic upgrades away from the packages matching ``patterns``."""
        ...

    def lock_state(self, locks: PackageLocks | Unknown) -> LockState | Unknown:
        """provision's pins and upgrade guard as detection found them (``Facts.package_locks``)."""
        ...

    def install_command(self, names: Sequence[str]) -> str:
        """The command line that installs ``names`` (advice printed for a person)."""
        ...

    def remove_command(self, names: Sequence[str]) -> str:
        """The command line that removes ``names``."""
        ...

    def reinstall_command(self, names: Sequence[str]) -> str:
        """The command line that installs ``names`` again at their installed version."""
        ...

    @property
    def initramfs_command(self) -> str:
        """The command line that rebuilds the initramfs of every installed kernel."""
        ...

    def satisfied(self, packages: tuple[Package, ...] | Unknown, request: str) -> bool:
        """Whether an installed package already answers ``request`` (a name, or the family's
        name-and-version form such as rpm's ``kernel-devel-5.14.0-503.14.1.el9_5``)."""
        ...

    def compiler_packages(self, major: str, cxx: bool) -> tuple[str, ...]:
        """The packages of the compiler (gcc ``major``, and C++ with ``cxx``) the kernel was built with."""
        ...

    def driver_stream(self, os_version: str, branch: int, flavor: str) -> str | None:
        """The module stream that selects the driver's branch and flavour (``nvidia-driver:580-open``),
        None where the release has no modules (the branch is then held by the pins)."""
        ...

    @property
    def dkms_repositories(self) -> tuple[str, ...]:
        """Repositories DKMS comes from beyond the OS's own and NVIDIA's (``epel``)."""
        ...

    def failure_cause(self, output: str) -> str | None:
        """The cause of a failed run of its tools, from their combined output; None when the text
        holds no error of theirs. Never raises."""
        ...

    def repair_advice(self, broken: Sequence[Package], interrupted: bool) -> str:
        """What finishes a broken package state (``run `dpkg --configure -a`...``), chosen from the
        unfinished ``broken`` packages and whether the last run was ``interrupted``."""
        ...

    def packaged_kernels(self, packages: tuple[Package, ...] | Unknown) -> tuple[str, ...]:
        """Releases of the kernels installed from packages (``6.8.0-60-generic``), sorted."""
        ...

    def kernel_build_packages(
        self, packages: tuple[Package, ...] | Unknown, kernels: tuple[str, ...]
    ) -> tuple[str, ...]:
        """Headers for ``kernels`` and the headers meta-packages that follow kernel upgrades."""
        ...


def name_regex(patterns: tuple[str, ...]) -> str:
    """One regular expression, unanchored, matching package names against fnmatch ``patterns``."""
    parts = [re.escape(p).replace(r"\*", "[^\\s=]*").replace(r"\[0\-9\]", "[0-9]") for p in patterns]
    return "(?:" + "|".join(parts) + ")" if parts else "(?!)"


def installed(packages: tuple[Package, ...] | Unknown, name: str) -> Package | None:
    """The package ``name`` when the package database has it fully installed, else None."""
    if isinstance(packages, Unknown):
        return None
    return next((p for p in packages if p.name == name and p.installed), None)


def numeric_upstream(pm: PackageManager, version: str) -> DottedVersion | None:
    """The numeric upstream version (``580.95.05-1`` -> 580.95.05, ``2.28.3-1+cuda13.0`` -> 2.28.3),
    None when it is not dotted integers."""
    try:
        return DottedVersion(pm.upstream(version).split("+")[0].split("~")[0])
    except ValueError:
        return None
