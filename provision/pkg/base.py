"""The interface every package manager implements, and the pieces common to all of them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from provision.versions import DottedVersion

if TYPE_CHECKING:
    from provision.detect.facts import Facts, Package, Unknown


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


class PackageManager(Protocol):
    """What the planner needs to know about one OS family's package manager. All methods are pure.

    Attributes:
        family: Ansible's ``ansible_os_family`` for it (``Debian``); the roles include
            ``tasks/<family>.yml``.
        files: Where the repository, the pins and the upgrade guard go.
        repair_command: The command that finishes a broken package state.
    """

    family: str
    files: ManagedFiles
    repair_command: str

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

    def lock_state(self, facts: Facts) -> LockState | Unknown:
        """provision's pins and upgrade guard as the facts found them."""
        ...

    def repair_advice(self, broken: Sequence[Package], interrupted: bool) -> str:
        """What finishes a broken package state (``run `dpkg --configure -a`...``), chosen from the
        unfinished ``broken`` packages and whether the last run was ``interrupted``."""
        ...

    def packaged_kernels(self, facts: Facts) -> tuple[str, ...]:
        """Releases of the kernels installed from packages (``6.8.0-60-generic``), sorted."""
        ...

    def kernel_build_packages(self, facts: Facts, kernels: tuple[str, ...]) -> tuple[str, ...]:
        """Headers for ``kernels`` and the headers meta-packages that follow kernel upgrades."""
        ...


def name_regex(patterns: tuple[str, ...]) -> str:
    """One regular expression, unanchored, matching package names against fnmatch ``patterns``."""
    parts = [re.escape(p).replace(r"\*", "[^\\s=]*").replace(r"\[0\-9\]", "[0-9]") for p in patterns]
    return "(?:" + "|".join(parts) + ")" if parts else "(?!)"


def installed(facts: Facts, name: str) -> Package | None:
    """The package ``name`` when the package database has it fully installed, else None."""
    pkg = facts.package(name)
    return pkg if pkg is not None and pkg.installed else None


def numeric_upstream(pm: PackageManager, version: str) -> DottedVersion | None:
    """The numeric upstream version (``580.95.05-1`` -> 580.95.05, ``2.28.3-1+cuda13.0`` -> 2.28.3),
    None when it is not dotted integers."""
    try:
        return DottedVersion(pm.upstream(version).split("+")[0].split("~")[0])
    except ValueError:
        return None
