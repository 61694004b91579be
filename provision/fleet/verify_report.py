"""The combined verify report of a fleet: per-host tables and a summary, JSON, and JUnit XML."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision import jsonout
from provision.detect.direct import Route
from provision.fleet.verify import FleetVerify
from provision.output import write_output
from provision.verify.hosts import fleet_verify_json
from provision.verify.render import STYLE, junit_document, junit_suite, render_table

STATUSES = ("pass", "warn", "fail", "skip")


def render_fleet_verify(fleet: FleetVerify, console: Console) -> None:
    """Each host's table (an unreachable host's reason first), then the summary table."""
    for host in fleet.hosts.values():
        if host.unreachable:
            cause = f"{host.unreachable}{route_note(host.route)}"
            console.print(f"[bold]{escape(host.host)}[/]: [red]{escape(cause)}[/]", soft_wrap=True)
        render_table(host.report, console)
    console.print(summary_table(fleet))
    for host in fleet.hosts.values():
        if host.bundle:
            console.print(
                f"Support bundle for {escape(host.host)} (mode 0600, secrets redacted): {host.bundle}",
                soft_wrap=True,
            )


def route_note(route: Route | None) -> str:
    """`` (over ssh)``, `` (through the Ansible play: WHY)``; empty without a route."""
    if route is None:
        return ""
    if route.transport == "play":
        return f" (through the Ansible play: {route.why})" if route.why else " (through the Ansible play)"
    return f" (over {route.transport})"


def summary_table(fleet: FleetVerify) -> Table:
    """One row per host: its counts of pass, warn, fail and skip, and the spec it was held to."""
    table = Table(title=f"Fleet verify: {len(fleet.hosts)} host(s)", title_justify="left")
    table.add_column("host")
    for status in STATUSES:
        table.add_column(status, justify="right")
    table.add_column("via")
    table.add_column("spec / reason", overflow="fold")
    for host in fleet.hosts.values():
        counts = host.report.counts()
        cells = [f"[{STYLE[s]}]{counts[s]}[/]" if counts[s] else "0" for s in STATUSES]
        note = host.unreachable or str(host.spec_path)
        name = f"[red]{escape(host.host)}[/]" if host.failed else escape(host.host)
        via = host.route.transport if host.route is not None else "-"
        table.add_row(name, *cells, via, escape(note))
    return table


def fleet_junit_xml(fleet: FleetVerify) -> str:
    """JUnit XML with one ``<testsuite>`` per host (named ``provision verify <host>``)."""
    return junit_document([junit_suite(v.report, f"provision verify {h}") for h, v in fleet.hosts.items()])


def emit_fleet(fleet: FleetVerify, console: Console, as_json: bool, junit: Path | None) -> int:
    """Print the tables or the JSON, write JUnit XML if asked; returns the exit code (1: a host failed)."""
    if as_json:
        jsonout.emit(fleet_verify_json(fleet))
    else:
        render_fleet_verify(fleet, console)
    if junit is not None:
        write_output(junit, fleet_junit_xml(fleet))
    return fleet.exit_code()
