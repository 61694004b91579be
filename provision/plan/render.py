"""Human-readable plan output, in the spirit of ``terraform plan``.

Symbols: ``+`` install, ``~`` upgrade/downgrade/configure, ``-`` remove,
``#`` hold, ``!`` manual, ``↻`` reboot, ``=`` no change (with its reason).
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.text import Text

from provision.plan.models import Action, Finding, Plan, Step

_SYMBOL = {
    Action.INSTALL: ("+", "green"),
    Action.UPGRADE: ("~", "yellow"),
    Action.DOWNGRADE: ("~", "yellow"),
    Action.CONFIGURE: ("~", "yellow"),
    Action.REMOVE: ("-", "red"),
    Action.HOLD: ("#", "cyan"),
    Action.MANUAL: ("!", "magenta"),
    Action.REBOOT: ("↻", "magenta"),
    Action.NOOP: ("=", "dim"),
}


def render_plan(plan: Plan, console: Console) -> None:
    """Print ``plan`` for a person: header, steps, findings and a summary line."""
    console.print(Text(f"Plan for {plan.spec_name} on {plan.host}", style="bold"))
    console.print(Group(*(_step(s) for s in plan.steps)))
    for finding in (*plan.blockers, *plan.warnings):
        console.print(_finding(finding))
    console.print(Text(summary(plan), style="bold red" if plan.refused else "bold"))


def _step(step: Step) -> Text:
    symbol, style = _SYMBOL[step.action]
    line = Text(f"  {symbol} ", style=style)
    line.append(f"{step.component.value:<15}", style="bold" if step.changes else "dim")
    line.append(f" {step.action.value:<9}", style=style)
    if step.current or step.target:
        line.append(f" {step.current or '-'} -> {step.target or '-'}")
    line.append(f"\n      {step.reason}", style="dim")
    if step.packages:
        line.append(f"\n      packages: {' '.join(step.packages)}", style="dim")
    return line


def _finding(finding: Finding) -> Text:
    style = "red" if finding.severity == "blocker" else "yellow"
    label = "refused" if finding.severity == "blocker" else "warning"
    text = Text(f"{label} [{finding.rule}]: ", style=f"bold {style}")
    text.append(finding.message)
    text.append(f"\n      source: {finding.source}", style="dim")
    return text


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
