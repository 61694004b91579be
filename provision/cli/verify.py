"""``provision verify``: proof that each host works at the speed it should."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from provision.cli.base import (
    FleetOpt,
    ForksOpt,
    InvOpt,
    JsonOpt,
    LimitOpt,
    MappedSpecArg,
    RunsDirOpt,
    _check_outputs,
    _check_runs_dir,
    cli,
    err,
    out,
    user_errors,
)
from provision.errors import ProvisionError


@cli.command()
@user_errors()
def verify(
    spec: MappedSpecArg = None,
    *,
    as_json: JsonOpt = False,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write JUnit XML (a testcase per check).", readable=False),
    ] = None,
    save_raw: Annotated[
        Path | None,
        typer.Option("--save-raw", help="Write what the checks read (inputs.json) to DIR.", readable=False),
    ] = None,
    inputs: Annotated[
        Path | None,
        typer.Option("--inputs", help="Check a saved inputs.json instead of this machine.", readable=False),
    ] = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    forks: ForksOpt = None,
    prometheus: Annotated[
        Path | None,
        typer.Option(
            "--prometheus",
            help="Also write the results as a node exporter textfile (FILE.prom, written atomically), "
            "e.g. /var/lib/prometheus/node-exporter/provision-verify.prom.",
            readable=False,
        ),
    ] = None,
    runs_dir: RunsDirOpt = None,
) -> None:
    """Prove the machine works: driver, GPUs, PCIe and kernels under load, libraries, P2P, NCCL, thermals.

    Exit 0 when no check failed (warnings and skips allowed), 1 otherwise. With an inventory (-i) or
    a fleet file, every host is verified against its spec (or SPEC for all) and a combined report
    follows: per-host tables, a summary, --json of all hosts, --junit with one testsuite per host.
    A host that fails a check gets a support bundle (support-<host>.tar.gz, mode 0600, secrets
    redacted) in a new run directory; its path is printed and in --json.
    """
    from provision.ansible import default_runs_dir
    from provision.verify.command import emit, run_verify

    _check_outputs(files={"--junit": junit}, directories={"--save-raw": save_raw})
    _check_runs_dir(runs_dir)
    if prometheus is not None:
        from provision.verify.textfile import check_path

        check_path(prometheus)
    if inventory is not None or fleet is not None:
        if inputs is not None:
            raise ProvisionError(
                "--inputs replays one machine's saved inputs; it does not go with -i/--fleet"
            )
        runs = runs_dir or default_runs_dir()
        raise typer.Exit(
            _fleet_verify(spec, inventory, fleet, limit, forks, save_raw, as_json, junit, prometheus, runs)
        )
    if spec is None:
        raise ProvisionError(
            "give a SPEC, or an inventory (-i) or fleet file (--fleet) that maps hosts to specs"
        )
    verified = run_verify(
        spec, inputs_file=inputs, save_raw=save_raw, runs_dir=runs_dir or default_runs_dir()
    )
    report = verified.report
    code = emit(verified, out, as_json, junit)
    if prometheus is not None:
        from provision.verify.textfile import write_textfile

        write_textfile(prometheus, {report.host: report})
    if inputs is None:  # a replay says nothing about the machine as it is now
        from provision import app as workflow

        _record_verify(None, {report.host: (report, workflow.spec_from(spec)[0])}, as_json)
    raise typer.Exit(code)


def _record_verify(inventory: Path | None, reports: dict[str, tuple[Any, Any]], as_json: bool) -> None:
    """Record each host's verify result in its current lock (`provision lock show` prints it)."""
    from provision.lock.record import record_verify, show_verify_recorded, verify_result

    results = {host: verify_result(report, spec) for host, (report, spec) in reports.items()}
    show_verify_recorded(record_verify(inventory, results), err if as_json else out)


def _fleet_verify(
    spec: Path | None,
    inventory: Path | None,
    fleet: Path | None,
    limit: str | None,
    forks: int | None,
    save_raw: Path | None,
    as_json: bool,
    junit: Path | None,
    prometheus: Path | None = None,
    runs_dir: Path | None = None,
) -> int:
    from provision.fleet import commands as fleet_commands
    from provision.fleet.orchestrate import held_hosts
    from provision.fleet.verify import verify_fleet
    from provision.fleet.verify_report import emit_fleet

    hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks)
    verified = verify_fleet(hosts, forks, save_raw=save_raw, runs_dir=runs_dir)
    if prometheus is not None:
        from provision.verify.textfile import write_textfile

        write_textfile(prometheus, {h: v.report for h, v in verified.hosts.items()})
    code = emit_fleet(verified, out, as_json, junit)
    held = held_hosts(hosts)[0]
    reached = {h: (v.report, held.specs[h].spec) for h, v in verified.hosts.items() if v.unreachable is None}
    if reached:
        _record_verify(held.inventory, reached, as_json)
    return code
