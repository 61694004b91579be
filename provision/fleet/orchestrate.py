"""Detect and plan the hosts of a fleet, each against its own spec, through :mod:`provision.hosts`."""

from __future__ import annotations

from pathlib import Path

from provision.catalog import Catalog
from provision.detect.facts import Facts, Unknown
from provision.errors import SpecError
from provision.fleet.mapping import Fleet
from provision.hosts import (
    NO_RESULT,
    SPEC_FAILED,
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
    "held_hosts",
    "plan_fleet",
    "planned_fleet",
    "unreachable_reason",
]


def detect_fleet(fleet: Fleet) -> tuple[dict[str, Facts], dict[str, str]]:
    """Facts of every host of the fleet (inventory order), the torch probe reading each host's own
    spec's venv; and host -> why its own spec could not be loaded (:func:`held_hosts`). Such a host is
    detected all the same, without the venv probes: its ``torch`` and ``venv`` are Unknown with that
    reason (``spec not loaded: FILE:LINE:COLUMN: ...``) unless it could not be detected at all.

    Raises:
        SpecError: Every host is held to one spec, and it cannot be loaded: the command's error.
        FactsError: ansible-playbook failed before any host reported, or a saved host directory
            cannot be read.
    """
    hosts, failed = held_hosts(fleet)
    found = detect_by_venv(hosts, without_spec=failed)
    ordered = {h: found[h] for h in fleet.specs if h in found} | found
    return {h: _spec_not_loaded(f, failed.get(h)) for h, f in ordered.items()}, failed


def _spec_not_loaded(facts: Facts, reason: str | None) -> Facts:
    """``facts`` of a detected host whose spec did not load (``reason``): torch and venv not read, for it."""
    if reason is None or unreachable_reason(facts) is not None:
        return facts
    return facts.model_copy(update={"torch": Unknown(unknown=reason), "venv": Unknown(unknown=reason)})


def plan_fleet(fleet: Fleet, catalog: Catalog | None = None) -> FleetPlan:
    """Detect the fleet and plan each host against its spec (:func:`planned_fleet`)."""
    return planned_fleet(fleet, catalog)[1]


def planned_fleet(fleet: Fleet, catalog: Catalog | None = None) -> tuple[Hosts, FleetPlan]:
    """The hosts whose spec loads, and the fleet plan: each of them detected and planned, and each
    host whose own spec is missing or invalid failed with the reason (:func:`held_hosts`), the others
    planned all the same; inventory order.

    Raises:
        SpecError: Every host is held to one spec, and it cannot be loaded: the command's error.
    """
    hosts, failed = held_hosts(fleet)
    planned = plan_hosts(hosts, None, catalog).hosts
    every = {
        h: planned[h] if h in planned else HostPlan(h, p, None, failed[h]) for h, p in fleet.specs.items()
    }
    return hosts, FleetPlan(every)


def held_hosts(fleet: Fleet) -> tuple[Hosts, dict[str, str]]:
    """The hosts whose own spec loads (each spec file loaded once), and host -> why its spec could not
    be loaded (``spec not loaded: FILE:LINE:COLUMN: ...``, :data:`SPEC_FAILED`) for the others: a
    fleet command fails those hosts alone.

    Raises:
        SpecError: Every host is held to one spec, and it cannot be loaded: the command's error.
    """
    loaded = {path: _try_load(path) for path in dict.fromkeys(fleet.specs.values())}
    if len(loaded) == 1 and isinstance(error := next(iter(loaded.values())), SpecError):
        raise error
    good = {h: HostSpec(s, str(p)) for h, p in fleet.specs.items() if isinstance(s := loaded[p], Spec)}
    failed = {h: _spec_failure(loaded[p]) for h, p in fleet.specs.items() if h not in good}
    return Hosts(fleet.inventory, good, fleet.forks, fleet.from_raw, fleet.save_raw), failed


def _try_load(path: Path) -> Spec | SpecError:
    try:
        return load_spec(path)
    except SpecError as exc:
        return exc


def _spec_failure(error: Spec | SpecError) -> str:
    """The one-line reason of a host whose spec could not be loaded: the first problem, and how many more."""
    problems = error.problems if isinstance(error, SpecError) else []
    more = f" (and {len(problems) - 1} more; `provision validate` lists them)" if len(problems) > 1 else ""
    return f"{SPEC_FAILED}{problems[0] if problems else error}{more}"
