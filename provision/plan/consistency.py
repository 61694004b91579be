"""Driver consistency: loaded module, on-disk module and userspace packages, read exactly (FF-01).

Three versions describe one driver: the module the kernel runs (``/proc/driver/nvidia/version``),
the module the next boot loads (``modinfo -F version nvidia``) and the userspace libraries
(``libnvidia-compute``/``nvidia-utils`` packages). Only the first differing is a pending
reboot; an on-disk module that differs from userspace is a half-finished upgrade that a
reinstall would not fix (field failure FF-01, docs/field-failures.md#ff-01).
"""

from __future__ import annotations

from provision.detect.facts import Facts, LoadedDriver, Unknown
from provision.fieldfailures import ff_ref
from provision.plan.models import Action, Component, Finding, Step
from provision.versions import DottedVersion

SOURCE = f"field failures FF-01 ({ff_ref(1)})"
NVIDIA_PREFIXES = ("nvidia-", "libnvidia-")


def userspace_version(facts: Facts) -> DottedVersion | None:
    """Upstream version of the installed userspace driver (:meth:`Facts.userspace_driver`)."""
    return facts.userspace_driver(facts.package_manager().upstream)


def consistency_findings(facts: Facts) -> tuple[Finding, ...]:
    """A blocker when the module on disk differs from the userspace packages (not fixed by a reboot)."""
    disk, user = facts.on_disk_driver(), userspace_version(facts)
    if disk is None or user is None or disk == user:
        return ()
    repair = facts.package_manager().repair_command
    held = _held_at(facts, str(disk))
    why = (
        f"{', '.join(held)} {'is' if len(held) == 1 else 'are'} held at {disk} while the rest moved: "
        "release the holds and upgrade the driver's packages together,"
        if held
        else f"the module was not rebuilt or an upgrade stopped halfway; repair with `{repair}`"
    )
    return (
        Finding(
            rule="driver-userspace-mismatch",
            severity="blocker",
            source=SOURCE,
            message=f"the kernel module on disk is {disk} but the userspace packages are {user}: {why} "
            "and check `dkms status` before planning again (a reboot alone will not fix this)",
        ),
    )


def _held_at(facts: Facts, version: str) -> list[str]:
    """NVIDIA packages held by the package manager at the on-disk module's ``version``: a hold on
    the kernel side alone lets an upgrade move the userspace under it (FF-01)."""
    if isinstance(facts.packages, Unknown):
        return []
    upstream = facts.package_manager().upstream
    return [
        p.name
        for p in facts.packages
        if p.installed
        and p.held
        and p.name.startswith(("nvidia-", "libnvidia-"))
        and upstream(p.version) == version
    ]


def reboot_pending(facts: Facts) -> Step | None:
    """A reboot step when only the loaded module differs from what is installed, or when package
    scripts left the ``/run/reboot-required`` flag (naming the packages they list)."""
    if not isinstance(facts.driver, LoadedDriver):
        return _flagged(facts)
    loaded = facts.driver.version
    installed = facts.on_disk_driver() or userspace_version(facts)
    if installed is None or installed == loaded:
        return _flagged(facts)
    return Step(
        component=Component.REBOOT,
        action=Action.REBOOT,
        current=str(loaded),
        target=str(installed),
        reason=f"reboot pending (module {loaded} loaded, {installed} installed)",
    )


def _flagged(facts: Facts) -> Step | None:
    locks = facts.package_locks
    if isinstance(locks, Unknown) or locks.reboot_required is None:
        return None
    named = f" by {', '.join(locks.reboot_required)}" if locks.reboot_required else ""
    return Step(
        component=Component.REBOOT,
        action=Action.REBOOT,
        reason=f"reboot pending: {facts.package_manager().reboot_flag}{named}",
    )
