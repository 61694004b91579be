"""Driver and fabric manager steps.

Sources:
    Package names per branch: compat.md §4c/§7 (DIG; NVIDIA/gpu-driver-container
    install.sh, "GDC"), read through the catalog.
    Fabric manager at exactly the driver version: NVIDIA Fabric Manager User Guide
    ("FMUG") and GDC's ``nvidia-fabricmanager=${DRIVER_VERSION}-1`` (compat.md §5).
"""

from __future__ import annotations

from typing import Literal

from provision.catalog import Catalog
from provision.detect.facts import Facts, LoadedDriver, Unknown
from provision.plan.models import Action, Component, Finding, Step
from provision.plan.steps import change_action, installed, noop, upstream
from provision.spec.models import Spec
from provision.versions import DriverVersion

Flavor = Literal["open", "proprietary"]
FM_SOURCE = "NVIDIA Fabric Manager User Guide; NVIDIA/gpu-driver-container install.sh (compat.md §5)"


def driver_step(spec: Spec, facts: Facts, catalog: Catalog, flavor: Flavor) -> Step | Finding:
    """The driver step for ``spec.driver.source``; a blocker Finding when it cannot be planned."""
    if spec.driver.source == "preinstalled":
        return _preinstalled(spec, facts)
    if spec.driver.source == "distro":
        return Finding(
            rule="driver-source-distro-unsupported",
            message="driver.source: distro is not implemented in this version; "
            "use nvidia-repo or preinstalled",
            source="provision v1 scope (README, 'Spec')",
            severity="blocker",
        )
    return _from_nvidia_repo(spec, facts, catalog, flavor)


def _preinstalled(spec: Spec, facts: Facts) -> Step | Finding:
    loaded = facts.driver
    if isinstance(loaded, Unknown):
        return _blocker(
            "driver-preinstalled-missing",
            f"driver.source is preinstalled but no NVIDIA driver is loaded ({loaded.unknown})",
        )
    wanted = spec.driver.version
    if loaded.version.branch != spec.driver.branch or (wanted and loaded.version != wanted):
        want_text = str(wanted or f"branch {spec.driver.branch}")
        return _blocker(
            "driver-preinstalled-mismatch",
            f"preinstalled driver is {loaded.version}, spec wants {want_text}; provision never "
            "replaces a driver provided by the host image",
        )
    return noop(
        Component.DRIVER,
        current=str(loaded.version),
        target=str(wanted or spec.driver.branch),
        reason=f"driver {loaded.version} ({loaded.flavor} modules) preinstalled by the host image; "
        f"branch {spec.driver.branch} as specified",
    )


def _from_nvidia_repo(spec: Spec, facts: Facts, catalog: Catalog, flavor: Flavor) -> Step:
    branch, wanted = spec.driver.branch, spec.driver.version
    meta = catalog.packages.driver_meta(branch, flavor)
    have = installed(facts, meta)
    current = upstream(have) if have else None
    target_text = str(wanted) if wanted else f"newest {branch}.x"
    if current is not None and current.major == branch and (wanted is None or current == wanted):
        return noop(
            Component.DRIVER,
            current=str(current),
            target=target_text,
            reason=f"driver {current} ({meta}, {flavor} kernel modules) already installed",
        )
    pin = catalog.packages.pinning(branch)
    packages = tuple(p for p in (pin, f"{meta}={wanted}-*" if wanted else meta) if p)
    action = (
        change_action(current, wanted) if wanted else (Action.INSTALL if current is None else Action.UPGRADE)
    )
    return Step(
        component=Component.DRIVER,
        action=action,
        current=str(current) if current else _other(facts, flavor),
        target=target_text,
        packages=packages,
        tags=("repository", "packages"),
        reason=f"install {meta} ({flavor} kernel modules) from NVIDIA's repository"
        + (f", branch locked by {pin}" if pin else ""),
    )


