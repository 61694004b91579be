"""``provision apply``: detect, plan, confirm, run Ansible, then prove convergence.

Exit codes: 0 applied and converged (or nothing to do), 1 refused, failed, or
not converged (see README, "Exit codes").
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from provision import app
from provision.apply import runner
from provision.apply.progress import Progress
from provision.errors import ProvisionError
from provision.plan.models import Plan
from provision.plan.render import render_plan


def apply_workflow(
    path: Path,
    *,
    dry_run: bool,
    yes: bool,
    target: app.Target,
    as_json: bool,
    runs_dir: Path,
    console: Console,
) -> int:
    """Run ``provision apply`` for a spec or saved plan at ``path``; returns the exit code.

    With ``as_json`` the outcome is also written to stdout as one JSON document:
    ``{"outcome": "nothing-to-do" | "dry-run" | "refused" | "applied" | "failed", "converged": bool,
    "run_dir": str | None, "hosts": {host: {ok, changed, failed, unreachable, failures}},
    "plans": [Plan, ...]}``.
    """
    report = _Report(as_json)
    try:
        return _apply(
            path, dry_run=dry_run, yes=yes, target=target, runs_dir=runs_dir, console=console, report=report
        )
    finally:
        report.emit()


def _apply(
    path: Path,
    *,
    dry_run: bool,
    yes: bool,
    target: app.Target,
    runs_dir: Path,
    console: Console,
    report: _Report,
) -> int:
    spec, saved = app.spec_from(path)
    plans = app.plan_all(spec, app.gather(spec, target), saved.spec_path if saved else str(path))
    if saved is not None:
        app.check_drift(saved, plans[saved.host] if saved.host in plans else next(iter(plans.values())))
    for plan in plans.values():
        render_plan(plan, console)
    report.data["plans"] = [json.loads(p.model_dump_json()) for p in plans.values()]
    if any(p.refused for p in plans.values()):
        report.outcome("refused", converged=False)
    app.refuse_if_blocked(plans)
    pending = {h: p for h, p in plans.items() if p.changes}
    if not pending:
        console.print("Nothing to do: Ansible was not started.")
        return report.outcome("nothing-to-do", converged=True)
    if dry_run:
        console.print("Dry run: nothing was changed.")
        return report.outcome("dry-run", converged=False)
    _confirm(yes, console)
    return _run(spec.name, pending, target, runs_dir, console, report)


class _Report:
    """The --json outcome of one apply, filled as the workflow goes."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.data: dict[str, Any] = {
            "outcome": None,
            "converged": False,
            "run_dir": None,
            "hosts": {},
            "plans": [],
        }

    def outcome(self, outcome: str, *, converged: bool) -> int:
        self.data.update(outcome=outcome, converged=converged)
        return 0 if outcome in ("nothing-to-do", "dry-run", "applied") else 1

    def emit(self) -> None:
        if self.enabled and self.data["outcome"] is not None:
            sys.stdout.write(json.dumps(self.data, indent=2) + "\n")


def _confirm(yes: bool, console: Console) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise ProvisionError("no terminal to confirm the changes on; pass --yes to apply without asking")
    if console.input("Apply these changes? Only 'yes' is accepted: ").strip() != "yes":
        raise ProvisionError("apply cancelled; nothing was changed")


def _run(
    label: str, plans: dict[str, Plan], target: app.Target, runs_dir: Path, console: Console, report: _Report
) -> int:
    run_dir = runner.new_run_dir(runs_dir, label)
    inventory = target.inventory or runner.local_inventory(run_dir)
    with Progress(console) as progress:
        result = runner.run_playbook(
            plans, inventory, run_dir, on_event=progress.on_event, limit=target.limit, forks=target.forks
        )
    for host in result.hosts.values():
        console.print(
            f"{host.host}: ok={host.ok} changed={host.changed} failed={host.failed} "
            f"unreachable={host.unreachable}"
        )
        for failure in host.failures:
            console.print(f"  [red]failed:[/] {escape(failure)}", soft_wrap=True)
    # Re-plan even after a failure, so that what is left undone is said, not hidden.
    converged = _converged(plans, target, console) and result.succeeded
    console.print(f"Run directory (logs, plans, Ansible artifacts): {run_dir}")
    if any(p.reboot_required for p in plans.values()):
        console.print("[bold magenta]Reboot required[/] to load the new kernel modules.")
    report.data["run_dir"] = str(run_dir)
    report.data["hosts"] = {h.host: dataclasses.asdict(h) for h in result.hosts.values()}
    return report.outcome("applied" if converged else "failed", converged=converged)


def _converged(plans: dict[str, Plan], target: app.Target, console: Console) -> bool:
    """Detect and plan again: apply is done only when nothing is left to change."""
    spec = next(iter(plans.values())).spec
    again = app.plan_all(spec, app.gather(spec, target), None)
    left = {h: p for h, p in again.items() if h in plans and p.changes}
    for host, plan in left.items():
        console.print(
            f"[red]{host} did not converge:[/] "
            + "; ".join(f"{s.component.value} {s.action.value}" for s in plan.changes)
        )
    if not left:
        console.print("Converged: a fresh plan shows no changes.")
    return not left
