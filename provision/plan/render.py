"""Human-readable plan output, in the spirit of ``terraform plan``.

Symbols: ``+`` install, ``~`` upgrade/downgrade/configure, ``-`` remove, ``#`` hold or hold release,
``!`` manual, ``↻`` reboot, ``=`` no change (with its reason). Long reasons wrap inside their
column so that the symbols and component names stay readable.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console
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


Cell = tuple[str, str]
"""One grid cell: its text and its rich style ("" for none)."""


def render_plan(plan: Plan, console: Console) -> None:
    """Print ``plan`` for a person: header, steps, findings and a summary line."""
    console.print(Text(f"Plan for {plan.spec_name} on {plan.host}", style="bold"))
    _grid(console, [row for step in plan.steps for row in _step_rows(step)])
    if plan.blockers or plan.warnings:
        _grid(console, [row for f in (*plan.blockers, *plan.warnings) for row in _finding_rows(f)])
    console.print(Text(summary(plan), style="bold red" if plan.refused else "bold"))


def _step_rows(step: Step) -> list[tuple[Cell, ...]]:
    symbol, style = _SYMBOL[step.action]
    change = ""
    if step.current or step.target:
        change = f"{step.current} -> {step.target or '-'}" if step.current else f"-> {step.target}"
    rows: list[tuple[Cell, ...]] = [
        (
            (f" {symbol}", style),
            (step.component.value, "bold" if step.changes else "dim"),
            (step.action.value, style),
            (change, ""),
        ),
        (("", ""), ("", ""), ("", ""), (step.reason, "dim")),
    ]
    if step.packages:
        rows.append((("", ""), ("", ""), ("", ""), (f"packages: {' '.join(step.packages)}", "dim")))
    return rows


def _finding_rows(finding: Finding) -> list[tuple[Cell, ...]]:
    style = "red" if finding.severity == "blocker" else "yellow"
    label = "refused" if finding.severity == "blocker" else "warning"
    return [
        ((label, f"bold {style}"), (f"[{finding.rule}] {finding.message}", "")),
        (("", ""), (f"source: {finding.source}", "dim")),
    ]


def _grid(console: Console, rows: list[tuple[Cell, ...]]) -> None:
    """``rows`` (of equally many cells) as a grid: columns one space apart, each as wide as its
    widest cell; the last column folds when a line is wider than the console.

    Without colour (a pipe or a file) and when every line fits, the lines are composed here, as
    rich's ``Table.grid(padding=(0, 1))`` lays them out (``tests/unit/test_planner.py`` holds the
    two equal on every plan of the test captures): rich measures every cell of a table through its
    renderables, ~6 ms a plan and half of a 1000-host fleet's text. Anything else goes to rich.
    """
    if not rows:
        return
    plain = console.color_system is None and all(text.isprintable() for row in rows for text, _ in row)
    widths = (
        [max(cell_len(text) for text, _ in column) for column in zip(*rows, strict=True)] if plain else []
    )
    if plain and sum(widths) + len(widths) - 1 <= console.width:
        lines = (" ".join(_pad(text, w) for (text, _), w in zip(row, widths, strict=True)) for row in rows)
        console.print(Text("\n".join(lines)), overflow="ignore", crop=False, soft_wrap=True)
    else:
        rich_grid(console, rows)


def rich_grid(console: Console, rows: list[tuple[Cell, ...]]) -> None:
    """``rows`` laid out by rich (:func:`_grid` without its plain-text path)."""
    from rich.table import Table

    table = Table.grid(padding=(0, 1))
    columns = len(rows[0])
    for i in range(columns - 1):
        table.add_column(str(i), no_wrap=True)
    table.add_column(str(columns - 1), overflow="fold")
    for row in rows:
        table.add_row(*(Text(text, style=style) for text, style in row))
    console.print(table)


def _pad(text: str, width: int) -> str:
    return text + " " * (width - cell_len(text))


def summary(plan: Plan) -> str:
    """One line: what would change, or why nothing will; it never says the machine matches the spec
    while a warning names a fact that could not be read (:attr:`Finding.unconfirmed`)."""
    if plan.refused:
        return f"Refused: {len(plan.blockers)} blocker(s); nothing will be changed."
    counts: dict[str, int] = {}
    for step in plan.changes:
        counts[step.action.value] = counts.get(step.action.value, 0) + 1
    reboot = " A reboot is required afterwards." if plan.reboot_required else ""
    unconfirmed = sum(1 for w in plan.warnings if w.unconfirmed)
    unread = f" {unconfirmed} warning(s) name facts that could not be read." if unconfirmed else ""
    if not counts and unconfirmed:
        return "No changes planned, but the machine is not confirmed to match the spec:" + unread + reboot
    if not counts:
        return "No changes. The machine matches the spec." + reboot
    parts = ", ".join(f"{n} to {a}" for a, n in counts.items())
    return f"Plan: {parts}." + unread + reboot
