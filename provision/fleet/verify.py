"""Verify every host of a fleet, each against its own spec, through :mod:`provision.verify.hosts`.

The hosts' inputs are gathered in one Ansible play and checked with the pure
:func:`provision.verify.workflow.evaluate` of a local run; this machine goes through the same
:func:`provision.verify.hosts.verify_hosts`.
"""

from __future__ import annotations

from pathlib import Path

from provision.catalog import Catalog
from provision.fleet.mapping import Fleet
from provision.fleet.orchestrate import held_hosts
from provision.verify.hosts import (
    UNREACHABLE_HINT,
    FleetVerify,
    HostVerify,
    check_host,
    job_for,
    skip_remote_allreduce,
    unreachable_results,
    verify_hosts,
)
from provision.verify.limits import Limits
from provision.verify.models import CheckResult, Report

__all__ = [
    "UNREACHABLE_HINT",
    "FleetVerify",
    "HostVerify",
    "check_host",
    "job_for",
    "skip_remote_allreduce",
    "spec_not_loaded",
    "unreachable_results",
    "verify_fleet",
]


def verify_fleet(
    fleet: Fleet,
    forks: int | None = None,
    *,
    catalog: Catalog | None = None,
    limits: Limits | None = None,
    save_raw: Path | None = None,
    runs_dir: Path | None = None,
) -> FleetVerify:
    """Gather every host's inputs in one play, then check each against its own spec; a host whose own
    spec cannot be loaded is failed with the reason (:func:`spec_not_loaded`), the others verified.

    Args:
        fleet: The hosts and the spec of each.
        forks: Hosts Ansible works on at once (None: Ansible's default).
        catalog: The catalog (default: the shipped one).
        limits: Verify thresholds (default: the shipped ``verify.yaml``).
        save_raw: If given, each reachable host's inputs go to ``save_raw/<host>/inputs.json``.
        runs_dir: Where the support bundles of hosts that fail a check go (None: none are written).

    Raises:
        SpecError: Every host is held to one spec, and it cannot be loaded.
    """
    hosts, failed = held_hosts(fleet)
    verified = (
        verify_hosts(hosts, forks, catalog=catalog, limits=limits, save_raw=save_raw, runs_dir=runs_dir).hosts
        if hosts.specs
        else {}
    )
    every = {
        h: verified[h] if h in verified else spec_not_loaded(h, p, failed[h]) for h, p in fleet.specs.items()
    }
    return FleetVerify(every)


def spec_not_loaded(host: str, spec_path: Path, reason: str) -> HostVerify:
    """A host whose spec could not be loaded: not read, one failed ``spec`` result with the reason."""
    result = CheckResult(
        id="spec",
        title="The host's spec loads",
        status="fail",
        detail=reason,
        hint=f"Fix the spec (`provision validate {spec_path}` lists its problems), then run verify again.",
    )
    return HostVerify(host, spec_path, Report(host=host, spec=str(spec_path), results=(result,)), reason)
