"""The NVIDIA driver: its meta-package per flavour and branch, locked to the branch (or version).

Sources:
    Package names per branch: catalog ``packages.yaml`` (NVIDIA Driver Installation Guide,
    "DIG"; NVIDIA/gpu-driver-container install.sh, "GDC"; NVIDIA's Ubuntu 24.04 repository index).
    Metas that must never be installed (FF-08): ``cuda`` and ``cuda-X-Y`` pull in a driver.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator
from typing import Any

from provision.catalog import Catalog
from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.steps import change_action, noop
from provision.detect.facts import LoadedDriver, Unknown
from provision.findings import Finding
from provision.pkg import PackageManager, Pin, name_regex
from provision.spec.models import Spec

TAGS = ("repository", "packages")
DRIVER_METAS = ("cuda", "cuda-[0-9]*-[0-9]*", "cuda-drivers*")
"""Metas that pull in a driver (FF-08): never installed by a plan."""
DRIVER_FAMILY = ("nvidia-*", "libnvidia-*", "cuda-drivers*", "xserver-xorg-video-nvidia-*")
"""The driver's own packages: pinned together, and removable when the plan changes the driver."""


BRANCH_CARRIERS = (
    "nvidia-open",
    "nvidia-open-[0-9]*",
    "nvidia-driver",
    "nvidia-driver-open",
    "nvidia-driver-[0-9]*",
    "cuda-drivers",
    "cuda-drivers-[0-9]*",
    "libnvidia-compute",
    "libnvidia-compute-[0-9]*",
    "nvidia-utils",
    "nvidia-utils-[0-9]*",
    "nvidia-kernel-*dkms",
    "nvidia-kernel-common*",
    "nvidia-fabricmanager*",
)
"""Packages whose version is the driver's (``580.95.05-1``): every one apt would install must carry
the spec's branch, or a transitional package delivered another branch (checked on apt's simulated
transaction, before anything is installed)."""


class Driver(InstallableComponent):
    """The driver from NVIDIA's repository, or checked when the host image provides it."""

    name = Component.DRIVER
    spec_section = "driver"
    facts = ("driver", "packages")
    role = "nvidia_packages"
    tags = TAGS
    transaction = True
    reboots = True
    verify_checks = ("nvidia-smi", "driver-consistency", "driver-branch", "driver-flavor", "persistence-mode")

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        step = driver_step(ctx)
        replaced = replaced_step(ctx, step) if isinstance(step, Step) else None
        return (step, *((replaced,) if replaced else ()))

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        return source_findings(spec)

    def pins(self, spec: Spec, pm: PackageManager) -> tuple[Pin, ...]:
        """Driver, utilities and fabric manager at the spec's version or branch (not when preinstalled)."""
        if spec.driver.source != "nvidia-repo":
            return ()
        version = pm.version_glob(spec.driver.version) if spec.driver.version else f"{spec.driver.branch}.*"
        why = f"NVIDIA driver, utilities and fabric manager at {version}"
        return (Pin(packages=" ".join(DRIVER_FAMILY), version=version, why=why),)

    def extravars(self, ctx: PlanContext) -> dict[str, Any]:
        steps = ctx.steps()
        return {
            "provision_apt_forbidden_regex": name_regex(forbidden_packages(ctx.spec, steps)),
            "provision_apt_removable_regex": name_regex(removable_packages(ctx.spec, steps)),
            "provision_apt_driver_regex": name_regex(BRANCH_CARRIERS),
            "provision_apt_driver_branch": str(ctx.spec.driver.branch),
        }


def driver_step(ctx: PlanContext) -> Step | Finding:
    """The driver step for ``spec.driver.source``; a blocker Finding when it cannot be planned."""
    if ctx.spec.driver.source == "preinstalled":
        return _preinstalled(ctx)
    unsupported = next(source_findings(ctx.spec), None)
    if unsupported is not None:
        return unsupported
    return _from_nvidia_repo(ctx)


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


def _preinstalled(ctx: PlanContext) -> Step | Finding:
    spec, loaded = ctx.spec, ctx.facts.driver
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


