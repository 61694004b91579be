"""Driver consistency: loaded module, on-disk module and userspace packages, read exactly (FF-01).

Three versions describe one driver: the module the kernel runs (``/proc/driver/nvidia/version``),
the module the next boot loads (``modinfo -F version nvidia``) and the userspace libraries
(``libnvidia-compute``/``nvidia-utils`` packages). Only the first differing is a pending
reboot; an on-disk module that differs from userspace is a half-finished upgrade that a
reinstall would not fix (field failures FF-01: shine-cluster #30, illinois-scicomp #70).
"""

from __future__ import annotations

import fnmatch

from provision.detect.facts import Facts, LoadedDriver, Package, Unknown
from provision.pkg import numeric_upstream, os_family, package_manager
from provision.plan.models import Action, Component, Finding, Step
from provision.versions import DottedVersion, DriverVersion

SOURCE = "field failures FF-01 (lyulyul/shine-cluster#30, illinois-scicomp/machine-shop-maintenance#70)"
_USERSPACE = ("libnvidia-compute*", "nvidia-utils*")


def userspace_version(facts: Facts) -> DottedVersion | None:
    """Upstream version of the installed userspace driver (libnvidia-compute*, else nvidia-utils*)."""
    if isinstance(facts.packages, Unknown):
        return None
    for pattern in _USERSPACE:
        for pkg in facts.packages:
            if pkg.installed and fnmatch.fnmatchcase(pkg.name, pattern) and (v := _upstream(facts, pkg)):
                return v
    return None


def _upstream(facts: Facts, pkg: Package) -> DottedVersion | None:
    return numeric_upstream(package_manager(os_family(facts, "")), pkg.version)


def on_disk_version(facts: Facts) -> DriverVersion | None:
    return facts.driver_on_disk if isinstance(facts.driver_on_disk, DriverVersion) else None


def consistency_findings(facts: Facts) -> tuple[Finding, ...]:
    """A blocker when the module on disk differs from the userspace packages (not fixed by a reboot)."""
    disk, user = on_disk_version(facts), userspace_version(facts)
    if disk is None or user is None or disk == user:
        return ()
    repair = package_manager(os_family(facts, "")).repair_command
    return (
        Finding(
            rule="driver-userspace-mismatch",
            severity="blocker",
            source=SOURCE,
            message=f"the kernel module on disk is {disk} but the userspace packages are {user}: the module "
            f"was not rebuilt or an upgrade stopped halfway; repair with `{repair}` "
            "and check `dkms status` before planning again (a reboot alone will not fix this)",
        ),
    )


def reboot_pending(facts: Facts) -> Step | None:
    """A reboot step when only the loaded module differs from what is installed."""
    if not isinstance(facts.driver, LoadedDriver):
        return None
    loaded = facts.driver.version
    installed = on_disk_version(facts) or userspace_version(facts)
    if installed is None or installed == loaded:
        return None
    return Step(
        component=Component.REBOOT,
        action=Action.REBOOT,
        current=str(loaded),
        target=str(installed),
        reason=f"reboot pending (module {loaded} loaded, {installed} installed)",
    )
