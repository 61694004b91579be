"""Detect and plan every host of a fleet: one Ansible detection run per distinct venv, one plan per host."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from provision.catalog import Catalog, load_catalog
from provision.detect.facts import Facts, Unknown
from provision.fleet.mapping import Fleet
from provision.plan.models import Plan
from provision.plan.planner import make_plan
from provision.spec.loader import load_spec
from provision.spec.models import Spec

NO_RESULT = "host unreachable: Ansible reported nothing for it"


class HostState(StrEnum):
    """Where one host stands after planning, as the summary table counts it."""

    UNCHANGED = "unchanged"
    CHANGE = "to change"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class HostPlan:
    """One host's plan, or why there is none.

    Attributes:
        host: The inventory hostname.
        spec_path: The spec planned for it.
        plan: The plan; None when the host could not be detected.
        unreachable: Ansible's reason when the host could not be detected, else None.
    """

    host: str
    spec_path: Path
    plan: Plan | None
    unreachable: str | None = None

    @property
    def state(self) -> HostState:
        if self.plan is None:
            return HostState.UNREACHABLE
        if self.plan.refused:
            return HostState.REFUSED
        return HostState.CHANGE if self.plan.changes else HostState.UNCHANGED


@dataclass(frozen=True)
class FleetPlan:
    """Every host's plan, in inventory order."""

    hosts: dict[str, HostPlan]

    def with_state(self, state: HostState) -> list[str]:
        """Hosts in ``state``, in inventory order."""
        return [h for h, p in self.hosts.items() if p.state is state]

    @property
    def pending(self) -> dict[str, Plan]:
        """Plans of the hosts that have changes and no blocker: what apply runs."""
        return {h: p.plan for h, p in self.hosts.items() if p.plan and p.state is HostState.CHANGE}

    def exit_code(self, detailed: bool = False) -> int:
        """1 if a host is refused or unreachable; else 2 when ``detailed`` and changes are pending; else 0."""
        if self.with_state(HostState.REFUSED) or self.with_state(HostState.UNREACHABLE):
            return 1
        return 2 if detailed and self.pending else 0


def load_specs(fleet: Fleet) -> dict[Path, Spec]:
    """Each distinct spec of the fleet, loaded once.

    Raises:
        SpecError: A spec file is missing or invalid.
    """
    return {path: load_spec(path) for path in dict.fromkeys(fleet.specs.values())}


def detect_fleet(
    fleet: Fleet, specs: dict[Path, Spec], hosts: Iterable[str] | None = None
) -> dict[str, Facts]:
    """Facts of ``hosts`` (default: all of the fleet), gathered through Ansible.

    Hosts whose specs share a venv are detected in one ansible-runner run (Ansible's
    forks run them concurrently); the torch probe takes the venv as its argument, so
    each distinct venv is one run. Most fleets have one.
    """
    from provision.detect.runner import detect_remote

    facts: dict[str, Facts] = {}
    for venv, group in _by_venv(fleet, specs, hosts).items():
        facts |= detect_remote(str(fleet.inventory), ",".join(group), venv)
    return facts


def _by_venv(
    fleet: Fleet, specs: dict[Path, Spec], hosts: Iterable[str] | None
) -> dict[str | None, list[str]]:
    groups: dict[str | None, list[str]] = {}
    for host in fleet.hosts if hosts is None else hosts:
        spec = specs[fleet.specs[host]]
        groups.setdefault(spec.python.venv if spec.python else None, []).append(host)
    return groups


def unreachable_reason(facts: Facts | None) -> str | None:
    """Why a host could not be detected, or None when it was.

    :func:`provision.detect.runner.unknown_facts` marks such a host with every fact
    Unknown for Ansible's one reason (``host unreachable: ...``, ``host failed at ...``).
    """
    if facts is None:
        return NO_RESULT
    os_fact, kernel = facts.os, facts.kernel
    if isinstance(os_fact, Unknown) and isinstance(kernel, Unknown) and os_fact.unknown == kernel.unknown:
        return os_fact.unknown if os_fact.unknown.startswith("host ") else None
    return None


def plan_fleet(fleet: Fleet, catalog: Catalog | None = None, hosts: Iterable[str] | None = None) -> FleetPlan:
    """Detect ``hosts`` (default: the whole fleet) and plan each against its spec."""
    cat = catalog or load_catalog()
    specs = load_specs(fleet)
    chosen = list(fleet.hosts if hosts is None else hosts)
    facts = detect_fleet(fleet, specs, chosen)
    return FleetPlan({h: _host_plan(h, fleet.specs[h], specs, facts.get(h), cat) for h in chosen})


def _host_plan(host: str, path: Path, specs: dict[Path, Spec], facts: Facts | None, cat: Catalog) -> HostPlan:
    reason = unreachable_reason(facts)
    if reason is not None or facts is None:
        return HostPlan(host, path, None, reason or NO_RESULT)
    return HostPlan(host, path, make_plan(specs[path], facts, cat, spec_path=str(path)))
