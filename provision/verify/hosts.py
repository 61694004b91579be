"""Verify any set of hosts, each against its own spec: this machine is a fleet of one.

Only the collection differs by where a host is: this machine runs the probes, the GPU loads and
the all-reduce in-process (:func:`provision.verify.workflow.collect`); inventory hosts are read
over detection's transports (:func:`provision.detect.direct.route`): one command per ``local`` or
``ssh`` host (:mod:`provision.verify.direct`), one Ansible play for the rest
(:mod:`provision.verify.remote`). The checks are the same pure
:func:`provision.verify.workflow.evaluate` for all. A host that could not be read gets every check
failed with the cause (ssh's, sudo's or Ansible's words), so it can never pass by having nothing
measured.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from provision.catalog import Catalog, load_catalog
from provision.detect import direct
from provision.detect.direct import Route
from provision.detect.domains.identity import MachineIdFact
from provision.detect.facts import Unknown
from provision.hosts import NO_RESULT, Hosts, HostSpec, detect_by_venv, local_hosts
from provision.machines import RULE, same_machines_of
from provision.output import check_output_directory
from provision.spec.models import Spec
from provision.verify.bundles import write_verify_bundles
from provision.verify.direct import verify_routed
from provision.verify.limits import Limits, shipped_limits
from provision.verify.models import CheckResult, Report
from provision.verify.remote import REMOTE_ALLREDUCE, HostJob
from provision.verify.runs import VerifyInputs
from provision.verify.workflow import collect, evaluate, save_inputs

UNREACHABLE_HINT = "Reach the host over ssh (ansible HOST -m ping -i INVENTORY), then run verify again."

Gathered = Mapping[str, VerifyInputs | str]
"""Per host: what the checks read, or why nothing could be read (``host unreachable: ...``)."""


@dataclass(frozen=True)
class HostVerify:
    """One host's verify report, and Ansible's reason when the host could not be read.

    Attributes:
        host: The inventory hostname.
        spec_path: The spec the host was held to.
        report: Every check's result (all failed with the reason when unreachable).
        unreachable: ``host unreachable: ...`` or ``host failed at ...``; None when it was read.
        bundle: The support bundle written because a check failed (:mod:`provision.support`).
        route: How the host was read (:func:`provision.detect.direct.route`): ``local``, ``ssh``
            or ``play`` with why; None for this machine without an inventory, or a replay.
    """

    host: str
    spec_path: Path
    report: Report
    unreachable: str | None = None
    bundle: Path | None = None
    route: Route | None = None

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
    """What the remote play runs on a host held to ``spec``."""
    return HostJob(
        venv=spec.python.venv if spec.python else None,
        load_seconds=spec.verify.load_seconds,
        gpu_count=spec.gpus.count,
        spec=spec,
    )


def routes_of(hosts: Hosts) -> dict[str, Route]:
    """How each inventory host is reached (:func:`provision.detect.direct.routes`); empty without
    an inventory. With ``PROVISION_REMOTE_DETECT=ansible`` every host's route is the play."""
    if hosts.inventory is None:
        return {}
    found = direct.routes(str(hosts.inventory), ",".join(hosts.specs))
    if not direct.enabled():
        return {h: Route("play", None, f"{direct.ENV_SWITCH}=ansible") for h in found}
    return found


def gather(
    hosts: Hosts,
    forks: int | None = None,
    keep: Path | None = None,
    routes: Mapping[str, Route] | None = None,
) -> dict[str, VerifyInputs | str]:
    """What every host's checks read: collected here for this machine, over each inventory host's
    route otherwise (:func:`provision.verify.direct.verify_routed`).

    ``keep``: also keep each read host's raw probe outputs in ``keep/raw/<host>/`` and the play's
    events in ``keep/ansible`` (for a support bundle); None keeps nothing.

    Raises:
        FactsError: ansible-playbook failed before any host reported.
    """
    if hosts.inventory is None:
        facts = detect_by_venv(hosts.keeping_raw(keep / "raw") if keep is not None else hosts)
        return {h: collect(held.spec, facts[h]) for h, held in hosts.specs.items()}
    jobs = {h: job_for(held.spec) for h, held in hosts.specs.items()}
    return verify_routed(str(hosts.inventory), jobs, routes or {}, forks, keep)


