"""How ``provision apply SPEC`` shows the one apply sequence of :mod:`provision.apply.workflow`.

This machine, or ``-i INV`` with every host held to SPEC: each plan, a refusal as a one-line
error, Ansible's counts per host, the convergence lines, and the ``--json`` report. The fleet
form's view is :class:`provision.fleet.apply.FleetView`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.markup import escape

from provision import jsonout
from provision.apply.outcome import Applied, HostOutcome, not_applied, steps
from provision.apply.reboot import RESUME_PENDING, RebootOutcome, RebootView, phase_code
from provision.errors import ProvisionError
from provision.hosts import FleetPlan, fleet_plan_json
from provision.plan.models import Plan
from provision.plan.render import render_plan

Stop = Literal["nothing-to-do", "dry-run", "refused", "failed"]
"""Why Ansible was not started (``failed``: no host had changes, and a host was unreachable or its
detection failed)."""


def apply_json(
    planned: FleetPlan,
    outcomes: list[HostOutcome],
    bundles: Mapping[str, Path] | None = None,
) -> dict[str, Any]:
    """The ``plan`` and ``hosts`` keys of apply's ``--json`` document, every form.

    Shape: ``{"plan": <plan --json's document of ``planned``>, "hosts": [{"host", "planned": state
    at planning, "outcome": str, "ok": bool, "ansible": {ok, changed, failed, unreachable, failures}
    | null, "support_bundle": str | null}]}`` in inventory order (one machine: a list of one).
    When Ansible did not run a host, its ``outcome`` says why (``unchanged``, ``host unreachable:
    ...``, ``refused [rule] ...``, ``not applied (dry run): ...``).
    """
    found = bundles or {}
    return {
        "plan": fleet_plan_json(planned),
        "hosts": [_outcome_json(o, found.get(o.host)) for o in outcomes],
    }


def _outcome_json(o: HostOutcome, bundle: Path | None) -> dict[str, Any]:
    return {
        "host": o.host,
        "planned": o.before.value,
        "outcome": o.outcome,
        "ok": o.ok,
        "ansible": dataclasses.asdict(o.ansible) if o.ansible else None,
        "support_bundle": str(bundle) if bundle else None,
    }


class JsonReport:
    """The ``--json`` outcome of one apply (single or fleet form), filled as the workflow goes.

    Shape (:data:`provision.jsonout.HOSTS_FORMAT`): ``{"format_version": 2, "outcome":
    "nothing-to-do" | "dry-run" | "refused" | "applied" | "failed" | "resume-pending" | "interrupted",
    "converged": bool, "run_dir": str | null, "plan", "hosts"}`` (:func:`apply_json`); with
    ``--reboot`` also, in every outcome, ``"reboot": [{host, state, outcome, ok}]`` (null when no
    host was rebooted) and ``"after_reboot"`` (the same document for the apply after the boot, or
    null); a refusal before anything changed adds ``"error": {type, message, problems}``; Ctrl-C
    adds ``left_running``.
    """

    def __init__(self, enabled: bool, *, reboot: bool = False) -> None:
        """``reboot``: ``--reboot`` was given, so the document carries ``reboot`` and
        ``after_reboot`` in every outcome (None until the reboot phase fills them)."""
        self.enabled = enabled
        self.data: dict[str, Any] = {
            "format_version": jsonout.HOSTS_FORMAT,
            "outcome": None,
            "converged": False,
            "run_dir": None,
            "plan": None,
            "hosts": [],
        } | ({"reboot": None, "after_reboot": None} if reboot else {})

    def stopped(self, planned: FleetPlan, dry_run: bool = False) -> None:
        """Ansible was not started: every host as planned, each with why it was not applied."""
        self.data.update(apply_json(planned, [not_applied(p, dry_run) for p in planned.hosts.values()]))

    def applied(self, planned: FleetPlan, applied: Applied) -> None:
        """Ansible ran: its run directory and each host's outcome."""
        self.data["run_dir"] = str(applied.result.run_dir)
        self.data.update(apply_json(planned, applied.outcomes, applied.bundles))
        if applied.result.interrupted:  # processes of the run that outlived Ctrl-C (normally none)
            self.data["left_running"] = list(applied.result.left_running)

    def refused(self, error: ProvisionError) -> None:
        """A refusal before anything changed: ``outcome: refused`` with the error (as the CLI's
        error document has it, :func:`provision.jsonout.error_document`)."""
        self.outcome("refused", converged=False)
        self.data["error"] = jsonout.error_document(error, 1)["error"]

    def outcome(self, outcome: str, *, converged: bool) -> int:
        """Record the outcome; returns its exit code (0 for nothing-to-do, dry-run, applied)."""
        self.data.update(outcome=outcome, converged=converged)
        if outcome == "resume-pending":
            return RESUME_PENDING
        return 0 if outcome in ("nothing-to-do", "dry-run", "applied") else 1

    def emit(self) -> None:
        """Write the document to stdout, when asked for and an outcome was reached."""
        if self.enabled and self.data["outcome"] is not None:
            jsonout.emit(self.data)


