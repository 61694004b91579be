"""Choose the OS family, and with it the package manager."""

from __future__ import annotations

from collections.abc import Sequence

from provision.os.base import PackageManager
from provision.os.debian.apt import APT

MANAGERS: dict[str, PackageManager] = {"Debian": APT}
"""OS family (Ansible's ``ansible_os_family``) -> its package manager."""
FAMILY_OF_ID = {"debian": "Debian", "ubuntu": "Debian"}
"""``/etc/os-release`` ``ID`` (or an ``ID_LIKE`` entry), and the spec's ``os.distro``, -> OS family."""


PACKAGE_MANAGER_CREDENTIALS = " or ".join(pm.credentials_note for pm in MANAGERS.values())
"""Where each family's package manager reads a repository's credentials, for the spec's refusal of
credentials in a URL."""


def os_family(ids: Sequence[str], distro: str) -> str:
    """The OS family from ``/etc/os-release``'s ``ids`` (ID, then ID_LIKE), else from the spec's
    ``distro``; ``Debian`` when neither names a known one."""
    return next((FAMILY_OF_ID[i] for i in (*ids, distro) if i in FAMILY_OF_ID), "Debian")


def failure_cause(output: str) -> str | None:
    """The cause of a failed package-manager run, from whichever family's tools printed it; None when
    ``output`` holds no family's error (:meth:`PackageManager.failure_cause`)."""
    return next((c for pm in MANAGERS.values() if (c := pm.failure_cause(output)) is not None), None)


def command_line_failure(msg: str) -> bool:
    """Whether an Ansible failure message starts with a package manager's command line."""
    return msg.startswith(tuple(p for pm in MANAGERS.values() for p in pm.command_prefixes))


def package_manager(family: str) -> PackageManager:
    """The manager for ``family``; apt for a family with none (the planner refuses that OS anyway:
    ``os-mismatch`` stops a machine whose OS is not the spec's)."""
    return MANAGERS.get(family, APT)
