"""Builders for planner tests: a fresh Ubuntu box's facts, packages, specs with overrides."""

from __future__ import annotations

from pathlib import Path

from provision.catalog import load_catalog
from provision.detect.facts import CudaToolkits, Facts, Kernel, OsRelease, Package, Unknown
from provision.detect.system import AptLocks
from provision.plan import locks
from provision.plan.models import Component, Plan, Step
from provision.spec.loader import load_spec
from provision.spec.models import Spec

ROOT = Path(__file__).resolve().parents[2]
H200_RAW = ROOT / "tests" / "fixtures" / "detect" / "h200-ubuntu2404"
CATALOG = load_catalog()


def fresh_ubuntu(**changes: object) -> Facts:
    """A fresh Ubuntu 24.04 box: no NVIDIA driver, no NVIDIA packages, no venv."""
    base = Facts(
        host="box",
        os=OsRelease(id="ubuntu", version_id="24.04", codename="noble"),
        kernel=Kernel(release="6.8.0-60-generic", machine="x86_64"),
        driver=Unknown(unknown="NVIDIA kernel module not loaded"),
        gpus=Unknown(unknown="nvidia-smi: not found"),
        topology=Unknown(unknown="nvidia-smi: not found"),
        packages=(),
        cuda=CudaToolkits(),
        torch=Unknown(unknown="no venv"),
        venv=Unknown(unknown="no venv"),
    )
    return base.model_copy(update=changes)


def pkg(name: str, version: str, status: str = "install ok installed") -> Package:
    return Package(name=name, version=version, status=status)


def locked(s: Spec) -> AptLocks:
    """provision's pins and unattended-upgrades guard, as apply writes them."""
    return AptLocks(
        preferences=locks.preferences_text(locks.apt_pins(s)),
        unattended_guard=locks.unattended_guard_text(CATALOG.packages.stack_patterns),
    )


def spec(**changes: object) -> Spec:
    base = load_spec(ROOT / "specs" / "dual-a100x.yaml")
    data = base.model_dump(mode="json")
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("__")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return Spec.model_validate(data)


def step(plan: Plan, component: Component) -> Step:
    return next(s for s in plan.steps if s.component is component)
