"""Verify every host of a fleet, each against its own spec, through :mod:`provision.verify.hosts`.

The hosts' inputs are gathered in one Ansible play and checked with the pure
:func:`provision.verify.workflow.evaluate` of a local run; this machine goes through the same
:func:`provision.verify.hosts.verify_hosts`.
"""

from __future__ import annotations

from pathlib import Path

from provision.catalog import Catalog
from provision.fleet.mapping import Fleet
from provision.fleet.orchestrate import fleet_hosts
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

__all__ = [
    "UNREACHABLE_HINT",
    "FleetVerify",
    "HostVerify",
    "check_host",
    "job_for",
    "skip_remote_allreduce",
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
    """Gather every host's inputs in one play, then check each against its own spec.

    Args:
        fleet: The hosts and the spec of each.
        forks: Hosts Ansible works on at once (None: Ansible's default).
        catalog: The catalog (default: the shipped one).
        limits: Verify thresholds (default: the shipped ``verify.yaml``).
        save_raw: If given, each reachable host's inputs go to ``save_raw/<host>/inputs.json``.
        runs_dir: Where the support bundles of hosts that fail a check go (None: none are written).
    """
    return verify_hosts(
        fleet_hosts(fleet), forks, catalog=catalog, limits=limits, save_raw=save_raw, runs_dir=runs_dir
    )
