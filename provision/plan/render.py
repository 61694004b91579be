"""Human-readable plan output, in the spirit of ``terraform plan``.

Symbols: ``+`` install, ``~`` upgrade/downgrade/configure, ``-`` remove, ``#`` hold or hold release,
``!`` manual, ``↻`` reboot, ``=`` no change (with its reason). Long reasons wrap inside their
column so that the symbols and component names stay readable.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from provision.plan.models import Action, Finding, Plan, Step

_SYMBOL = {
    Action.INSTALL: ("+", "green"),
    Action.UPGRADE: ("~", "yellow"),
    Action.DOWNGRADE: ("~", "yellow"),
    Action.CONFIGURE: ("~", "yellow"),
    Action.REMOVE: ("-", "red"),
    Action.HOLD: ("#", "cyan"),
    Action.RELEASE: ("#", "red"),
    Action.MANUAL: ("!", "magenta"),
    Action.REBOOT: ("↻", "magenta"),
    Action.NOOP: ("=", "dim"),
}


def render_plan(plan: Plan, console: Console) -> None:
    """Print ``plan`` for a person: header, steps, findings and a summary line."""
    console.print(Text(f"Plan for {plan.spec_name} on {plan.host}", style="bold"))
    steps = Table.grid(padding=(0, 1))
    for column in ("symbol", "component", "action"):
        steps.add_column(column, no_wrap=True)
    steps.add_column("change", overflow="fold")
    for step in plan.steps:
        _add_step(steps, step)
    console.print(steps)
    if plan.blockers or plan.warnings:
        console.print(_findings((*plan.blockers, *plan.warnings)))
    console.print(Text(summary(plan), style="bold red" if plan.refused else "bold"))


def _add_step(table: Table, step: Step) -> None:
    symbol, style = _SYMBOL[step.action]
    change = ""
    if step.current or step.target:
        change = f"{step.current} -> {step.target or '-'}" if step.current else f"-> {step.target}"
    table.add_row(
        Text(f" {symbol}", style=style),
        Text(step.component.value, style="bold" if step.changes else "dim"),
        Text(step.action.value, style=style),
        Text(change),
    )
    table.add_row("", "", "", Text(step.reason, style="dim"))
    if step.packages:
        table.add_row("", "", "", Text(f"packages: {' '.join(step.packages)}", style="dim"))


def _findings(findings: tuple[Finding, ...]) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column("label", no_wrap=True)
    table.add_column("message", overflow="fold")
    for finding in findings:
        style = "red" if finding.severity == "blocker" else "yellow"
        label = "refused" if finding.severity == "blocker" else "warning"
        table.add_row(Text(label, style=f"bold {style}"), Text(f"[{finding.rule}] {finding.message}"))
        table.add_row("", Text(f"source: {finding.source}", style="dim"))
    return table


def summary(plan: Plan) -> str:
    """One line: what would change, or why nothing will."""
    if plan.refused:
        return f"Refused: {len(plan.blockers)} blocker(s); nothing will be changed."
    counts: dict[str, int] = {}
    for step in plan.changes:
        counts[step.action.value] = counts.get(step.action.value, 0) + 1
    reboot = " A reboot is required afterwards." if plan.reboot_required else ""
    if not counts:
        return "No changes. The machine matches the spec." + reboot
    parts = ", ".join(f"{n} to {a}" for a, n in counts.items())
    return f"Plan: {parts}." + reboot
