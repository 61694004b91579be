"""``provision apply`` over a fleet: each host held to its own spec, through the one apply sequence.

Everything but the presentation is :func:`provision.apply.workflow.apply_planned`, the sequence
a single machine goes through too. :class:`FleetView` shows it as the fleet plan with its
summary table, then one outcome table; a refused or unreachable host is a row, not an error.
The exit code is 0 only when every host ends unchanged or converged.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision.apply.outcome import Applied, HostOutcome
from provision.apply.reboot import RebootOutcome, RebootView, phase_code
from provision.apply.views import JsonReport, Stop, reboot_json, show_reboots
from provision.apply.workflow import ApplyOptions, apply_planned
from provision.errors import ProvisionError
from provision.fleet.mapping import Fleet
from provision.fleet.orchestrate import planned_fleet
from provision.fleet.summary import render_fleet_plan
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
        if as_json:
            report.emit()


class FleetJsonReport(JsonReport):
    """The fleet apply's ``--json`` document: the same document as one machine's
    (:class:`provision.apply.views.JsonReport`), every host in ``hosts``; written once an outcome
    was reached."""

    def __init__(self, *, reboot: bool = False) -> None:
        super().__init__(True, reboot=reboot)


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
        self.report.stopped(planned, dry_run=why == "dry-run")
        self.report.outcome(why, converged=why == "nothing-to-do")
        return planned.exit_code()

    def show_applied(self, planned: FleetPlan, applied: Applied) -> int:
        self.console.print(outcome_table(applied.outcomes))
        ok = all(o.ok for o in applied.outcomes)
        self.report.applied(planned, applied)  # with left_running after Ctrl-C
        self.report.outcome("applied" if ok else "failed", converged=ok)
        return 0 if ok else 1

    def after_reboot(self) -> FleetView:
        return FleetView(self.console, FleetJsonReport())

    def reboot_report(self, outcomes: list[RebootOutcome], after: RebootView | None) -> None:
        """One line per host; the JSON gets ``reboot`` and ``after_reboot`` (the fleet document of
        the apply after the reboot, or None), and ``outcome`` ``failed`` or ``resume-pending`` as the
        phase ended."""
        show_reboots(outcomes, self.console)
        self.report.data["reboot"] = reboot_json(outcomes)
        ran = isinstance(after, FleetView) and after.report.data["outcome"] is not None
        self.report.data["after_reboot"] = after.report.data if ran and isinstance(after, FleetView) else None
        if code := phase_code(outcomes):
            self.report.data["outcome"] = "failed" if code == 1 else "resume-pending"

    def refused_before(self, planned: FleetPlan, error: ProvisionError) -> None:
        self.report.stopped(planned)
        self.report.refused(error)

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