class SingleView:
    """``provision apply SPEC``: see the module docstring."""

    def __init__(self, console: Console, report: JsonReport, label: str) -> None:
        self.console = console
        self.report = report
        self.label = label
        self.lost: dict[str, str] = {}
        """Hosts that could not be detected -> the reason (set by :meth:`show_plan`)."""

    def show_plan(self, planned: FleetPlan) -> bool:
        """Every detected host's plan; any blocker refuses the whole apply, said once by the plan
        itself. A host that could not be detected is not planned (a plan on facts nobody read would
        be a blank machine's): its reason is said instead, and it stops the apply too."""
        self.lost = {h: p.unreachable for h, p in planned.hosts.items() if p.unreachable is not None}
        plans = {h: p for h, p in planned.plans.items() if h not in self.lost}
        for plan in plans.values():
            render_plan(plan, self.console)
        for host, reason in self.lost.items():
            self.console.print(f"[bold]{escape(host)}[/]: [red]{escape(reason)}[/]", soft_wrap=True)
        self.report.stopped(planned)  # until Ansible runs: each host as planned
        return not self.lost and not any(p.refused for p in plans.values())

    def stopped(self, planned: FleetPlan, why: Stop) -> int:
        refused = any(p.refused for h, p in planned.plans.items() if h not in self.lost)
        if why == "refused" and self.lost and not refused:
            why = "failed"  # nothing refused: a host could not be detected
        self.report.stopped(planned, dry_run=why == "dry-run")
        return self.report.outcome(why, converged=why == "nothing-to-do")

    def show_applied(self, planned: FleetPlan, applied: Applied) -> int:
        """Ansible's counts and failures per host, then what the fresh plans left undone."""
        self.report.applied(planned, applied)
        for ran in applied.result.hosts.values():
            self.console.print(
                f"{ran.host}: ok={ran.ok} changed={ran.changed} failed={ran.failed} "
                f"unreachable={ran.unreachable}"
            )
            for failure in ran.failures:
                self.console.print(f"  [red]failed:[/] {escape(failure)}", soft_wrap=True)
        left = not_converged(planned, applied)
        for host, what in left.items():
            lost = applied.again.hosts.get(host)
            if lost is not None and lost.unreachable is not None:
                self.console.print(f"[red]{host} unreachable after the run:[/] " + escape(lost.unreachable))
            else:
                self.console.print(f"[red]{host} did not converge:[/] " + escape(what))
        if not left:
            self.console.print("Converged: a fresh plan shows no changes.")
        converged = not left and applied.result.succeeded
        ended = "interrupted" if applied.result.interrupted else "applied" if converged else "failed"
        return self.report.outcome(ended, converged=converged)

    def refused_before(self, planned: FleetPlan, error: ProvisionError) -> None:
        self.report.stopped(planned)
        self.report.refused(error)

    def reboot_notice(self, pending: dict[str, Plan]) -> None:
        if pending:
            self.console.print(
                "[bold magenta]Reboot required[/] to load the new kernel modules "
                "(`apply --reboot` reboots and finishes after the boot)."
            )

    def after_reboot(self) -> SingleView:
        return SingleView(self.console, JsonReport(False), self.label)

    def reboot_report(self, outcomes: list[RebootOutcome], after: RebootView | None) -> None:
        """One line per host; the JSON's ``outcome`` becomes ``failed`` when a host failed there, or
        ``resume-pending`` when one waits for its console."""
        show_reboots(outcomes, self.console)
        self.report.data["reboot"] = reboot_json(outcomes)
        ran = isinstance(after, SingleView) and after.report.data["outcome"] is not None
        self.report.data["after_reboot"] = (
            after.report.data if ran and isinstance(after, SingleView) else None
        )
        code = phase_code(outcomes)
        if code:
            self.report.outcome("failed" if code == 1 else "resume-pending", converged=False)


def show_reboots(outcomes: list[RebootOutcome], console: Console) -> None:
    """``host: outcome`` per host, red when it failed."""
    for o in outcomes:
        style = "green" if o.ok else "magenta" if o.state == "mok-pending" else "red"
        console.print(f"{escape(o.host)}: [{style}]{escape(o.outcome)}[/]", soft_wrap=True)


def reboot_json(outcomes: list[RebootOutcome]) -> list[dict[str, Any]]:
    """``[{host, state, outcome, ok}]``, one per host in ``outcomes``' order."""
    return [{"host": o.host, "state": o.state, "outcome": o.outcome, "ok": o.ok} for o in outcomes]


def not_converged(planned: FleetPlan, applied: Applied) -> dict[str, str]:
    """Applied hosts whose fresh plan still has changes (the steps), or that were not planned again."""
    left: dict[str, str] = {}
    for host in planned.pending:
        after = applied.again.hosts.get(host)
        if after is None or after.unreachable is not None:
            left[host] = next(o.outcome for o in applied.outcomes if o.host == host)
        elif after.plan is not None and after.plan.changes:
            left[host] = steps(after.plan)
    return left
