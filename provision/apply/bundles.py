"""The support bundles of a failed apply: what the controller holds about each failed host, handed to
:func:`provision.support.write_bundles` (the archive and its members are described there)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from provision.apply.outcome import Applied
from provision.detect.facts import Facts
from provision.hosts import FleetPlan, Hosts
from provision.support import Evidence, write_bundles


def failed_hosts(applied: Applied) -> list[str]:
    """Hosts Ansible ran on that did not end matching their spec (failed, or not converged)."""
    return [o.host for o in applied.outcomes if not o.ok and o.ansible is not None]


def evidence(
    host: str, planned: FleetPlan, applied: Applied, after: Mapping[str, Facts], raw: Path
) -> Evidence:
    """``plan.json`` (what ran), ``plan-after.json`` and ``facts.json`` (the fresh detection after the
    run), and the raw outputs that detection read."""
    documents: dict[str, str] = {}
    before, again = planned.hosts.get(host), applied.again.hosts.get(host)
    if before is not None and before.plan is not None:
        documents["plan.json"] = before.plan.model_dump_json(indent=2)
    if again is not None and again.plan is not None:
        documents["plan-after.json"] = again.plan.model_dump_json(indent=2)
    if host in after:
        documents["facts.json"] = after[host].model_dump_json(indent=2)
    return Evidence(documents, raw)


def write_apply_bundles(
    hosts: Hosts, planned: FleetPlan, applied: Applied, after: Mapping[str, Facts], raw: Path
) -> dict[str, Path]:
    """One bundle per failed host in the run directory (with the run's Ansible events); host -> path.

    ``raw``: where the detection after the run kept its raw outputs (:meth:`Hosts.keeping_raw`).
    """
    run_dir = applied.result.run_dir
    found = {h: evidence(h, planned, applied, after, hosts.raw_of(raw, h)) for h in failed_hosts(applied)}
    if not found:
        return {}
    return write_bundles(run_dir, hosts.inventory or run_dir / "inventory.ini", found, run_dir)