def _other(facts: Facts, flavor: Flavor) -> str:
    """Describe what is there when the wanted meta-package is not: another flavour or nothing."""
    if isinstance(facts.driver, LoadedDriver):
        return f"{facts.driver.version} ({facts.driver.flavor}, loaded)"
    return "absent"


def exact_driver_version(spec: Spec, facts: Facts) -> DriverVersion | None:
    """The one driver version the fabric manager must equal: spec's exact version, else the loaded one
    when the driver is preinstalled."""
    if spec.driver.version is not None:
        return spec.driver.version
    if spec.driver.source == "preinstalled" and isinstance(facts.driver, LoadedDriver):
        return facts.driver.version
    return None


def fabric_manager_needed(spec: Spec, catalog: Catalog) -> tuple[bool, str]:
    """Whether this machine needs the fabric manager, and why (FMUG: NVSwitch systems only).

    v1 decides from the catalog: an NVSwitch baseboard model with 8 GPUs (HGX/DGX).
    """
    model = catalog.gpus[spec.gpus.model]
    if not model.nvswitch:
        return False, f"{model.name} has no NVSwitch; fabric manager is only for NVSwitch systems (FMUG)"
    if spec.gpus.count < 8:
        return False, (
            f"{spec.gpus.count} x {model.name}: not an 8-GPU HGX/DGX NVSwitch baseboard; "
            "fabric manager not needed (FMUG)"
        )
    return True, f"{spec.gpus.count} x {model.name} on an NVSwitch baseboard needs the fabric manager (FMUG)"


def fabric_manager_step(spec: Spec, facts: Facts, catalog: Catalog) -> Step | Finding:
    """Fabric manager at exactly the driver version, or a no-op that says why not."""
    needed, why = fabric_manager_needed(spec, catalog)
    if spec.fabric_manager == "disabled" or not needed:
        reason = "fabric_manager: disabled in the spec" if spec.fabric_manager == "disabled" else why
        return noop(Component.FABRIC_MANAGER, reason=reason)
    version = exact_driver_version(spec, facts)
    if version is None:
        return _blocker(
            "fabric-manager-needs-exact-driver",
            "the fabric manager must equal the driver version exactly; set driver.version "
            '(e.g. "580.95.05") so both are pinned together',
            FM_SOURCE,
        )
    return _fm_package_step(facts, catalog, version)


def _fm_package_step(facts: Facts, catalog: Catalog, version: DriverVersion) -> Step:
    name = catalog.packages.fabric_manager(version.branch)
    have = installed(facts, name)
    current = upstream(have) if have else None
    if current == version:
        return noop(
            Component.FABRIC_MANAGER,
            current=str(current),
            target=str(version),
            reason=f"{name} {current} matches the driver exactly",
        )
    return Step(
        component=Component.FABRIC_MANAGER,
        action=change_action(current, version),
        current=str(current) if current else "absent",
        target=str(version),
        packages=(f"{name}={version}-*",),
        tags=("repository", "packages"),
        reason=f"{name} pinned to the driver version {version} (FMUG: versions must match)",
    )


def reboot_step(spec: Spec, facts: Facts, driver: Step | Finding) -> Step | None:
    """A reboot when the driver changes, or when the loaded module differs from the installed one."""
    if isinstance(driver, Step) and driver.changes:
        return Step(
            component=Component.REBOOT,
            action=Action.REBOOT,
            target=driver.target,
            reason="the new kernel module loads at the next boot",
        )
    if isinstance(facts.driver, LoadedDriver) and isinstance(driver, Step) and driver.current:
        loaded, on_disk = str(facts.driver.version), driver.current
        if spec.driver.source == "nvidia-repo" and loaded != on_disk:
            return Step(
                component=Component.REBOOT,
                action=Action.REBOOT,
                current=loaded,
                target=on_disk,
                reason=f"reboot pending (module {loaded} loaded, {on_disk} installed)",
            )
    return None


def _blocker(rule: str, message: str, source: str = "provision planner") -> Finding:
    return Finding(rule=rule, message=message, source=source, severity="blocker")
