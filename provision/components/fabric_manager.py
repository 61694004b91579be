"""Fabric manager by topology: only on NVSwitch systems, always at exactly the driver version.

Sources: NVIDIA Fabric Manager User Guide ("FMUG": NVSwitch systems only; the FM version must
match the driver; https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/);
NVIDIA/gpu-driver-container install.sh ("GDC": ``nvidia-fabricmanager=${DRIVER_VERSION}-1`` from
R580, ``-<branch>`` names before; NVLink 5 needs nvlsm; https://github.com/NVIDIA/gpu-driver-container);
field failures FF-02 to FF-05 (docs/field-failures.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from provision.catalog import Catalog
from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.steps import change_action, noop
from provision.detect.unknown import Unknown
from provision.fieldfailures import ff_ref
from provision.findings import Finding
from provision.spec.models import Spec
from provision.versions import DriverVersion

if TYPE_CHECKING:
    from provision.detect.facts import Facts

SOURCE = (
    "NVIDIA Fabric Manager User Guide (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/); "
    "NVIDIA/gpu-driver-container install.sh (https://github.com/NVIDIA/gpu-driver-container); "
    f"field failures FF-02 to FF-05 ({ff_ref(2, 3, 4, 5)})"
)
_TAGS = ("repository", "packages")
FMUG = "NVIDIA Fabric Manager User Guide"
GDC = "NVIDIA/gpu-driver-container install.sh"
"""The documents a step's reason names (their addresses are in :data:`SOURCE`)."""


class FabricManager(InstallableComponent):
    """The fabric manager (and NVLink 5's subnet manager), only on NVSwitch systems."""

    name = Component.FABRIC_MANAGER
    spec_section = "fabric_manager"
    facts = ("nvidia_pci", "fabric", "packages", "driver")
    role = "nvidia_packages"
    tags = _TAGS
    transaction = True
    reboots = True
    reboot_note = "the fabric manager change also needs the GPUs reset (NVIDIA/nccl#1488)"
    verify_checks = ("fabricmanager-version", "fabric-state")

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        return (fabric_manager_step(ctx),)

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        return spec_findings(spec, catalog)

    def findings(self, ctx: PlanContext) -> Iterable[Finding]:
        return fabric_findings(ctx.spec, ctx.facts, ctx.catalog)


def fabric_manager_needed(spec: Spec, facts: Facts, catalog: Catalog) -> tuple[bool, str]:
    """Facts decide when they can; otherwise the catalog: an NVSwitch baseboard model with 8 GPUs."""
    seen, evidence = facts.nvswitch()
    if seen is not None:
        verdict = "needs the fabric manager" if seen else "needs no fabric manager"
        return seen, f"{evidence}: {verdict} ({FMUG})"
    return needed_by_spec(spec, catalog)


def needed_by_spec(spec: Spec, catalog: Catalog) -> tuple[bool, str]:
    """Whether the machine the spec describes needs the fabric manager: an NVSwitch baseboard
    model with 8 GPUs (FMUG). The spec's GPU model must be in the catalog."""
    model = catalog.gpus[spec.gpus.model]
    if not model.nvswitch:
        return False, f"{model.name} has no NVSwitch; fabric manager is only for NVSwitch systems ({FMUG})"
    if spec.gpus.count < 8:
        return False, (
            f"{spec.gpus.count} x {model.name}: not an 8-GPU HGX/DGX NVSwitch baseboard; "
            f"fabric manager not needed ({FMUG})"
        )
    return (
        True,
        f"{spec.gpus.count} x {model.name} on an NVSwitch baseboard needs the fabric manager ({FMUG})",
    )


def managed_elsewhere(facts: Facts) -> bool:
    """The fabric is up (Completed/Success on every GPU) with no NVSwitch visible and no fabric
    manager installed here: it is run outside this OS, as for a VM given GPUs of an HGX board
    under shared NVSwitch virtualization (FMUG; seen on the device tool's two-H200 VM)."""
    fabric = facts.fabric
    if isinstance(fabric, Unknown) or not fabric.states or not fabric.completed:
        return False
    return not facts.nvswitch_visible() and _installed_fm(facts) is None


ELSEWHERE = (
    "the GPU fabric is Completed/Success with no NVSwitch visible and no fabric manager in this OS: "
    f"it is managed outside (shared NVSwitch virtualization); nothing to install here ({FMUG})"
)


