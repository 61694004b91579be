"""``provision apply`` over a fleet: each host held to its own spec, through the one apply sequence.

Everything but the presentation is :func:`provision.apply.workflow.apply_planned`, the sequence
a single machine goes through too. :class:`FleetView` shows it as the fleet plan with its
summary table, then one outcome table; a refused or unreachable host is a row, not an error.
The exit code is 0 only when every host ends unchanged or converged.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision import jsonout
from provision.apply.outcome import Applied, HostOutcome, not_applied
from provision.apply.reboot import RebootOutcome, RebootView, phase_code
from provision.apply.views import Stop, reboot_json, show_reboots
from provision.apply.workflow import ApplyOptions, apply_planned
from provision.errors import ProvisionError
from provision.fleet.mapping import Fleet
from provision.fleet.orchestrate import planned_fleet
from provision.fleet.summary import fleet_plan_json, render_fleet_plan
from provision.hosts import FleetPlan
from provision.plan.models import Plan

FleetOptions = ApplyOptions
"""The fleet form's options: the same as any apply's."""


def apply_fleet(fleet: Fleet, options: ApplyOptions, console: Console, *, as_json: bool = False) -> int:
    """Run ``provision apply`` on every host of ``fleet``; returns the exit code (0 or 1).

    With ``as_json`` the outcome is written to stdout as one document (:class:`FleetJsonReport`).
    """
    report = FleetJsonReport(reboot=options.reboot.enabled)
    try:
        hosts, planned = planned_fleet(fleet)  # a host whose spec cannot be loaded fails alone
        return apply_planned(hosts, planned, options, FleetView(console, report))
    finally:
        if as_json and report.data:
            jsonout.emit(report.data)


class FleetJsonReport:
    """The fleet apply's ``--json`` document, filled as the sequence goes.

    Shape: ``{"outcome": "nothing-to-do" | "dry-run" | "refused" | "applied" | "failed" | "resume-pending",
    "run_dir": str | None, "plan": <plan --json of the fleet>, "hosts": {host: {"planned": state,
    "outcome": str, "ok": bool, "ansible": {ok, changed, failed, unreachable, failures} | None,
    "support_bundle": str | None}}}`` (``support_bundle``: the archive of a host that failed,
    :mod:`provision.support`; when Ansible was not started, each host's ``outcome`` says why:
    ``unchanged``, ``host unreachable: ...``, ``refused [rule] ...``, ``not applied (dry run): ...``);
    with ``--reboot`` also, in every outcome, ``"reboot": {host: {state, outcome, ok}}`` (None when no
    host was rebooted) and ``"after_reboot"`` (None when nothing was applied after a boot). A refusal
    before anything changed is ``"outcome": "refused"`` with ``"error": {type, message, problems}``.
    """

    def __init__(self, *, reboot: bool = False) -> None:
        self.data: dict[str, Any] = {}
        self.reboot = reboot

    def _keys(self) -> dict[str, Any]:
        return {"reboot": None, "after_reboot": None} if self.reboot else {}

    def stopped(self, planned: FleetPlan, why: Stop, dry_run: bool = False) -> None:
        """Ansible was not started: every host as planned, each with why it was not applied."""
        hosts = {h: _outcome_json(not_applied(p, dry_run), None) for h, p in planned.hosts.items()}
        self.data = {
            "outcome": why,
            "run_dir": None,
            "plan": fleet_plan_json(planned),
            "hosts": hosts,
        } | self._keys()

    def refused(self, planned: FleetPlan, error: ProvisionError) -> None:
        """A refusal before anything changed: ``outcome: refused`` with the error."""
        self.stopped(planned, "refused")
        self.data["error"] = jsonout.error_document(error, 1)["error"]

    def applied(self, planned: FleetPlan, applied: Applied, ok: bool) -> None:
        """Ansible ran: each host's outcome."""
        self.data = {
            "outcome": "applied" if ok else "failed",
            "run_dir": str(applied.result.run_dir),
            "plan": fleet_plan_json(planned),
            "hosts": {o.host: _outcome_json(o, applied.bundles.get(o.host)) for o in applied.outcomes},
        } | self._keys()


def _outcome_json(o: HostOutcome, bundle: Path | None) -> dict[str, Any]:
    ansible = dataclasses.asdict(o.ansible) if o.ansible else None
    return {
        "planned": o.before.value,
        "outcome": o.outcome,
        "ok": o.ok,
        "ansible": ansible,
        "support_bundle": str(bundle) if bundle else None,
    }


class FleetView:
    """The fleet form of ``provision apply``: see the module docstring."""

    label = "fleet"

    def __init__(self, console: Console, report: FleetJsonReport | None = None) -> None:
        self.console = console
        self.report = report or FleetJsonReport()

    def show_plan(self, planned: FleetPlan) -> bool:
        """The fleet plan and its summary; refused hosts are left out, the others go on."""
        render_fleet_plan(planned, self.console)
        return True

    def stopped(self, planned: FleetPlan, why: Stop) -> int:
        self.report.stopped(planned, why, dry_run=why == "dry-run")
        return planned.exit_code()

    def show_applied(self, planned: FleetPlan, applied: Applied) -> int:
        self.console.print(outcome_table(applied.outcomes))
        ok = all(o.ok for o in applied.outcomes)
        self.report.applied(planned, applied, ok)
        if applied.result.interrupted:  # processes of the run that outlived Ctrl-C (normally none)
            self.report.data["left_running"] = list(applied.result.left_running)
        return 0 if ok else 1

    def after_reboot(self) -> FleetView:
        return FleetView(self.console, FleetJsonReport())

    def reboot_report(self, outcomes: list[RebootOutcome], after: RebootView | None) -> None:
        """One line per host; the JSON gets ``reboot`` and ``after_reboot`` (the fleet document of
        the apply after the reboot, or None), and ``outcome`` ``failed`` or ``resume-pending`` as the
        phase ended."""
        show_reboots(outcomes, self.console)
        self.report.data["reboot"] = reboot_json(outcomes)
        self.report.data["after_reboot"] = after.report.data or None if isinstance(after, FleetView) else None
        if code := phase_code(outcomes):
            self.report.data["outcome"] = "failed" if code == 1 else "resume-pending"

    def refused_before(self, planned: FleetPlan, error: ProvisionError) -> None:
        self.report.refused(planned, error)

    def reboot_notice(self, pending: dict[str, Plan]) -> None:
        hosts = list(pending)
        if hosts:
            self.console.print(
                f"[bold magenta]Reboot required[/] on {escape(', '.join(hosts))} to load the new modules "
                "(`apply --reboot` reboots them and finishes after the boot)."
            )


def outcome_table(outcomes: list[HostOutcome]) -> Table:
    """One row per host: state at planning, Ansible's counts, and how it ended."""
    failed = sum(not o.ok for o in outcomes)
    table = Table(title=f"Apply: {len(outcomes) - failed} ok, {failed} failed", title_justify="left")
    for column in ("host", "planned", "ansible", "outcome"):
        table.add_column(column)
    for o in outcomes:
        counts = f"ok={o.ansible.ok} changed={o.ansible.changed}" if o.ansible else "-"
        style = "green" if o.ok else "red"
        table.add_row(escape(o.host), o.before.value, counts, f"[{style}]{escape(o.outcome)}[/]")
    return table
