"""Choose the OS family, and with it the package manager."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from provision.os.base import FamilyReleases, PackageManager, ReleaseFacts
from provision.os.debian import CREDENTIALS_NOTE as DEBIAN_CREDENTIALS
from provision.os.debian import releases as debian_releases
from provision.os.redhat import CREDENTIALS_NOTE as REDHAT_CREDENTIALS
from provision.os.redhat import releases as redhat_releases

_MANAGER_OF = {"Debian": ("provision.os.debian.apt", "APT"), "RedHat": ("provision.os.redhat.dnf", "DNF")}
"""OS family (Ansible's ``ansible_os_family``) -> the module and name of its package manager, imported
when first asked for (:func:`package_manager`): a spec check on one family never loads the other's
tools, parsers and probes (~3 ms on the 2-core build machine, ~5 ms on the H200; start-up)."""
FAMILIES: tuple[str, ...] = tuple(_MANAGER_OF)
"""The OS families provision supports."""
RELEASES: dict[str, FamilyReleases] = {"Debian": debian_releases.FACTS, "RedHat": redhat_releases.FACTS}
"""OS family -> its releases (``provision/os/<family>/releases.py``)."""
FAMILY_OF_ID = {
    "debian": "Debian",
    "ubuntu": "Debian",
    "rocky": "RedHat",
    "rhel": "RedHat",
    "centos": "RedHat",
    "fedora": "RedHat",
}
"""``/etc/os-release`` ``ID`` (or an ``ID_LIKE`` entry: Rocky's is ``rhel centos fedora``), and the
spec's ``os.distro``, -> OS family (Ansible's ``ansible_os_family`` names the same two)."""


PACKAGE_MANAGER_CREDENTIALS = ", to ".join((DEBIAN_CREDENTIALS, REDHAT_CREDENTIALS))
"""Where each family's package manager reads a repository's credentials, for the spec's refusal of
credentials in a URL: ``apt in ..., to dnf as ...`` (it reads "give them to <this>, or to pip in");
each family's note is its manager's ``credentials_note``."""


def managers() -> dict[str, PackageManager]:
    """Every OS family -> its package manager (each imported now if it was not)."""
    return {family: package_manager(family) for family in FAMILIES}


def family_of(ids: Sequence[str]) -> str | None:
    """The OS family ``/etc/os-release``'s ``ids`` (ID, then ID_LIKE's entries) name: the first one
    known; None when none is."""
    return next((FAMILY_OF_ID[i] for i in ids if i in FAMILY_OF_ID), None)


def family_ids(family: str) -> tuple[str, ...]:
    """The ``/etc/os-release`` IDs of ``family`` (``debian``, ``ubuntu`` for Debian), as the probe
    collector matches a family probe against the host (:func:`provision.detect.collector.for_this_os`)."""
    return tuple(i for i, f in FAMILY_OF_ID.items() if f == family)


def os_family(ids: Sequence[str], distro: str) -> str:
    """The OS family from ``/etc/os-release``'s ``ids`` (ID, then ID_LIKE), else from the spec's
    ``distro``; ``Debian`` when neither names a known one."""
    return family_of((*ids, distro)) or "Debian"


def failure_cause(output: str) -> str | None:
    """The cause of a failed package-manager run, from whichever family's tools printed it; None when
    ``output`` holds no family's error (:meth:`PackageManager.failure_cause`)."""
    return next((c for pm in managers().values() if (c := pm.failure_cause(output)) is not None), None)


def command_line_failure(msg: str) -> bool:
    """Whether an Ansible failure message starts with a package manager's command line."""
    return msg.startswith(tuple(p for pm in managers().values() for p in pm.command_prefixes))


def releases(distro: str) -> FamilyReleases:
    """The releases of ``distro``'s family (an ``/etc/os-release`` ``ID`` or the spec's ``distro``);
    Debian's for an ID of no known family."""
    return RELEASES[FAMILY_OF_ID.get(distro, "Debian")]


def release(distro: str, version: str) -> ReleaseFacts | None:
    """What the supported release ``version`` of ``distro`` carries; None when its family does not
    list it."""
    return releases(distro).release(distro, version)


def repo_code(distro: str, version: str) -> str:
    """NVIDIA's repository code for a distribution release: ``ubuntu2404``, ``debian12``; on the
    RHEL family the OS's own major (``rocky`` ``9.5`` -> ``rhel9``)."""
    return releases(distro).repo_code(distro, version)


def package_format(distro: str) -> str:
    """The package format (``deb``, ``rpm``) of the spec's ``distro``'s family."""
    return package_manager(FAMILY_OF_ID.get(distro, "Debian")).package_format


def same_release(distro: str, spec_version: str, version_id: str) -> bool:
    """Whether ``/etc/os-release``'s ``version_id`` is the spec's release: equal, or on the RHEL
    family the same major when the spec names only the major (``9`` and ``9.5``)."""
    return releases(distro).same_release(spec_version, version_id)


def package_manager(family: str) -> PackageManager:
    """The manager for ``family``; apt for a family with none (the planner refuses that OS anyway:
    ``os-mismatch`` stops a machine whose OS is not the spec's)."""
    module, name = _MANAGER_OF.get(family, _MANAGER_OF["Debian"])
    manager: PackageManager = getattr(importlib.import_module(module), name)
    return manager
