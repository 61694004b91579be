"""``provision apply``: detect, plan, confirm, run Ansible, then prove convergence.

Exit codes: 0 applied and converged (or nothing to do), 1 refused, failed, or
not converged (see README, "Exit codes").
"""

from __future__ import annotations

import sys
from pathlib import Path

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
    """Run ``provision apply`` for a spec or saved plan at ``path``; returns the exit code."""
    spec, saved = app.spec_from(path)
    plans = app.plan_all(spec, app.gather(spec, target), saved.spec_path if saved else str(path))
    if saved is not None:
        app.check_drift(saved, plans[saved.host] if saved.host in plans else next(iter(plans.values())))
    for plan in plans.values():
        render_plan(plan, console)
    app.refuse_if_blocked(plans)
    pending = {h: p for h, p in plans.items() if p.changes}
    if not pending:
        console.print("Nothing to do: Ansible was not started.")
        return 0
    if dry_run:
        console.print("Dry run: nothing was changed.")
        return 0
    _confirm(yes, console)
    return _run(spec.name, pending, target, runs_dir, console)


def _confirm(yes: bool, console: Console) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise ProvisionError("no terminal to confirm the changes on; pass --yes to apply without asking")
    if console.input("Apply these changes? Only 'yes' is accepted: ").strip() != "yes":
        raise ProvisionError("apply cancelled; nothing was changed")


def _run(label: str, plans: dict[str, Plan], target: app.Target, runs_dir: Path, console: Console) -> int:
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
    converged = result.succeeded and _converged(plans, target, console)
    console.print(f"Run directory (logs, plans, Ansible artifacts): {run_dir}")
    if any(p.reboot_required for p in plans.values()):
        console.print("[bold magenta]Reboot required[/] to load the new kernel modules.")
    return 0 if converged else 1


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
