"""The OS families: everything that depends on the OS's package manager, its tools and its releases.

:class:`PackageManager` is the interface the planner and the components use; each family
implements it in ``provision/os/<family>/`` (:mod:`.debian`: apt and dpkg, Debian and Ubuntu;
:mod:`.redhat`: dnf and rpm, Rocky Linux and RHEL 9 and 10),
with its probes (:class:`FamilyProbe`) parsed into the OS-neutral :mod:`.models`, and its releases
(:class:`FamilyReleases` in ``provision/os/<family>/releases.py``: NVIDIA's repository code, the kernel
series and the interpreters of each, how the spec's release matches the machine's).
:func:`package_manager` chooses by OS family, read from the facts (``/etc/os-release``) or, when the
facts cannot tell, from the spec's distribution. Nothing outside ``provision/os/`` names apt, dpkg,
dnf or rpm commands (``tests/unit/test_os_seam.py``).
"""

from provision.os.base import (
    FamilyProbe,
    FamilyProbes,
    FamilyReleases,
    LockState,
    ManagedFiles,
    PackageManager,
    Pin,
    ReleaseFacts,
    name_regex,
    numeric_upstream,
)
from provision.os.models import Package, PackageLocks, PackageOrigins
from provision.os.select import (
    FAMILIES,
    command_line_failure,
    failure_cause,
    family_ids,
    family_of,
    managers,
    os_family,
    package_manager,
    release,
    releases,
    repo_code,
    same_release,
)

__all__ = [
    "FAMILIES",
    "FamilyProbe",
    "FamilyProbes",
    "FamilyReleases",
    "LockState",
    "ManagedFiles",
    "Package",
    "PackageLocks",
    "PackageManager",
    "PackageOrigins",
    "Pin",
    "ReleaseFacts",
    "command_line_failure",
    "failure_cause",
    "family_ids",
    "family_of",
    "managers",
    "name_regex",
    "numeric_upstream",
    "os_family",
    "package_manager",
    "release",
    "releases",
    "repo_code",
    "same_release",
]
