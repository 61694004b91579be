"""Show a fleet plan: each host's plan, then one table of hosts by state; or all of it as JSON."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision.fleet.orchestrate import FleetPlan, HostPlan, HostState
from provision.plan.render import render_plan, summary

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
            console.print(
                f"[bold]{escape(host.host)}[/]: [red]{escape(host.unreachable or 'unreachable')}[/]"
            )
    console.print(summary_table(fleet_plan))


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


def host_line(host: HostPlan) -> str:
    """One line for ``host``: its plan's summary or why it could not be planned."""
    if host.plan is None or host.unreachable is not None:
        return host.unreachable or "host unreachable"  # the reason names itself: unreachable or failed
    return summary(host.plan)


def fleet_plan_json(fleet_plan: FleetPlan) -> dict[str, Any]:
    """``plan --json``'s one document, every form (:data:`provision.jsonout.HOSTS_FORMAT`).

    Shape: ``{"format_version": 2, "summary": {state: [hosts]}, "hosts": [{"host", "state",
    "spec", "summary", "unreachable", "plan"}, ...]}`` in inventory order: ``state`` one of
    :class:`HostState`'s values, ``spec`` the spec file planned (null: none named),
    ``unreachable`` the reason the host could not be planned or null, ``plan`` the saved-plan
    document (what ``plan --out`` writes, unsealed) or null when no plan was made.
    """
    from provision.jsonout import HOSTS_FORMAT

    return {
        "format_version": HOSTS_FORMAT,
        "summary": {state.value: fleet_plan.with_state(state) for state in HostState},
        "hosts": [_host_json(p) for p in fleet_plan.hosts.values()],
    }


def _host_json(host: HostPlan) -> dict[str, Any]:
    return {
        "host": host.host,
        "state": host.state.value,
        "spec": None if host.spec_path is None else str(host.spec_path),
        "summary": host_line(host),
        "unreachable": host.unreachable,
        "plan": json.loads(host.plan.model_dump_json()) if host.plan and not host.unreachable else None,
    }
