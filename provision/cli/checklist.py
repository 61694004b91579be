"""``provision checklist``: the BIOS and hardware checklist, per host."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import typer
from rich.markup import escape

from provision.cli.base import (
    FleetOpt,
    ForksOpt,
    InvOpt,
    LimitOpt,
    MappedSpecArg,
    RawOpt,
    _check_outputs,
    cli,
    err,
    out,
    user_errors,
)
from provision.cli.spec import _check_bios
from provision.errors import ProvisionError


@cli.command()
@user_errors()
def checklist(
    spec: MappedSpecArg = None,
    *,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="md (terminal), html (printable) or pdf (headless Chromium); default: from the "
            "--output file's extension (.pdf, .html), else md.",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to this file (a directory when there are several hosts).",
            readable=False,
        ),
    ] = None,
    paper: Annotated[str, typer.Option("--paper", help="a4 or letter (HTML and PDF).")] = "a4",
    facts: Annotated[
        Path | None,
        typer.Option(
            "--facts",
            help="Show each item's state from `detect --json` output (one document per host).",
            readable=False,
        ),
    ] = None,
    from_raw: RawOpt = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="The host the document is for: picks it from a multi-host --facts file, names the host of "
            "--from-raw DIR, or names this machine (localhost or its host name) to probe it here; any other "
            "host is refused (its facts come from --facts, --from-raw or -i INVENTORY -l HOST).",
        ),
    ] = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    forks: ForksOpt = None,
) -> None:
    """The BIOS and hardware checklist: the manual steps, and what this host's Linux shows for each.

    Without --facts, --from-raw or --host naming this machine, it is the blank paper checklist.
    With an inventory (-i) or a fleet file, every host is detected through Ansible (or read from
    --from-raw DIR/<host>/, as `plan -i INVENTORY --from-raw DIR`) and -o DIR gets one document
    per host (its own spec, or SPEC for all) and an index with per-host counts.
    """
    from rich.markdown import Markdown

    from provision import app as workflow
    from provision.catalog import load_catalog
    from provision.checklist import Format, render_documents, write_documents
    from provision.checklist.sources import checklist_facts

    fmt = _format(fmt, output)
    if fmt not in ("md", "html", "pdf"):
        raise ProvisionError(f"--format {fmt}: choose md, html or pdf")
    if paper not in ("a4", "letter"):
        raise ProvisionError(f"--paper {paper}: choose a4 or letter")
    if output is None and fmt == "pdf":
        raise ProvisionError("--format pdf needs -o/--output FILE")
    _check_checklist_output(output, several=inventory is not None or fleet is not None)
    if inventory is not None or fleet is not None:
        if facts is not None:
            raise ProvisionError(
                "--facts reads one host's facts; with -i or --fleet give --from-raw DIR "
                "(`detect -i INVENTORY --save-raw DIR`)"
            )
        if host is not None:
            raise ProvisionError(f"--host names one machine; with -i or --fleet choose hosts with -l {host}")
        _fleet_checklist(spec, inventory, fleet, limit, output, cast(Format, fmt), paper, forks, from_raw)
        return
    if spec is None:
        raise ProvisionError(
            "give a SPEC, or an inventory (-i) or fleet file (--fleet) that maps hosts to specs"
        )
    workflow.refuse_contradictions(workflow.Target(facts_file=facts, from_raw=from_raw))
    loaded, saved_plan = workflow.spec_from(spec)
    if saved_plan is None:
        _check_bios(loaded, spec)
    catalog = load_catalog()
    _refuse_invalid_spec(loaded, catalog, spec)
    gpu = catalog.gpus.get(loaded.gpus.model)
    by_host, origin = checklist_facts(facts, from_raw, host)
    documents = render_documents(
        loaded,
        cast(Format, fmt),
        cast(Literal["a4", "letter"], paper),
        by_host,
        facts_from=origin,
        host=host,
        gpu_tdp_w=gpu.tdp_w if gpu else None,
        gpu_memory_gib=gpu.memory_gib if gpu else None,
        catalog=catalog,
    )
    if output is not None:
        for path in write_documents(documents, output, cast(Format, fmt)):
            err.print(f"Wrote {path}")
        return
    if fmt == "html" and len(documents) > 1:
        raise ProvisionError("one HTML document per host: give --output DIR, or --host to pick one")
    for text in documents.values():
        if fmt == "md" and out.is_terminal:
            out.print(Markdown(str(text)))
        else:  # piped Markdown stays Markdown, for a file or another renderer
            sys.stdout.write(str(text))


_BY_SUFFIX = {".pdf": "pdf", ".html": "html", ".htm": "html", ".md": "md"}


def _format(fmt: str | None, output: Path | None) -> str:
    """The format given, else the one the output file's extension names (md without either).

    Raises:
        ProvisionError: ``--format`` contradicts the extension (``-f md -o list.pdf``), which would
            write one format under another's name.
    """
    named = _BY_SUFFIX.get(output.suffix.lower()) if output is not None else None
    if fmt is None:
        return named or "md"
    if named is not None and named != fmt:
        raise ProvisionError(f"--format {fmt} but --output {output} names {named}: give one that agrees")
    return fmt


def _check_checklist_output(output: Path | None, several: bool) -> None:
    """``-o``: a directory for a fleet's documents (created), else a file or an existing directory."""
    if output is not None and (several or output.is_dir()):
        _check_outputs(directories={"--output": output})
    else:
        _check_outputs(files={"--output": output})


def _refuse_invalid_spec(loaded: Any, catalog: Any, path: Path) -> None:
    """One line for a spec `provision validate` refuses: its checklist would print wrong figures."""
    from provision.plan.validate import validate_spec

    blockers = [f for f in validate_spec(loaded, catalog) if f.severity == "blocker"]
    if blockers:
        first = blockers[0]
        more = f" (and {len(blockers) - 1} more)" if len(blockers) > 1 else ""
        raise ProvisionError(
            f"{path}: refused [{first.rule}] {first.message}{more}; `provision validate {path}` lists them"
        )


def _fleet_checklist(
    spec: Path | None,
    inventory: Path | None,
    fleet: Path | None,
    limit: str | None,
    output: Path | None,
    fmt: Literal["md", "html", "pdf"],
    paper: str,
    forks: int | None = None,
    from_raw: Path | None = None,
) -> None:
    from provision.fleet import commands as fleet_commands
    from provision.fleet.checklist import write_fleet_checklists
    from provision.fleet.summary import print_unreachable

    if output is None:
        raise ProvisionError("a fleet checklist is one document per host: give --output DIR")
    hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks, from_raw=from_raw)
    written = write_fleet_checklists(hosts, fmt, cast(Literal["a4", "letter"], paper), output)
    for path in written.paths:
        err.print(f"Wrote {path}")
    for host, reason in written.unreachable.items():  # its document observes nothing: as plan says it
        print_unreachable(err, host, reason)
    for host, reason in written.failed.items():  # no document: its spec could not be loaded
        err.print(f"[red]{escape(host)}: {escape(reason)}[/]", soft_wrap=True)
    if written.failed or written.unreachable:
        raise typer.Exit(1)