def _from_nvidia_repo(ctx: PlanContext) -> Step:
    branch, wanted, flavor = ctx.spec.driver.branch, ctx.spec.driver.version, ctx.flavor
    meta = ctx.catalog.packages.driver_meta(branch, flavor)
    have = ctx.installed(meta)
    current = ctx.upstream(have) if have else None
    target_text = str(wanted) if wanted else f"newest {branch}.x"
    if current is not None and current.major == branch and (wanted is None or current == wanted):
        return noop(
            Component.DRIVER,
            current=str(current),
            target=target_text,
            reason=f"driver {current} ({meta}, {flavor} kernel modules) already installed",
        )
    pin = ctx.catalog.packages.pinning(branch)
    request = ctx.pm.request(meta, ctx.pm.version_glob(wanted) if wanted else None)
    action = (
        change_action(current, wanted) if wanted else (Action.INSTALL if current is None else Action.UPGRADE)
    )
    return Step(
        component=Component.DRIVER,
        action=action,
        current=str(current) if current else _other(ctx),
        target=target_text,
        packages=tuple(p for p in (pin, request) if p),
        tags=TAGS,
        reason=f"install {meta} ({flavor} kernel modules) from NVIDIA's repository"
        + (f", branch locked by {pin}" if pin else ""),
    )


def replaced_step(ctx: PlanContext, driver: Step) -> Step | None:
    """The held driver packages that a changing driver step replaces, said before anything runs.

    A flavour or branch switch (the wanted meta-package is not installed) removes the installed
    driver's packages: a ``remove`` step. A version change of the same driver moves held packages: a
    ``release`` step (the holds are set again after the transaction). Either needs the user's consent
    (``apply --replace-held`` or ``driver.replace_held``): an administrator may have held that driver.
    None when the driver step changes nothing or nothing installed is held.
    """
    if not driver.changes or isinstance(ctx.facts.packages, Unknown):
        return None
    held = [
        p
        for p in ctx.facts.packages
        if p.installed
        and p.hold
        and any(fnmatch.fnmatchcase(p.name, pat) for pat in DRIVER_FAMILY)
        and not p.name.startswith("nvidia-driver-pinning")
    ]
    if not held:
        return None
    meta = ctx.catalog.packages.driver_meta(ctx.spec.driver.branch, ctx.flavor)
    switch = ctx.installed(meta) is None
    listed = ", ".join(f"{p.name} {p.version}" for p in held)
    consent = "needs consent: `provision apply --replace-held` or driver.replace_held: true"
    if switch:
        return Step(
            component=Component.DRIVER,
            action=Action.REMOVE,
            current=f"{listed} (held)",
            target=f"replaced by {meta} {driver.target}",
            tags=TAGS,
            reason=f"the spec replaces the installed, held driver: apt removes the packages {meta} does not "
            f"keep, after their holds are released; {consent}",
        )
    return Step(
        component=Component.DRIVER,
        action=Action.RELEASE,
        current=f"{listed} (held)",
        target=f"{driver.target}, held again",
        tags=TAGS,
        reason=f"the spec moves the held driver to {driver.target}: its holds are released for this "
        f"transaction and set again after it; {consent}",
    )


def needs_consent(step: Step) -> bool:
    """Whether applying ``step`` replaces a held driver (see :func:`replaced_step`)."""
    return step.component is Component.DRIVER and step.action in (Action.REMOVE, Action.RELEASE)


def _other(ctx: PlanContext) -> str:
    """Describe what is there when the wanted meta-package is not: another flavour or nothing."""
    driver = ctx.facts.driver
    if isinstance(driver, LoadedDriver):
        return f"{driver.version} ({driver.flavor}, loaded)"
    return "absent"


def forbidden_packages(spec: Spec, steps: tuple[Step, ...]) -> tuple[str, ...]:
    """Packages the simulated transaction must not install (FF-08): the driver-pulling CUDA metas
    always, the other flavour's metas, and any driver package when the driver is preinstalled."""
    if spec.driver.source == "preinstalled":
        return (
            *DRIVER_METAS,
            "nvidia-driver*",
            "nvidia-open*",
            "nvidia-kernel*",
            "nvidia-dkms*",
            "libnvidia-compute*",
        )
    flavor_driver = next((s for s in steps if s.component is Component.DRIVER), None)
    open_flavor = flavor_driver is not None and any(
        p.startswith("nvidia-open") for p in flavor_driver.packages
    )
    return (*DRIVER_METAS, "nvidia-driver") if open_flavor else (*DRIVER_METAS[:2], "nvidia-open*")


def removable_packages(spec: Spec, steps: tuple[Step, ...]) -> tuple[str, ...]:
    """Packages the transaction may remove: the driver's own family, and only when the plan changes
    the driver from NVIDIA's repository (a flavour switch or an upgrade replaces its packages).
    Anything else removed refuses the transaction (FF-08)."""
    driver_changes = any(s.component is Component.DRIVER and s.changes for s in steps)
    if spec.driver.source != "nvidia-repo" or not driver_changes:
        return ()
    return DRIVER_FAMILY


def _blocker(rule: str, message: str, source: str = "provision planner") -> Finding:
    return Finding(rule=rule, message=message, source=source, severity="blocker")
