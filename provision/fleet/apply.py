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
from provision.apply.views import Stop
from provision.apply.workflow import ApplyOptions, apply_planned
from provision.fleet.mapping import Fleet
from provision.fleet.orchestrate import fleet_hosts
from provision.fleet.summary import render_fleet_plan
from provision.hosts import FleetPlan, plan_hosts
from provision.plan.models import Plan

FleetOptions = ApplyOptions
"""The fleet form's options: the same as any apply's."""


def apply_fleet(fleet: Fleet, options: ApplyOptions, console: Console) -> int:
    """Run ``provision apply`` on every host of ``fleet``; returns the exit code (0 or 1)."""
    hosts = fleet_hosts(fleet)
    return apply_planned(hosts, plan_hosts(hosts), options, FleetView(console))


class FleetView:
    """The fleet form of ``provision apply``: see the module docstring."""

    label = "fleet"

    def __init__(self, console: Console) -> None:
        self.console = console

    def show_plan(self, planned: FleetPlan) -> None:
        render_fleet_plan(planned, self.console)

    def stopped(self, planned: FleetPlan, why: Stop) -> int:
        return planned.exit_code()

    def show_applied(self, planned: FleetPlan, applied: Applied) -> int:
        self.console.print(outcome_table(applied.outcomes))
        return 0 if all(o.ok for o in applied.outcomes) else 1

    def reboot_notice(self, pending: dict[str, Plan]) -> None:
        hosts = [h for h, p in pending.items() if p.reboot_required]
        if hosts:
            self.console.print(
                f"[bold magenta]Reboot required[/] on {escape(', '.join(hosts))} to load the new modules."
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
