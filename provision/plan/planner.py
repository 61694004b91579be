"""make_plan: the pure function from (spec, facts, catalog) to a Plan.

Nothing here runs a command or reads a file; the same inputs give the same
plan. Order of steps: repository, driver, fabric manager, CUDA toolkit, cuDNN,
NCCL, holds, Python venv, wheels, reboot.
"""

from __future__ import annotations

import re
from typing import Any

from provision.catalog import Catalog
from provision.detect.facts import Facts
from provision.plan import driver, packages, python
from provision.plan.checks import check_facts
from provision.plan.models import Action, Component, Finding, Plan, Step
from provision.plan.steps import noop, version_glob
from provision.spec.models import Spec
from provision.spec.rules import check_spec, resolve_flavor

KEYRING_PATH = "/usr/share/keyrings/provision-nvidia-cuda.gpg"
SOURCES_PATH = "/etc/apt/sources.list.d/provision-nvidia-cuda.sources"
PREFERENCES_PATH = "/etc/apt/preferences.d/provision-nvidia"
_APT = {Component.DRIVER, Component.FABRIC_MANAGER, Component.CUDA_TOOLKIT, Component.CUDNN, Component.NCCL}


def make_plan(spec: Spec, facts: Facts, catalog: Catalog, spec_path: str | None = None) -> Plan:
    """Diff ``spec`` against ``facts`` into an ordered plan.

    Returns:
        A Plan whose ``blockers`` are non-empty when the spec is refused; its steps
        are then still listed, for the reader, but apply will not run.
    """
    findings = [*check_spec(spec, catalog), *check_facts(spec, facts, catalog)]
    if any(f.rule == "gpu-model-unknown" for f in findings):
        return _plan(spec, facts, catalog, (), findings, spec_path)
    steps, more = _steps(spec, facts, catalog)
    return _plan(spec, facts, catalog, steps, findings + more, spec_path)


def _steps(spec: Spec, facts: Facts, catalog: Catalog) -> tuple[tuple[Step, ...], list[Finding]]:
    built: list[Step | Finding] = []
    drv = driver.driver_step(spec, facts, catalog, resolve_flavor(spec, catalog))
    built += [drv, driver.fabric_manager_step(spec, facts, catalog)]
    if spec.cuda is not None:
        built.append(packages.cuda_toolkit_step(spec.cuda, facts, catalog))
        if spec.cuda.cudnn is not None:
            built.append(packages.cudnn_step(spec.cuda, facts, catalog))
        if spec.cuda.nccl is not None:
            built.append(packages.nccl_step(spec.cuda, facts, catalog))
    steps = [s for s in built if isinstance(s, Step)]
    steps.append(_holds(spec, facts, catalog, steps))
    if spec.python is not None:
        built += [python.venv_step(spec.python, facts), python.wheels_step(spec.python, facts)]
        steps += [s for s in built[-2:] if isinstance(s, Step)]
    reboot = driver.reboot_step(spec, facts, drv)
    steps = [_repository(spec, steps), *steps, *([reboot] if reboot else [])]
    return tuple(steps), [f for f in built if isinstance(f, Finding)]


def _holds(spec: Spec, facts: Facts, catalog: Catalog, steps: list[Step]) -> Step:
    if not spec.driver.hold:
        return noop(Component.HOLDS, reason="driver.hold is false: packages are not held")
    return packages.holds_step(facts, catalog, _apt_packages(steps))


def _apt_packages(steps: list[Step]) -> tuple[str, ...]:
    return tuple(p for s in steps if s.component in _APT and s.changes for p in s.packages)


def _repository(spec: Spec, steps: list[Step]) -> Step:
    if not _apt_packages(steps):
        return noop(Component.REPOSITORY, reason="no package to install from NVIDIA's repository")
    return Step(
        component=Component.REPOSITORY,
        action=Action.CONFIGURE,
        target=SOURCES_PATH,
        tags=("repository",),
        reason=f"NVIDIA CUDA repository for {spec.os.repo_code}, Signed-By a keyring with a pinned "
        "fingerprint (deb822)",
    )


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
    listed = list(steps)
    out: dict[str, Any] = {
        "provision_repository": _repo_vars(spec, catalog) if _apt_packages(listed) else None,
        "provision_apt_packages": list(_apt_packages(listed)),
        "provision_hold": spec.driver.hold,
        "provision_hold_regex": hold_regex(catalog.packages.stack_patterns),
        "provision_python": python.python_extravars(spec.python, catalog) if spec.python else None,
    }
    return out


def hold_regex(patterns: tuple[str, ...]) -> str:
    """One regular expression, unanchored, matching package names against fnmatch ``patterns``."""
    return "(?:" + "|".join(re.escape(p).replace(r"\*", "[^\t]*") for p in patterns) + ")"


def _repo_vars(spec: Spec, catalog: Catalog) -> dict[str, Any]:
    override = spec.repository
    repo = catalog.repository(spec.os.repo_code, arch=spec.os.architecture)
    url = str(override.url) if override else (repo.url if repo else "")
    return {
        "pins": _apt_pins(spec),
        "url": url,
        "key_url": str(override.key_url) if override else (repo.key_url if repo else ""),
        "fingerprint": override.fingerprint if override else (repo.fingerprint if repo else ""),
        "keyring": KEYRING_PATH,
        "sources_file": SOURCES_PATH,
        "preferences_file": PREFERENCES_PATH,
    }


def _apt_pins(spec: Spec) -> list[dict[str, str]]:
    """apt preferences that hold each package family to the spec's version in one transaction.

    apt resolves dependencies to the newest candidate, not to the version asked for the
    meta-package: ``nvidia-open=580.95.05-1`` alone still pulls ``nvidia-driver-open`` 590
    (the FF-02 drift, reproduced by the integration harness). Pinning the whole family at
    priority 1001 makes the closure consistent and lets apt move back to it.
    """
    driver = f"{spec.driver.version}-*" if spec.driver.version else f"{spec.driver.branch}.*"
    pins = [
        {
            "packages": "nvidia-* libnvidia-* xserver-xorg-video-nvidia-*",
            "version": driver,
            "why": f"NVIDIA driver, utilities and fabric manager at {driver}",
        }
    ]
    if spec.cuda is not None and spec.cuda.cudnn is not None:
        pins.append(
            {
                "packages": "libcudnn9* cudnn9*",
                "version": version_glob(spec.cuda.cudnn),
                "why": f"cuDNN {spec.cuda.cudnn}",
            }
        )
    if spec.cuda is not None and spec.cuda.nccl is not None:
        pins.append(
            {
                "packages": "libnccl*",
                "version": version_glob(spec.cuda.nccl, f"+cuda{spec.cuda.toolkit}"),
                "why": f"NCCL {spec.cuda.nccl} for CUDA {spec.cuda.toolkit}",
            }
        )
    return pins
