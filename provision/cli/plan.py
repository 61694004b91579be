"""``provision plan``: what apply would change, per host."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from provision.errors import ProvisionError

if TYPE_CHECKING:
    from provision.plan.models import Plan

from provision.cli.base import (
    FactsOpt,
    FleetOpt,
    ForksOpt,
    InvOpt,
    JsonOpt,
    LimitOpt,
    MappedSpecArg,
    RawOpt,
    _check_outputs,
    _emit_json,
    _start_probes,
    _undetected,
    cli,
    err,
    out,
    user_errors,
)


@cli.command()
@user_errors()
def plan(
    spec: MappedSpecArg = None,
    *,
    as_json: JsonOpt = False,
    facts: FactsOpt = None,
    from_raw: RawOpt = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Save the plan as JSON for `apply`.", readable=False)
    ] = None,
    detailed_exitcode: Annotated[
        bool,
        typer.Option(
            "--detailed-exitcode", help="Exit 2 when changes are pending, 0 when none, 1 on error or refusal."
        ),
    ] = False,
    forks: ForksOpt = None,
) -> None:
    """Show what apply would change, step by step, and what it refuses and why.

    With an inventory (-i) and no SPEC, or a fleet file, each host is planned against its own spec
    and a summary table follows (hosts unchanged / to change / refused / unreachable). With -i and
    --from-raw DIR, each host is planned offline from DIR/<host>/ (`detect -i INVENTORY --save-raw DIR`).
    """
    _check_outputs(files={"--out": out_file})
    live = spec is not None and facts is None and from_raw is None and inventory is None and fleet is None
    preloaded = _start_probes(spec) if live else None
    from provision import app as workflow

    offline_fleet = from_raw is not None and (inventory is not None or fleet is not None)
    if fleet is not None or spec is None or offline_fleet:  # fleet mode, or no target: fleet_mode says
        from provision.fleet import commands as fleet_commands

        fleet_commands.fleet_mode(spec, inventory, fleet)
        raw = from_raw if offline_fleet else None
        hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks, from_raw=raw)
        save = None if out_file is None else functools.partial(_save_plan, path=out_file)
        raise typer.Exit(fleet_commands.plan_command(hosts, out, as_json, detailed_exitcode, save))
    loaded = preloaded or workflow.spec_from(spec)[0]
    target = workflow.Target(
        facts_file=facts, from_raw=from_raw, inventory=inventory, limit=limit, forks=forks
    )
    gathered = workflow.gather(loaded, target)
    lost = _undetected(gathered)  # not planned: a plan on facts nobody read would be a blank machine's
    plans = {h: p for h, p in workflow.plan_all(loaded, gathered, str(spec)).items() if h not in lost}
    _show_plans(plans, as_json, lost, spec)
    if out_file is not None:
        _save_plan(plans, out_file)
    raise typer.Exit(1 if lost else _plan_exit(plans, detailed_exitcode))


def _show_plans(plans: dict[str, Plan], as_json: bool, lost: dict[str, str], spec: Path) -> None:
    """Each plan, then each host that could not be detected with its reason (``lost``); with
    ``as_json`` the one document of every form (:func:`provision.fleet.summary.fleet_plan_json`)."""
    from provision.plan.render import render_plan

    if as_json:
        from provision.hosts import FleetPlan, HostPlan, fleet_plan_json

        hosts = {h: HostPlan(h, spec, p) for h, p in plans.items()}
        hosts |= {h: HostPlan(h, spec, None, reason) for h, reason in lost.items()}
        _emit_json(fleet_plan_json(FleetPlan(hosts)))
        return
    for p in plans.values():
        render_plan(p, out)
    for host, reason in lost.items():
        out.print(f"[bold]{escape(host)}[/]: [red]{escape(reason)}[/]", soft_wrap=True)


def _save_plan(plans: dict[str, Plan], path: Path) -> None:
    from provision.plan import seal

    if len(plans) != 1:
        raise ProvisionError("--out saves one reachable host's plan; use --limit to choose one host")
    plan = next(iter(plans.values()))
    seal.save(plan, path)
    if plan.refused:
        err.print(f"Saved the refused plan to {path} for review: `provision apply` refuses it.")
    elif not plan.changes:
        err.print(f"Saved the plan to {path}: it changes nothing.")
    else:
        err.print(f"Saved the plan to {path}; run `provision apply {path}` to apply exactly this plan.")


def _plan_exit(plans: dict[str, Plan], detailed: bool) -> int:
    if any(p.refused for p in plans.values()):
        return 1
    return 2 if detailed and any(p.changes for p in plans.values()) else 0