def fabric_findings(spec: Spec, facts: Facts, catalog: Catalog) -> tuple[Finding, ...]:
    """Refusals for required-without-NVSwitch and disabled-on-NVSwitch, from the machine's facts."""
    seen, evidence = facts.nvswitch()
    if managed_elsewhere(facts):
        return ()
    if seen is False and spec.fabric_manager == "required":
        return (
            _finding(
                "fm-required-without-nvswitch",
                "blocker",
                f"fabric_manager: required, but no NVSwitch was found ({evidence}); the service "
                "would fail with NV_WARN_NOTHING_TO_DO; set fabric_manager: auto (FF-04)",
            ),
        )
    if seen is True and spec.fabric_manager == "disabled":
        return (
            _finding(
                "fm-disabled-on-detected-nvswitch",
                "blocker",
                f"NVSwitch system ({evidence}): the fabric manager is required; without it CUDA "
                "fails with error 802 'system not yet initialized' (FF-03)",
            ),
        )
    installed_fm = _installed_fm(facts)
    if seen is False and installed_fm:
        return (
            _finding(
                "fm-installed-without-nvswitch",
                "warning",
                f"{installed_fm} is installed but there is no NVSwitch ({evidence}); its service "
                "fails at every boot with NV_WARN_NOTHING_TO_DO and can be removed (FF-04)",
            ),
        )
    return ()


def _installed_fm(facts: Facts) -> str | None:
    if isinstance(facts.packages, Unknown):
        return None
    return next(
        (
            p.name
            for p in facts.packages
            if p.installed and p.name.startswith("nvidia-fabricmanager") and not p.name.endswith("-dev")
        ),
        None,
    )


def exact_driver_version(spec: Spec, facts: Facts) -> DriverVersion | None:
    """The version the fabric manager must equal: the spec's exact one, else the loaded preinstalled one."""
    if spec.driver.version is not None:
        return spec.driver.version
    if spec.driver.source == "preinstalled" and not isinstance(facts.driver, Unknown):
        return facts.driver.version
    return None


def fabric_manager_step(ctx: PlanContext) -> Step | Finding:
    """Fabric manager (and NVLink 5's subnet manager) at exactly the driver version, or why not."""
    spec, facts = ctx.spec, ctx.facts
    needed, why = fabric_manager_needed(spec, facts, ctx.catalog)
    if spec.fabric_manager == "disabled" or not needed:
        return noop(
            Component.FABRIC_MANAGER,
            reason="fabric_manager: disabled in the spec" if spec.fabric_manager == "disabled" else why,
        )
    if managed_elsewhere(facts):
        return noop(Component.FABRIC_MANAGER, reason=ELSEWHERE)
    version = exact_driver_version(spec, facts)
    if version is None:
        return _needs_exact_driver()
    return _fm_package_step(ctx, version)


def spec_findings(spec: Spec, catalog: Catalog) -> Iterator[Finding]:
    """The exact-driver rule on the spec alone, for ``validate``: the machine the spec describes
    needs the fabric manager and nothing fixes the driver version it must equal (FF-02).

    It is :func:`fabric_manager_step`'s rule where the facts cannot tell: the plan judges it with
    the machine's facts, which may show no NVSwitch or a fabric managed outside the OS.
    """
    if spec.fabric_manager == "disabled" or catalog.gpu(spec.gpus.model) is None:
        return
    pinned = spec.driver.source == "preinstalled" or spec.driver.version is not None
    if needed_by_spec(spec, catalog)[0] and not pinned:
        yield _needs_exact_driver()


def _needs_exact_driver() -> Finding:
    return _finding(
        "fabric-manager-needs-exact-driver",
        "blocker",
        "the fabric manager must equal the driver version exactly; set driver.version "
        '(e.g. "580.95.05") so both are pinned together (FF-02)',
    )


def _fm_package_step(ctx: PlanContext, version: DriverVersion) -> Step:
    packages = ctx.names
    name = packages.fabric_manager(version.branch)
    extra = packages.nvlink5(version.branch) if ctx.catalog.gpus[ctx.spec.gpus.model].nvlink5 else ()
    have = ctx.installed(name)
    current = ctx.upstream(have) if have else None
    missing_extra = tuple(p for p in extra if ctx.installed(p) is None)
    if current == version and not missing_extra:
        return noop(
            Component.FABRIC_MANAGER,
            current=str(current),
            target=str(version),
            reason=f"{name} {current} matches the driver exactly",
        )
    request = ctx.pm.request(name, ctx.pm.version_glob(version))
    return Step(
        component=Component.FABRIC_MANAGER,
        action=change_action(current, version) if current != version else Action.INSTALL,
        current=str(current) if current else "absent",
        target=str(version),
        packages=((request,) if current != version else ()) + missing_extra,
        tags=_TAGS,
        reason=f"{name} pinned to the driver version {version} ({FMUG}: versions must match; FF-02)"
        + (f"; NVLink 5 also needs {', '.join(extra)} ({GDC}; FF-05)" if extra else "")
        + "; GPUs need a reset or reboot after a fabric manager change (NVIDIA/nccl#1488)",
    )


def _finding(rule: str, severity: str, message: str) -> Finding:
    return Finding(
        rule=rule, severity="blocker" if severity == "blocker" else "warning", message=message, source=SOURCE
    )
