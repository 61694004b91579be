"""Driver and fabric manager steps.

Sources:
    Package names per branch: catalog ``packages.yaml`` (NVIDIA Driver Installation Guide,
    "DIG"; NVIDIA/gpu-driver-container install.sh, "GDC"; NVIDIA's Ubuntu 24.04 repository index).
    Fabric manager at exactly the driver version: NVIDIA Fabric Manager User Guide
    ("FMUG") and GDC's ``nvidia-fabricmanager=${DRIVER_VERSION}-1``.
"""

from __future__ import annotations

from collections.abc import Iterator

from provision.catalog import Catalog, Flavor
from provision.detect.facts import Facts, LoadedDriver, Unknown
from provision.plan.models import Action, Component, Finding, Step
from provision.plan.steps import change_action, installed, noop, upstream
from provision.spec.models import Spec


def driver_step(spec: Spec, facts: Facts, catalog: Catalog, flavor: Flavor) -> Step | Finding:
    """The driver step for ``spec.driver.source``; a blocker Finding when it cannot be planned."""
    if spec.driver.source == "preinstalled":
        return _preinstalled(spec, facts)
    unsupported = next(source_findings(spec), None)
    if unsupported is not None:
        return unsupported
    return _from_nvidia_repo(spec, facts, catalog, flavor)


def source_findings(spec: Spec) -> Iterator[Finding]:
    """The driver source this version cannot install from; spec-only, so ``validate`` runs it too."""
    if spec.driver.source == "distro":
        yield Finding(
            rule="driver-source-distro-unsupported",
            message="driver.source: distro is not implemented in this version; "
            "use nvidia-repo or preinstalled",
            source="provision v1 scope (README, 'Spec')",
            severity="blocker",
        )


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


def _blocker(rule: str, message: str, source: str = "provision planner") -> Finding:
    return Finding(rule=rule, message=message, source=source, severity="blocker")
