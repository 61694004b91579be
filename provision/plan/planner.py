"""make_plan: the pure function from (spec, facts, catalog) to a Plan.

Nothing here runs a command or reads a file; the same inputs give the same plan. Step
order: repository, kernel modules, DKMS, driver, fabric manager, CUDA toolkit, cuDNN, NCCL,
holds, Python venv, wheels, Secure Boot, reboot.
"""

from __future__ import annotations

import re
from typing import Any

from provision.catalog import Catalog, Flavor
from provision.detect.facts import Facts, Unknown
from provision.plan import driver, fabric, kernel, locks, packages, python
from provision.plan.checks import check_facts
from provision.plan.consistency import consistency_findings, reboot_pending
from provision.plan.flavor import flavor_findings
from provision.plan.hardware import hardware_findings
from provision.plan.models import Action, Component, Finding, Plan, Step
from provision.plan.origins import origin_findings
from provision.plan.steps import noop
from provision.spec.models import Spec
from provision.spec.rules import check_spec, resolve_flavor

KEYRING_PATH = "/usr/share/keyrings/provision-nvidia-cuda.gpg"
SOURCES_PATH = "/etc/apt/sources.list.d/provision-nvidia-cuda.sources"
PREFERENCES_PATH = "/etc/apt/preferences.d/provision-nvidia"
UNATTENDED_PATH = "/etc/apt/apt.conf.d/51provision-nvidia-unattended"
NOUVEAU_PATH = "/etc/modprobe.d/provision-blacklist-nouveau.conf"
_APT = {
    Component.DKMS,
    Component.DRIVER,
    Component.FABRIC_MANAGER,
    Component.CUDA_TOOLKIT,
    Component.CUDNN,
    Component.NCCL,
}
Built = Step | Finding | None


def make_plan(spec: Spec, facts: Facts, catalog: Catalog, spec_path: str | None = None) -> Plan:
    """Diff ``spec`` against ``facts`` into an ordered plan.

    Returns:
        A Plan whose ``blockers`` are non-empty when the spec is refused; its steps are then
        still listed, for the reader, but apply will not run.
    """
    flavor = resolve_flavor(spec, catalog)
    findings = [
        *check_spec(spec, catalog),
        *check_facts(spec, facts, catalog),
        *consistency_findings(facts),
        *fabric.fabric_findings(spec, facts, catalog),
        *flavor_findings(flavor, spec.driver.branch, facts, catalog),
        *hardware_findings(spec, facts),
        *origin_findings(spec, facts, catalog),
    ]
    if any(f.rule == "gpu-model-unknown" for f in findings):
        return _plan(spec, facts, catalog, (), findings, spec_path)
    built = _build(spec, facts, catalog, flavor)
    steps = tuple(s for s in built if isinstance(s, Step))
    findings += [f for f in built if isinstance(f, Finding)]
    return _plan(spec, facts, catalog, steps, findings, spec_path)


def _build(spec: Spec, facts: Facts, catalog: Catalog, flavor: Flavor) -> list[Step | Finding]:
    drv = driver.driver_step(spec, facts, catalog, flavor)
    changes = isinstance(drv, Step) and drv.changes
    built: list[Built] = [
        kernel.nouveau_step(facts),
        kernel.dkms_step(spec, facts, flavor, changes),
        drv,
        fabric.fabric_manager_step(spec, facts, catalog),
        *_cuda(spec, facts, catalog),
    ]
    steps = [s for s in built if isinstance(s, Step)]
    built.append(_holds(spec, facts, catalog, steps))
    if spec.python is not None:
        built += [python.venv_step(spec.python, facts), python.wheels_step(spec.python, facts)]
    built += [kernel.secure_boot_step(spec, facts, changes), *_reboot(facts, built)]
    return [_repository(spec, facts, built), *(b for b in built if b is not None)]


def _cuda(spec: Spec, facts: Facts, catalog: Catalog) -> list[Built]:
    if spec.cuda is None:
        return []
    out: list[Built] = [packages.cuda_toolkit_step(spec.cuda, facts, catalog)]
    if spec.cuda.cudnn is not None:
        out.append(packages.cudnn_step(spec.cuda, facts, catalog))
    if spec.cuda.nccl is not None:
        out.append(packages.nccl_step(spec.cuda, facts, catalog))
    return out


def _reboot(facts: Facts, built: list[Built]) -> list[Step]:
    """One reboot step: for a new module, nouveau's blacklist, a fabric manager change, or one pending."""
    causes = [
        s
        for s in built
        if isinstance(s, Step)
        and s.changes
        and s.component in (Component.DRIVER, Component.KERNEL_MODULES, Component.FABRIC_MANAGER)
    ]
    if causes:
        names = ", ".join(s.component.value for s in causes)
        return [
            Step(
                component=Component.REBOOT,
                action=Action.REBOOT,
                target=causes[0].target,
                reason=f"reboot to load the changed kernel side ({names})"
                + (
                    "; the fabric manager change also needs the GPUs reset (NVIDIA/nccl#1488)"
                    if any(s.component is Component.FABRIC_MANAGER for s in causes)
                    else ""
                ),
            )
        ]
    pending = reboot_pending(facts)
    return [pending] if pending else []


def _holds(spec: Spec, facts: Facts, catalog: Catalog, steps: list[Step]) -> Step:
    if not spec.driver.hold:
        return noop(Component.HOLDS, reason="driver.hold is false: packages are not held")
    guard = locks.unattended_guard_text(catalog.packages.stack_patterns)
    return packages.holds_step(facts, catalog, _apt_packages(steps), guard)


def _apt_packages(steps: list[Step] | tuple[Step, ...]) -> tuple[str, ...]:
    return tuple(p for s in steps if s.component in _APT and s.changes for p in s.packages)


