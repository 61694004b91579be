"""``provision detect`` and ``provision import``: reading machines as they are."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from provision.cli.base import (
    FleetOpt,
    ForksOpt,
    InvOpt,
    JsonOpt,
    LimitOpt,
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
from provision.errors import ProvisionError


@cli.command()
@user_errors()
def detect(
    spec: Annotated[
        Path | None, typer.Argument(help="Optional spec: its venv is probed for PyTorch.", readable=False)
    ] = None,
    *,
    as_json: JsonOpt = False,
    from_raw: RawOpt = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    save_raw: Annotated[
        Path | None,
        typer.Option(
            "--save-raw",
            help="Also write every probe's raw output to this directory (a support bundle); with -i or "
            "--fleet one DIR/<host>/ per host, which `plan -i INVENTORY --from-raw DIR` plans offline.",
            readable=False,
        ),
    ] = None,
    forks: ForksOpt = None,
) -> None:
    """Read the machine as it is: OS, kernel, driver, GPUs, topology, packages, CUDA, PyTorch."""
    _check_outputs(directories={"--save-raw": save_raw})
    preloaded = _start_probes(spec) if from_raw is None and inventory is None and fleet is None else None
    from provision import app as workflow
    from provision.detect.summary import render_facts

    if from_raw is not None and (inventory is not None or fleet is not None):
        raise ProvisionError(
            "detect --from-raw reads one raw directory; for an inventory's saved hosts use "
            "`provision plan -i INVENTORY --from-raw DIR`"
        )
    loaded = preloaded or (workflow.spec_from(spec)[0] if spec else None)
    spec_failed: dict[str, str] = {}
    if fleet is not None:
        from provision.fleet import commands as fleet_commands

        hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks, save_raw=save_raw)
        facts, spec_failed = fleet_commands.detect_facts(hosts)
    else:
        target = workflow.Target(from_raw=from_raw, inventory=inventory, limit=limit, forks=forks)
        facts = workflow.gather(loaded, target, save_raw)
    remote = inventory is not None or fleet is not None
    lost = _undetected(facts, spec_failed) if remote else {}
    if as_json:
        from provision.jsonout import HOSTS_FORMAT

        docs = [f.model_dump(mode="json") for f in facts.values()]  # each has "host" first
        _emit_json({"format_version": HOSTS_FORMAT, "hosts": docs, "unreachable": lost})
    else:
        for f in facts.values():
            render_facts(f, out)
    for host, reason in lost.items():
        err.print(f"[red]{escape(host)}: {escape(reason)}[/]", soft_wrap=True)
    if lost:
        raise typer.Exit(1)  # as plan's fleet form: a host that could not be detected fails the command


@cli.command("import")
@user_errors()
def import_(
    *,
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write the spec here (and its lock beside it, NAME.lock.json); with -i a directory for "
            "fleet.yaml, specs/ and locks/. Without it the spec is printed.",
            readable=False,
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace files that exist.")] = False,
    as_json: JsonOpt = False,
    facts: Annotated[
        Path | None, typer.Option("--facts", help="Import from `detect --json` output.", readable=False)
    ] = None,
    from_raw: Annotated[
        Path | None,
        typer.Option(
            "--from-raw",
            help="Import from a raw probe directory (`detect --save-raw DIR`); with -i, DIR/<host>/ "
            "per host.",
            readable=False,
        ),
    ] = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    forks: ForksOpt = None,
    venv: Annotated[
        str | None,
        typer.Option(
            "--venv",
            help="The venv to import (default: this machine's first venv with torch under /opt, /srv).",
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="The spec's name (default: from its shape).")
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option(
            "--gpus",
            help="MODEL[:COUNT]: the GPUs where the facts cannot name them (no driver loaded yet, a model "
            "lspci alone does not tell); `provision catalog gpus` lists the models.",
        ),
    ] = None,
) -> None:
    """Write the spec of the machine as it is, so that `provision plan` on it shows no changes.

    Each chosen value has a comment saying why (the loaded module's flavour, the package that shows
    the driver's source, a value left out and what keeping it would change). With an inventory
    (-i), one spec per distinct machine shape and a fleet file mapping hosts to them. Exit 0 when
    every plan on the written specs is empty, 2 when one still shows changes (listed), 1 when
    nothing could be written or a host could not be imported.
    """
    from provision.importing.command import gpus_option, run
    from provision.importing.workflow import Source

    source = Source(facts, from_raw, inventory, limit, forks, venv, name, gpus_option(gpus))
    raise typer.Exit(run(source, out_path, force, as_json, err))
