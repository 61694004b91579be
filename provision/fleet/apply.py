"""``provision apply`` over a fleet: plan every host, run Ansible once over the pending ones, re-plan.

Failure isolation comes from Ansible's defaults, kept deliberately: ``any_errors_fatal``
is false and ``max_fail_percentage`` unset in site.yml, so a failed or unreachable host
drops out of the play and the others run to the end. Hosts that are refused or
unreachable at planning are left out of the run and reported. Every applied host is
detected and planned again; the exit code is 0 only when every host ends unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision.apply import runner
from provision.apply.progress import Progress
from provision.apply.workflow import _confirm as confirm
from provision.fleet.mapping import Fleet
from provision.fleet.orchestrate import FleetPlan, HostPlan, HostState, plan_fleet
from provision.fleet.summary import render_fleet_plan
from provision.plan.models import Plan


@dataclass(frozen=True)
class HostOutcome:
    """How one host ended.

    Attributes:
        host: The inventory hostname.
        before: Its state at planning.
        ansible: Ansible's counts for it; None when it was not in the run.
        outcome: ``converged``, ``unchanged``, or what went wrong, in one line.
        ok: Whether the host now matches its spec.
    """

    host: str
    before: HostState
    ansible: runner.HostResult | None
    outcome: str
    ok: bool


@dataclass(frozen=True)
class FleetOptions:
    """The command line's choices for one fleet apply."""

    dry_run: bool
    yes: bool
    runs_dir: Path
    forks: int | None = None


def apply_fleet(fleet: Fleet, options: FleetOptions, console: Console) -> int:
    """Run ``provision apply`` on every host of ``fleet``; returns the exit code (0 or 1)."""
    planned = plan_fleet(fleet)
    render_fleet_plan(planned, console)
    if not planned.pending:
        console.print("Nothing to do: Ansible was not started.")
        return planned.exit_code()
    if options.dry_run:
        console.print("Dry run: nothing was changed.")
        return planned.exit_code()
    confirm(options.yes, console)
    result = _run(fleet, planned.pending, options, console)
    again = plan_fleet(fleet, hosts=[h for h in planned.pending if h in _reached(result)])
    outcomes = [_outcome(p, result, again) for p in planned.hosts.values()]
    console.print(outcome_table(outcomes))
    console.print(f"Run directory (logs, plans, Ansible artifacts): {result.run_dir}")
    _reboot_notice(planned.pending, console)
    return 0 if all(o.ok for o in outcomes) else 1


def _run(fleet: Fleet, plans: dict[str, Plan], options: FleetOptions, console: Console) -> runner.ApplyResult:
    run_dir = runner.new_run_dir(options.runs_dir, "fleet")
    with Progress(console) as progress:
        return runner.run_playbook(
            plans,
            fleet.inventory,
            run_dir,
            on_event=progress.on_event,
            limit=",".join(plans),
            forks=options.forks,
        )


def _reached(result: runner.ApplyResult) -> set[str]:
    """Hosts Ansible reached without failing: re-detecting the others would only repeat the error."""
    return {h for h, r in result.hosts.items() if not r.failed and not r.unreachable}


def _outcome(planned: HostPlan, result: runner.ApplyResult, again: FleetPlan) -> HostOutcome:
    state, host = planned.state, planned.host
    if state is not HostState.CHANGE:
        return HostOutcome(host, state, None, _not_run(planned), state is HostState.UNCHANGED)
    ran = result.hosts.get(host)
    if ran is None or ran.unreachable or ran.failed:
        return HostOutcome(host, state, ran, _ansible_failure(ran), False)
    after = again.hosts.get(host)
    if after is not None and after.state is HostState.UNCHANGED:
        return HostOutcome(host, state, ran, "converged", True)
    return HostOutcome(host, state, ran, _not_converged(after), False)


def _not_run(planned: HostPlan) -> str:
    if planned.plan is None:
        return f"unreachable: {planned.unreachable}"
    if planned.plan.refused:
        first = planned.plan.blockers[0]
        return f"refused [{first.rule}] {first.message}"
    return "unchanged"


def _ansible_failure(ran: runner.HostResult | None) -> str:
    if ran is None:
        return "failed: Ansible reported nothing for this host"
    word = "unreachable" if ran.unreachable else "failed"
    return f"{word}: {ran.failures[0] if ran.failures else 'no message'}"


def _not_converged(after: HostPlan | None) -> str:
    if after is None or after.plan is None:
        return f"not converged: {after.unreachable if after else 'not detected again'}"
    steps = "; ".join(f"{s.component.value} {s.action.value}" for s in after.plan.changes)
    return f"not converged: {steps or after.state.value}"


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


def _reboot_notice(plans: dict[str, Plan], console: Console) -> None:
    hosts = [h for h, p in plans.items() if p.reboot_required]
    if hosts:
        console.print(
            f"[bold magenta]Reboot required[/] on {escape(', '.join(hosts))} to load the new modules."
        )
