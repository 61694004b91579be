"""The package-manager seam: everything that depends on the OS's package manager.

:class:`PackageManager` is the interface the planner and the components use; :mod:`.apt` is its
one implementation (Debian and Ubuntu). :func:`package_manager` chooses by OS family, read from
the facts (``/etc/os-release``) or, when the facts cannot tell, from the spec's distribution.
A dnf implementation goes beside :mod:`.apt` and into :data:`.select.MANAGERS`.
"""

from provision.pkg.base import LockState, ManagedFiles, PackageManager, Pin, name_regex, numeric_upstream
from provision.pkg.select import os_family, package_manager

__all__ = [
    "LockState",
    "ManagedFiles",
    "PackageManager",
    "Pin",
    "name_regex",
    "numeric_upstream",
    "os_family",
    "package_manager",
]
