"""After a converged apply: record the lock on every host that converged; after verify, its result.

A host converged when Ansible finished it without failure and a fresh plan shows no changes
(apply's outcome ``converged``); only then is its state worth returning to. The lock
is built from the facts that fresh plan read (:func:`provision.lock.model.lock_document`).
Failing to record a lock does not undo the apply: the host is named with the reason.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from provision.catalog import load_catalog
from provision.detect.facts import Facts
from provision.hosts import FleetPlan, Hosts
from provision.lock.model import LOCK_FILE, lock_document, spec_digest
from provision.lock.store import record_verified, run_lock_play
from provision.spec.models import Spec
from provision.verify.models import Report


@dataclass(frozen=True)
class Recorded:
    """Per host: the number of its current lock, or why none was written."""

    numbers: dict[str, int]
    failures: dict[str, str]


def record_locks(
    hosts: Hosts, converged: list[str], again: FleetPlan, facts: Mapping[str, Facts], run_dir: Path
) -> Recorded:
    """Write a lock on each ``converged`` host (its fresh plan in ``again``, read from ``facts``).

    Returns the lock numbers and, per host, why none was written.
    """
    converged = [h for h in converged if h in facts and h in again.hosts]
    if not converged:
        return Recorded({}, {})
    catalog = load_catalog()
    args = {}
    for host in converged:
        plan = again.hosts[host].plan
        assert plan is not None  # converged means it was planned again
        held = hosts.specs[host]
        args[host] = {
            "state": "write",
            "lock": lock_document(plan, facts[host], catalog, str(run_dir)),
            **({"venv": held.venv} if held.venv else {}),
        }
    return _recorded(run_lock_play(hosts.inventory, args, run_dir), no_lock="the module returned no lock")


def _recorded(played: Mapping[str, Any], no_lock: str | None) -> Recorded:
    """Each host's lock number from the lock play's results, or its failure message.

    A result that is neither a lock nor a message fails with ``no_lock``, or is left out when it is
    None (verify: the host's lock was for another spec).
    """
    numbers, failures = {}, {}
    for host, result in played.items():
        lock = result.get("lock") if isinstance(result, dict) else None
        if isinstance(lock, dict) and isinstance(lock.get("number"), int):
            numbers[host] = lock["number"]
        elif isinstance(result, str):
            failures[host] = result
        elif no_lock is not None:
            failures[host] = no_lock
    return Recorded(numbers, failures)


def show_recorded(recorded: Recorded, console: Console) -> None:
    """One line per host: the lock recorded, or why not."""
    for host, number in recorded.numbers.items():
        console.print(f"{host}: lock {number} recorded in {LOCK_FILE} (`provision lock show`)")
    for host, why in recorded.failures.items():
        console.print(f"[red]{host}: no lock recorded:[/] {escape(why)}", soft_wrap=True)


def verify_result(report: Report, spec: Spec) -> dict[str, Any]:
    """What a lock keeps of a verify report (pure): see :class:`provision.lock.model.VerifyResult`."""
    at = report.started_at or datetime.now(UTC)
    return {
        "at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "spec_digest": spec_digest(spec),
        "passed": not report.failed,
        "counts": report.counts(),
        "failed": [r.name for r in report.results if r.status == "fail"],
    }


def record_verify(inventory: Path | None, results: Mapping[str, dict[str, Any]]) -> Recorded:
    """Record each host's verify result in its current lock (when the lock is for that spec).

    This machine's lock is root's: as another user nothing is written (a failure says so).
    """
    if inventory is None and not Path(LOCK_FILE).exists():
        return Recorded({}, {})  # no apply converged here: nothing to record in
    if inventory is None and os.geteuid() != 0:
        return Recorded({}, dict.fromkeys(results, "the lock is root's; run verify as root to record it"))
    with tempfile.TemporaryDirectory(prefix="provision-lock-") as tmp:
        played = record_verified(inventory, results, Path(tmp))
    return _recorded(played, no_lock=None)


def show_verify_recorded(recorded: Recorded, console: Console) -> None:
    """One line per host whose lock now carries the verify result, or why it could not."""
    for host, number in recorded.numbers.items():
        console.print(f"{host}: verify result recorded in lock {number}")
    for host, why in recorded.failures.items():
        console.print(f"{host}: verify result not recorded in the lock: {escape(why)}", soft_wrap=True)
