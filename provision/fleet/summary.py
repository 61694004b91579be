"""Show a fleet plan: each host's plan, then one table of hosts by state; or all of it as JSON."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision.fleet.orchestrate import FleetPlan, HostState
from provision.hosts import fleet_plan_json, host_line
from provision.plan.render import render_plan

__all__ = ["fleet_plan_json", "host_line", "render_fleet_plan", "summary_table"]

_STYLE = {
    HostState.UNCHANGED: "green",
    HostState.CHANGE: "yellow",
    HostState.REFUSED: "red",
    HostState.UNREACHABLE: "red",
    HostState.FAILED: "red",
}


def render_fleet_plan(fleet_plan: FleetPlan, console: Console) -> None:
    """Every reachable host's plan, each unreachable host's reason, then the summary table."""
    for host in fleet_plan.hosts.values():
        if host.plan is not None and host.unreachable is None:
            render_plan(host.plan, console)
        else:
            print_unreachable(console, host.host, host.unreachable or "unreachable")
    console.print(summary_table(fleet_plan))


def print_unreachable(console: Console, host: str, reason: str) -> None:
    """The one line for a host nothing could be read from (``h2: host unreachable: no saved outputs
    in DIR/h2``): fleet ``plan`` and ``checklist`` print it alike, and both exit 1 for it."""
    console.print(f"[bold]{escape(host)}[/]: [red]{escape(reason)}[/]", soft_wrap=True)


def summary_table(fleet_plan: FleetPlan) -> Table:
    """One row per state: how many hosts, and which."""
    table = Table(title=f"Fleet: {len(fleet_plan.hosts)} host(s)", title_justify="left")
    table.add_column("state")
    table.add_column("hosts", justify="right")
    table.add_column("which")
    for state in HostState:
        names = fleet_plan.with_state(state)
        table.add_row(f"[{_STYLE[state]}]{state.value}[/]", str(len(names)), escape(", ".join(names)))
    return table
