"""Detect and plan the hosts of a fleet, each against its own spec, through :mod:`provision.hosts`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from provision.catalog import Catalog
from provision.detect.facts import Facts
from provision.fleet.mapping import Fleet
from provision.hosts import (
    NO_RESULT,
    FleetPlan,
    HostPlan,
    Hosts,
    HostSpec,
    HostState,
    detect_by_venv,
    plan_hosts,
    unreachable_reason,
)
from provision.spec.loader import load_spec
from provision.spec.models import Spec

__all__ = [
    "NO_RESULT",
    "FleetPlan",
    "HostPlan",
    "HostState",
    "detect_fleet",
    "fleet_hosts",
    "load_specs",
    "plan_fleet",
    "unreachable_reason",
]


def load_specs(fleet: Fleet) -> dict[Path, Spec]:
    """Each distinct spec of the fleet, loaded once.

    Raises:
        SpecError: A spec file is missing or invalid.
    """
    return {path: load_spec(path) for path in dict.fromkeys(fleet.specs.values())}


def fleet_hosts(fleet: Fleet, specs: Mapping[Path, Spec] | None = None) -> Hosts:
    """The fleet's hosts, each with its own spec (loaded once per file)."""
    loaded = specs if specs is not None else load_specs(fleet)
    held = {h: HostSpec(loaded[p], str(p)) for h, p in fleet.specs.items()}
    return Hosts(fleet.inventory, held, fleet.forks, fleet.from_raw, fleet.save_raw)


def detect_fleet(
    fleet: Fleet, specs: Mapping[Path, Spec], hosts: Iterable[str] | None = None
) -> dict[str, Facts]:
    """Facts of ``hosts`` (default: all of the fleet), gathered through Ansible."""
    return detect_by_venv(fleet_hosts(fleet, specs), hosts)


def plan_fleet(fleet: Fleet, catalog: Catalog | None = None, hosts: Iterable[str] | None = None) -> FleetPlan:
    """Detect ``hosts`` (default: the whole fleet) and plan each against its spec."""
    return plan_hosts(fleet_hosts(fleet), hosts, catalog)
