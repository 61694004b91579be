"""Verify every host of a fleet: inputs gathered in one Ansible play, each host checked against its spec.

The checks are the pure :func:`provision.verify.workflow.evaluate` of a local run; only the
collection differs (:mod:`provision.verify.remote`). A host Ansible could not reach gets every
check failed with Ansible's reason, so it can never pass by having nothing measured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from provision.catalog import Catalog, load_catalog
from provision.detect.facts import Unknown
from provision.detect.runner import unknown_facts
from provision.fleet.mapping import Fleet
from provision.fleet.orchestrate import NO_RESULT, load_specs
from provision.spec.models import Spec
from provision.verify.limits import Limits, shipped_limits
from provision.verify.models import CheckResult, Report
from provision.verify.remote import REMOTE_ALLREDUCE, HostJob, verify_remote
from provision.verify.runs import VerifyInputs
from provision.verify.workflow import evaluate

UNREACHABLE_HINT = "Reach the host over ssh (ansible HOST -m ping -i INVENTORY), then run verify again."


@dataclass(frozen=True)
class HostVerify:
    """One host's verify report, and Ansible's reason when the host could not be read.

    Attributes:
        host: The inventory hostname.
        spec_path: The spec the host was held to.
        report: Every check's result (all failed with the reason when unreachable).
        unreachable: ``host unreachable: ...`` or ``host failed at ...``; None when it was read.
    """

    host: str
    spec_path: Path
    report: Report
    unreachable: str | None = None

    @property
    def failed(self) -> bool:
        return self.report.failed


@dataclass(frozen=True)
class FleetVerify:
    """Every host's verify, in inventory order."""

    hosts: dict[str, HostVerify]

    @property
    def failed(self) -> list[str]:
        """Hosts with at least one failed check (unreachable ones included)."""
        return [h for h, v in self.hosts.items() if v.failed]

    def exit_code(self) -> int:
        """1 when any host has a failed check, else 0."""
        return 1 if self.failed else 0


def job_for(spec: Spec) -> HostJob:
    """What the play runs on a host held to ``spec``."""
    return HostJob(
        venv=spec.python.venv if spec.python else None,
        load_seconds=spec.verify.load_seconds,
        gpu_count=spec.gpus.count,
    )


def verify_fleet(
    fleet: Fleet,
    forks: int | None = None,
    *,
    catalog: Catalog | None = None,
    limits: Limits | None = None,
    save_raw: Path | None = None,
) -> FleetVerify:
    """Gather every host's inputs in one play, then check each against its own spec.

    Args:
        fleet: The hosts and the spec of each.
        forks: Hosts Ansible works on at once (None: Ansible's default).
        catalog: The catalog (default: the shipped one).
        limits: Verify thresholds (default: the shipped ``verify.yaml``).
        save_raw: If given, each reachable host's inputs go to ``save_raw/<host>/inputs.json``.
    """
    specs = load_specs(fleet)
    started, t0 = datetime.now(UTC), time.monotonic()
    gathered = verify_remote(
        str(fleet.inventory), {h: job_for(specs[p]) for h, p in fleet.specs.items()}, forks
    )
    seconds = time.monotonic() - t0
    cat, lim = catalog or load_catalog(), limits or shipped_limits()
    hosts: dict[str, HostVerify] = {}
    for host, path in fleet.specs.items():
        got = gathered.get(host, NO_RESULT)
        if save_raw is not None and isinstance(got, VerifyInputs):
            _save(save_raw / host, got)
        results = check_host(host, specs[path], got, cat, lim)
        report = Report(host=host, spec=str(path), started_at=started, seconds=seconds, results=results)
        hosts[host] = HostVerify(host, path, report, got if isinstance(got, str) else None)
    return FleetVerify(hosts)


def _save(directory: Path, inputs: VerifyInputs) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "inputs.json").write_text(inputs.model_dump_json(indent=2), encoding="utf-8")


def check_host(
    host: str, spec: Spec, gathered: VerifyInputs | str, catalog: Catalog, limits: Limits
) -> tuple[CheckResult, ...]:
    """The host's check results: evaluated inputs, or every check failed with the reason (pure)."""
    if isinstance(gathered, str):
        return unreachable_results(host, spec, gathered, catalog, limits)
    return skip_remote_allreduce(evaluate(spec, gathered, catalog, limits))


def unreachable_results(
    host: str, spec: Spec, reason: str, catalog: Catalog, limits: Limits
) -> tuple[CheckResult, ...]:
    """Every check the spec would run on an unreadable host, each failed with ``reason``."""
    why = Unknown(unknown=reason)
    inputs = VerifyInputs(facts=unknown_facts(host, reason), fm_version=why, fabric=why, gpu_run=why)
    return tuple(
        r.model_copy(
            update={
                "status": "fail",
                "measured": None,
                "threshold": None,
                "detail": reason,
                "hint": UNREACHABLE_HINT,
            }
        )
        for r in evaluate(spec, inputs, catalog, limits)
    )


def skip_remote_allreduce(results: tuple[CheckResult, ...]) -> tuple[CheckResult, ...]:
    """The all-reduce check as a skip where it failed only because it is not run remotely."""
    return tuple(
        r.model_copy(update={"status": "skip", "hint": None})
        if r.id == "nccl-allreduce" and r.detail == REMOTE_ALLREDUCE
        else r
        for r in results
    )
