"""The support bundles of a failed verify: what verify read and judged on each failed host, handed to
:func:`provision.support.write_bundles` (the archive and its members are described there)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from provision.ansible import local_inventory, new_run_dir
from provision.catalog import Catalog
from provision.hosts import Hosts, plan_host
from provision.support import Evidence, write_bundles
from provision.verify.models import Report
from provision.verify.remote import agent_answer_path
from provision.verify.runs import VerifyInputs


def evidence(
    host: str, hosts: Hosts, report: Report, inputs: VerifyInputs, catalog: Catalog, kept: Path
) -> Evidence:
    """``verify.json`` (every check), ``facts.json`` and ``plan.json`` (the spec planned against the
    facts verify read: what apply would still change there), the raw outputs verify read, and
    ``verify-agent.json`` where the verify agent read the host (its trust, host probe and GPU
    program steps: exit status and output)."""
    planned = plan_host(host, hosts.specs[host], inputs.facts, catalog).plan
    documents = {
        "verify.json": report.model_dump_json(indent=2),
        "facts.json": inputs.facts.model_dump_json(indent=2),
    }
    if planned is not None:
        documents["plan.json"] = planned.model_dump_json(indent=2)
    agent = agent_answer_path(kept, host)
    if agent.is_file():  # read over the direct transport: its steps, as a play's events would be
        documents["verify-agent.json"] = agent.read_text(encoding="utf-8")
    return Evidence(documents, hosts.raw_of(kept / "raw", host))


def write_verify_bundles(
    hosts: Hosts,
    reports: Mapping[str, Report],
    read: Mapping[str, VerifyInputs],
    catalog: Catalog,
    kept: Path,
    runs_dir: Path,
) -> dict[str, Path]:
    """One bundle per host that was read and failed a check, in a new run directory under ``runs_dir``
    (``<UTC time>-verify``); host -> path. Nothing is written when no read host failed.

    ``kept``: where the collection kept the raw outputs (``kept/raw``) and the play (``kept/ansible``).
    """
    failed = [h for h, r in reports.items() if r.failed and h in read]
    if not failed:
        return {}
    run_dir = new_run_dir(runs_dir, "verify")
    inventory = hosts.inventory or local_inventory(run_dir)
    found = {h: evidence(h, hosts, reports[h], read[h], catalog, kept) for h in failed}
    events = kept / "ansible" if hosts.inventory is not None else None
    return write_bundles(run_dir, inventory, found, events)