def _repository(spec: Spec, facts: Facts, built: list[Built]) -> Step:
    steps = [s for s in built if isinstance(s, Step)]
    if _apt_packages(steps):
        return Step(
            component=Component.REPOSITORY,
            action=Action.CONFIGURE,
            target=SOURCES_PATH,
            tags=("repository",),
            reason=f"NVIDIA CUDA repository for {spec.os.repo_code}, Signed-By "
            "a keyring with a pinned fingerprint (deb822), and apt pins for the spec's versions",
        )
    drift = _pins_drift(spec, facts)
    if drift:
        return Step(
            component=Component.REPOSITORY,
            action=Action.CONFIGURE,
            target=PREFERENCES_PATH,
            tags=("repository",),
            reason=drift,
        )
    return noop(
        Component.REPOSITORY,
        reason="no package to install from NVIDIA's repository; apt pins in place"
        if spec.driver.hold
        else "no package to install from NVIDIA's repository",
    )


def _pins_drift(spec: Spec, facts: Facts) -> str | None:
    """Why the apt pins must be rewritten (held stack only), or None."""
    if not spec.driver.hold or isinstance(facts.apt_locks, Unknown):
        return None
    wanted = locks.preferences_text(locks.apt_pins(spec))
    if facts.apt_locks.preferences == wanted:
        return None
    state = "missing" if facts.apt_locks.preferences is None else "drifted from the spec"
    return f"apt pins {PREFERENCES_PATH} {state}; rewrite them so apt cannot move the stack"


def _plan(
    spec: Spec,
    facts: Facts,
    catalog: Catalog,
    steps: tuple[Step, ...],
    findings: list[Finding],
    spec_path: str | None,
) -> Plan:
    return Plan(
        spec=spec,
        spec_path=spec_path,
        host=facts.host,
        facts_fingerprint=facts.fingerprint(),
        steps=steps,
        blockers=tuple(f for f in findings if f.severity == "blocker"),
        warnings=tuple(f for f in findings if f.severity == "warning"),
        reboot_required=any(s.action is Action.REBOOT for s in steps),
        extravars=extravars(spec, catalog, steps),
    )


def extravars(spec: Spec, catalog: Catalog, steps: tuple[Step, ...]) -> dict[str, Any]:
    """Variables for the playbooks, derived from the changing steps only."""
    changing = {s.component for s in steps if s.changes}
    return {
        "provision_repository": _repo_vars(spec, catalog) if Component.REPOSITORY in changing else None,
        "provision_apt_packages": list(_apt_packages(steps)),
        "provision_apt_forbidden_regex": hold_regex(forbidden_packages(spec, steps)),
        "provision_apt_removable_regex": hold_regex(removable_packages(spec, steps)),
        "provision_hold": spec.driver.hold,
        "provision_hold_regex": hold_regex(catalog.packages.stack_patterns),
        "provision_unattended_guard": locks.unattended_guard_text(catalog.packages.stack_patterns),
        "provision_unattended_file": UNATTENDED_PATH,
        "provision_dkms": Component.DKMS in changing or (Component.DRIVER in changing and _dkms_known(steps)),
        "provision_nouveau_blacklist": NOUVEAU_PATH if Component.KERNEL_MODULES in changing else None,
        "provision_python": python.python_extravars(spec.python, catalog) if spec.python else None,
    }


def _dkms_known(steps: tuple[Step, ...]) -> bool:
    return any(s.component is Component.DKMS for s in steps)


def forbidden_packages(spec: Spec, steps: tuple[Step, ...]) -> tuple[str, ...]:
    """Packages the simulated transaction must not install (FF-08): the driver-pulling CUDA metas
    always, the other flavour's metas, and any driver package when the driver is preinstalled."""
    metas = ("cuda", "cuda-[0-9]*-[0-9]*", "cuda-drivers*")
    if spec.driver.source == "preinstalled":
        return (
            *metas,
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
    return (*metas, "nvidia-driver") if open_flavor else ("cuda", "cuda-[0-9]*-[0-9]*", "nvidia-open*")


def removable_packages(spec: Spec, steps: tuple[Step, ...]) -> tuple[str, ...]:
    """Packages the transaction may remove: the driver's own family, and only when the plan changes
    the driver from NVIDIA's repository (a flavour switch or an upgrade replaces its packages).
    Anything else removed refuses the transaction (FF-08)."""
    driver_changes = any(s.component is Component.DRIVER and s.changes for s in steps)
    if spec.driver.source != "nvidia-repo" or not driver_changes:
        return ()
    return ("nvidia-*", "libnvidia-*", "cuda-drivers*", "xserver-xorg-video-nvidia-*")


def hold_regex(patterns: tuple[str, ...]) -> str:
    """One regular expression, unanchored, matching package names against fnmatch ``patterns``."""
    parts = [re.escape(p).replace(r"\*", "[^\\s=]*").replace(r"\[0\-9\]", "[0-9]") for p in patterns]
    return "(?:" + "|".join(parts) + ")" if parts else "(?!)"


def _repo_vars(spec: Spec, catalog: Catalog) -> dict[str, Any]:
    override = spec.repository
    repo = catalog.repository(spec.os.repo_code, arch=spec.os.architecture)
    return {
        "url": str(override.url) if override else (repo.url if repo else ""),
        "key_url": str(override.key_url) if override else (repo.key_url if repo else ""),
        "fingerprint": override.fingerprint if override else (repo.fingerprint if repo else ""),
        "keyring": KEYRING_PATH,
        "sources_file": SOURCES_PATH,
        "preferences_file": PREFERENCES_PATH,
        "preferences": locks.preferences_text(locks.apt_pins(spec)),
    }
