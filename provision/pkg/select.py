"""Choose the package manager by OS family."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.pkg.apt import APT
from provision.pkg.base import PackageManager

if TYPE_CHECKING:
    from provision.detect.facts import Facts

MANAGERS: dict[str, PackageManager] = {"Debian": APT}
"""OS family (Ansible's ``ansible_os_family``) -> its package manager."""
_FAMILY_OF_ID = {"debian": "Debian", "ubuntu": "Debian"}


def os_family(facts: Facts, distro: str) -> str:
    """The OS family from ``/etc/os-release`` (ID, then ID_LIKE), else from the spec's ``distro``."""
    from provision.detect.facts import OsRelease

    os = facts.os
    ids = (os.id, *os.id_like) if isinstance(os, OsRelease) else ()
    return next((_FAMILY_OF_ID[i] for i in (*ids, distro) if i in _FAMILY_OF_ID), "Debian")


def package_manager(family: str) -> PackageManager:
    """The manager for ``family``; apt for a family with none (the planner refuses that OS anyway:
    the spec's distributions are all apt-based and ``os-mismatch`` stops a foreign machine)."""
    return MANAGERS.get(family, APT)