def verify_hosts(
    hosts: Hosts,
    forks: int | None = None,
    *,
    catalog: Catalog | None = None,
    limits: Limits | None = None,
    save_raw: Path | None = None,
    gathered: Gathered | None = None,
    runs_dir: Path | None = None,
) -> FleetVerify:
    """Gather every host's inputs (unless ``gathered`` replays them), then check each against its spec.

    Args:
        hosts: The hosts and the spec of each.
        forks: Hosts Ansible works on at once (None: Ansible's default).
        catalog: The catalog (default: the shipped one).
        limits: Verify thresholds (default: the shipped ``verify.yaml``).
        save_raw: If given, each read host's inputs go to ``save_raw/inputs.json`` for this
            machine, ``save_raw/<host>/inputs.json`` for inventory hosts.
        gathered: Saved inputs to check instead of reading the hosts.
        runs_dir: Where a support bundle goes when a host that was read fails a check: one
            ``support-<host>.tar.gz`` each in a new ``<UTC time>-verify`` run directory there
            (:mod:`provision.verify.bundles`); None writes none. A replay never writes one.
    """
    started, t0 = datetime.now(UTC), time.monotonic()
    if save_raw is not None:
        check_output_directory(save_raw, "--save-raw")  # before minutes of GPU work, not after
    cat, lim = catalog or load_catalog(), limits or shipped_limits()
    with tempfile.TemporaryDirectory(prefix="provision-verify-") as tmp:
        keep = Path(tmp) if runs_dir is not None and gathered is None else None
        same = same_machines_of_hosts(hosts, forks, gathered)  # before any GPU is loaded
        run = replace(hosts, specs={h: held for h, held in hosts.specs.items() if h not in same})
        routes = routes_of(run) if gathered is None and run.specs else {}
        got = gathered if gathered is not None else gather(run, forks, keep, routes) if run.specs else {}
        if save_raw is not None:
            _save_all(hosts, got, save_raw)
        verified = {
            h: same_machine(h, hosts.specs[h], same[h])
            if h in same
            else _check(h, hosts, got.get(h, NO_RESULT), cat, lim, routes.get(h))
            for h in hosts.specs
        }
        seconds = time.monotonic() - t0
        stamped = {h: _stamped(v, started, seconds) for h, v in verified.items()}
        if keep is not None and runs_dir is not None:
            read = {h: i for h, i in got.items() if isinstance(i, VerifyInputs)}
            reports = {h: v.report for h, v in stamped.items()}
            bundles = write_verify_bundles(hosts, reports, read, cat, keep, runs_dir)
            stamped = {h: replace(v, bundle=bundles.get(h)) for h, v in stamped.items()}
    return FleetVerify(stamped)


def same_machines_of_hosts(hosts: Hosts, forks: int | None, gathered: Gathered | None) -> dict[str, str]:
    """Host -> its refusal line, for the hosts that are one machine named twice
    (:func:`provision.machines.same_machines`): from the replayed inputs' facts, or, for two or more
    inventory hosts, from one pass of the machine-ID probe alone over their routes, so that no
    machine's GPUs are loaded twice at once."""
    if gathered is not None:
        return same_machines_of({h: i.facts for h, i in gathered.items() if isinstance(i, VerifyInputs)})
    if hosts.inventory is None or len(hosts.specs) < 2:
        return {}
    from provision.detect.runner import detect_remote

    probes = [p for p in (MachineIdFact.probe(),) if p is not None]
    found = detect_remote(str(hosts.inventory), ",".join(hosts.specs), probes=probes, forks=forks)
    return same_machines_of({h: f for h, f in found.items() if h in hosts.specs}, local_hosts(hosts))


def same_machine(host: str, held: HostSpec, line: str) -> HostVerify:
    """A host that is the same machine as another of the command: not read, one failed ``same-machine``
    result with the line (machine-id(5))."""
    result = CheckResult(
        id=RULE,
        title="The host is named once in the inventory",
        status="fail",
        detail=line,
        hint="Name the machine once in the inventory (or --limit to one name), then run verify again.",
    )
    report = Report(host=host, spec=held.path or "", results=(result,))
    return HostVerify(host, Path(held.path or ""), report)


def _check(
    host: str, hosts: Hosts, got: VerifyInputs | str, catalog: Catalog, limits: Limits, route: Route | None
) -> HostVerify:
    held = hosts.specs[host]
    results = check_host(host, held.spec, got, catalog, limits)
    report = Report(host=host, spec=held.path or "", results=results)
    return HostVerify(host, Path(held.path or ""), report, got if isinstance(got, str) else None, route=route)


def _stamped(verified: HostVerify, started: datetime, seconds: float) -> HostVerify:
    report = verified.report.model_copy(update={"started_at": started, "seconds": seconds})
    return replace(verified, report=report)


def _save_all(hosts: Hosts, got: Gathered, save_raw: Path) -> None:
    for host, inputs in got.items():
        if isinstance(inputs, VerifyInputs):
            save_inputs(save_raw if hosts.inventory is None else save_raw / host, inputs)


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
    from provision.detect.runner import unknown_facts

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


def fleet_verify_json(fleet: FleetVerify) -> dict[str, Any]:
    """``verify --json``'s one document, every form (:data:`provision.jsonout.HOSTS_FORMAT`).

    Shape: ``{"format_version": 2, "summary": {"hosts": {host: counts}, "failed": [hosts]},
    "hosts": [{"host", "spec", "unreachable", "counts", "failed", "report", "support_bundle",
    "transport"}]}``
    in inventory order (one machine, or one ``--inputs`` replay, is a list of one); ``counts`` is
    ``{pass, warn, fail, skip}`` (check counts), ``report`` the host's report (every check's result,
    :class:`provision.verify.models.Report`), ``support_bundle`` the archive of a host that failed a
    check (or null), ``transport`` how the host was read (:func:`route_json`: null for this
    machine without an inventory, and for a replay).
    """
    from provision.jsonout import HOSTS_FORMAT

    return {
        "format_version": HOSTS_FORMAT,
        "summary": {
            "hosts": {h: v.report.counts() for h, v in fleet.hosts.items()},
            "failed": fleet.failed,
        },
        "hosts": [_host_json(v) for v in fleet.hosts.values()],
    }


def _host_json(host: HostVerify) -> dict[str, Any]:
    return {
        "host": host.host,
        "spec": str(host.spec_path),
        "unreachable": host.unreachable,
        "counts": host.report.counts(),
        "failed": host.failed,
        "report": host.report.model_dump(mode="json"),
        "support_bundle": str(host.bundle) if host.bundle else None,
        "transport": route_json(host.route),
    }


def route_json(route: Route | None) -> dict[str, str | None] | None:
    """``{"kind": "local" | "ssh" | "play", "why": reason for the play | null}``; null without one."""
    return None if route is None else {"kind": route.transport, "why": route.why}
