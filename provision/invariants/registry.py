"""Every invariant, in the order plan and verify report them (from firmware up to the venv)."""

from __future__ import annotations

from provision.catalog import Catalog
from provision.detect.facts import Facts
from provision.invariants.attached import GpuAttached
from provision.invariants.base import Invariant, Verdict
from provision.invariants.binding import BootEffect, GpuBound
from provision.invariants.compat import ForwardCompatSupported
from provision.invariants.cuda_world import OneCudaWorld
from provision.invariants.gsp import GspFirmwareMatches
from provision.invariants.hardware import Bar1MapsMemory, GpuMemory
from provision.invariants.health import ClocksNotHeldDown, EccOn, GpuMemoryHealthy, MigAsSpecified
from provision.invariants.kernels import ModuleForEveryKernel
from provision.invariants.loaded import DriverLoaded, FabricRegistered
from provision.invariants.toolkit import ToolkitFirst
from provision.spec.models import Spec

INVARIANTS: tuple[Invariant, ...] = (
    Bar1MapsMemory(),
    GpuBound(),
    BootEffect(),
    GpuMemory(),
    MigAsSpecified(),
    EccOn(),
    GpuMemoryHealthy(),
    ClocksNotHeldDown(),
    DriverLoaded(),
    ModuleForEveryKernel(),
    GpuAttached(),
    FabricRegistered(),
    GspFirmwareMatches(),
    ForwardCompatSupported(),
    ToolkitFirst(),
    OneCudaWorld(),
)


def judge_all(spec: Spec, facts: Facts, catalog: Catalog) -> tuple[Verdict, ...]:
    """Every invariant's verdict for this machine, in :data:`INVARIANTS` order."""
    return tuple(i.judge(spec, facts, catalog) for i in INVARIANTS)


def by_id(invariant_id: str) -> Invariant:
    """The invariant with this id (KeyError for an unknown id)."""
    return {i.id: i for i in INVARIANTS}[invariant_id]
