"""``provision apply``, ``resume`` and ``rollback``: the commands that change hosts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from provision.cli.base import (
    DryRunOpt,
    FleetOpt,
    ForksOpt,
    InvOpt,
    JsonOpt,
    LimitOpt,
    RunsDirOpt,
    YesOpt,
    _check_runs_dir,
    cli,
    err,
    out,
    user_errors,
)
from provision.errors import ProvisionError


@cli.command()
@user_errors()
def apply(
    spec: Annotated[
        Path | None,
        typer.Argument(
            help="Spec file (YAML) or a plan saved with `plan --out` (JSON); optional with -i/--fleet.",
            readable=False,
        ),
    ] = None,
    *,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    forks: ForksOpt = None,
    as_json: JsonOpt = False,
    runs_dir: RunsDirOpt = None,
    replace_held: Annotated[
        bool,
        typer.Option(
            "--replace-held",
            help="Consent to replace an installed, held driver that the spec changes (the plan shows it "
            "as a removal or a hold release); the spec's driver.replace_held does the same.",
        ),
    ] = False,
    reboot: Annotated[
        bool,
        typer.Option(
            "--reboot",
            help="Reboot the hosts whose new kernel side needs it and finish the apply after the boot "
            "(remote hosts: Ansible's reboot module; this machine: a one-shot provision-resume.service, "
            "reboot in one minute). A pending MOK enrollment stops with the console steps instead.",
        ),
    ] = False,
    reboot_timeout: Annotated[
        int,
        typer.Option(
            "--reboot-timeout", min=30, max=7200, help="Seconds a remote host has to come back (default 600)."
        ),
    ] = 600,
    max_unavailable: Annotated[
        str | None,
        typer.Option(
            "--max-unavailable",
            help="Roll out in waves of N hosts (or P% of them), verify as the gate after each wave, "
            "stop at the first host that regressed; `provision resume RECORD` continues (docs/fleets.md).",
        ),
    ] = None,
) -> None:
    """Install and pin the stack as planned, through Ansible; a second apply changes nothing.

    With an inventory (-i) and no SPEC, or a fleet file, hosts run in parallel, each with its own
    spec; a failed or unreachable host is reported and the others finish (exit 1). With --reboot,
    exit 3 means a host waits for a step at its console (MOK enrollment). With --max-unavailable,
    a wave at a time, each gated by verify (exit 1 when the rollout stopped).
    """
    _check_runs_dir(runs_dir)
    from provision import app as workflow
    from provision.apply import runner
    from provision.apply.reboot import RebootOptions
    from provision.apply.workflow import apply_workflow
    from provision.fleet import commands as fleet_commands

    reboots = RebootOptions(reboot, reboot_timeout)
    if max_unavailable is not None:
        from provision.fleet.rolling import rolling_apply
        from provision.fleet.rollout import parse_max_unavailable

        parse_max_unavailable(max_unavailable)  # a bad value is refused before anything is read
        if inventory is None and fleet is None:
            raise ProvisionError("--max-unavailable rolls out over hosts: give -i INVENTORY or --fleet FILE")
        from provision.files import is_plan_file

        if spec is not None and is_plan_file(spec):
            raise ProvisionError(
                f"{spec} is a saved plan of one host; --max-unavailable rolls a spec out over hosts"
            )
        options = fleet_commands.FleetOptions(
            dry_run, yes, runs_dir or runner.default_runs_dir(), forks, replace_held, reboots
        )
        hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks)
        code = rolling_apply(
            hosts,
            max_unavailable,
            options,
            err if as_json else out,
            fleet_file=fleet,
            spec=spec,
            limit=limit,
            as_json=as_json,
        )
        raise typer.Exit(code)
    if fleet_commands.fleet_mode(spec, inventory, fleet):
        options = fleet_commands.FleetOptions(
            dry_run, yes, runs_dir or runner.default_runs_dir(), forks, replace_held, reboots
        )
        hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks)
        raise typer.Exit(fleet_commands.apply_command(hosts, options, err if as_json else out, as_json))
    assert spec is not None  # fleet_mode is true without a SPEC
    raise typer.Exit(
        apply_workflow(
            spec,
            dry_run=dry_run,
            yes=yes,
            target=workflow.Target(inventory=inventory, limit=limit, forks=forks),
            as_json=as_json,
            runs_dir=runs_dir or runner.default_runs_dir(),
            console=err if as_json else out,  # with --json, stdout carries only the JSON report
            replace_held=replace_held,
            reboot=reboots,
        )
    )


@cli.command()
@user_errors()
def resume(
    record: Annotated[
        Path | None,
        typer.Argument(
            help="A resume record (default: this machine's, /var/lib/provision/resume.json; a remote "
            "host's waiting on its console is in the apply's run directory).",
            readable=False,
        ),
    ] = None,
    *,
    as_json: JsonOpt = False,
    unit: Annotated[
        bool,
        typer.Option("--unit", help="Run as provision-resume.service does: this machine's record only."),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="A rollout record: go on without asking for confirmation.")
    ] = False,
) -> None:
    """Finish, after the reboot, an apply run with --reboot: detect again, apply what is left.

    Applies only changes of the components the confirmed plan changed (anything else is refused, to be
    reviewed with apply); stops again while a MOK enrollment is pending (exit 3). The record (and
    this machine's unit) is removed when it has run to its end; it is kept while a host is not
    reachable yet (exit 1: run resume again) or its spec changed since apply (remove it by hand to
    drop the resume). No record: nothing to do, exit 0. Its log: resume.log in the apply's run
    directory.

    A rollout record (written by `apply --max-unavailable` or `rollback --max-unavailable` in
    <runs dir>/rollouts/) continues the rollout from its first wave not done: the failed hosts
    again, then the untouched ones.
    """
    from provision.apply.resume import resume_workflow
    from provision.errors import ProvisionError

    if record is not None and not unit:
        from provision.fleet import rolling

        if rolling.is_rollout_record(record):
            raise typer.Exit(_resume_rollout(record, yes, as_json))
    if unit and record is not None:
        raise ProvisionError("--unit runs this machine's record; give no RECORD with it")
    raise typer.Exit(
        resume_workflow(record, as_json=as_json, console=err if as_json else out, unit_mode=unit)
    )


def _resume_rollout(record: Path, yes: bool, as_json: bool) -> int:
    from provision.apply.workflow import ApplyOptions
    from provision.fleet.rolling import resume_rollout

    runs = record.resolve().parent.parent  # <runs dir>/rollouts/<id>.json
    options = ApplyOptions(dry_run=False, yes=yes, runs_dir=runs)
    return resume_rollout(record, options, err if as_json else out, as_json=as_json)


@cli.command()
@user_errors()
def rollback(
    *,
    to: Annotated[
        int | None,
        typer.Option(
            "--to", min=1, help="The lock number to return to (default: the one before the current)."
        ),
    ] = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: Annotated[
        Path | None,
        typer.Option(
            "--fleet",
            help="Fleet file: its inventory, and the drain hooks of --max-unavailable (its specs are "
            "not used: each host returns to its lock's).",
            readable=False,
        ),
    ] = None,
    forks: ForksOpt = None,
    as_json: JsonOpt = False,
    runs_dir: RunsDirOpt = None,
    replace_held: Annotated[
        bool,
        typer.Option("--replace-held", help="Consent to move a held driver, as for apply."),
    ] = False,
    max_unavailable: Annotated[
        str | None,
        typer.Option(
            "--max-unavailable",
            help="Roll back in waves of N hosts (or P% of them), verify as the gate after each wave, "
            "stop at the first host that regressed; `provision resume RECORD` continues (docs/fleets.md).",
        ),
    ] = None,
) -> None:
    """Return each host to a previous lock (`provision lock show` lists them) through a normal plan.

    The plan shows the downgrades and is refused, with the list, when the repository no longer
    serves a locked version; the lock's holds and pins come back with it. Exit codes as apply's.
    With --max-unavailable, a wave at a time, as `apply --max-unavailable` (exit 1 when it stopped).
    """
    _check_runs_dir(runs_dir)
    from provision.apply import runner
    from provision.apply.workflow import ApplyOptions
    from provision.rollback import RollbackOptions, rollback_workflow

    applying = ApplyOptions(dry_run, yes, runs_dir or runner.default_runs_dir(), forks, replace_held)
    if max_unavailable is not None:
        from provision.fleet.mapping import fleet_inventory
        from provision.fleet.rolling import rolling_rollback
        from provision.fleet.rollout import parse_max_unavailable

        parse_max_unavailable(max_unavailable)  # a bad value is refused before anything is read
        if inventory is None and fleet is None:
            raise ProvisionError("--max-unavailable rolls back over hosts: give -i INVENTORY or --fleet FILE")
        code = rolling_rollback(
            fleet_inventory(inventory, fleet),
            to,
            max_unavailable,
            applying,
            err if as_json else out,
            fleet_file=fleet,
            limit=limit,
            as_json=as_json,
        )
        raise typer.Exit(code)
    if fleet is not None:
        from provision.fleet.mapping import fleet_inventory

        inventory = fleet_inventory(inventory, fleet)
    options = RollbackOptions(to, inventory, limit, applying)
    raise typer.Exit(rollback_workflow(options, as_json=as_json, console=err if as_json else out))
