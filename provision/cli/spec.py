"""``provision validate``, ``schema`` and ``catalog``: the spec and what it may name."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.markup import escape

from provision.errors import ProvisionError

if TYPE_CHECKING:
    from provision.spec.models import Spec

from provision.cli.base import (
    JsonOpt,
    SpecArg,
    _emit_json,
    cli,
    err,
    out,
    user_errors,
)


@cli.command()
@user_errors(spec_error_code=2)
def validate(spec: SpecArg, *, as_json: JsonOpt = False) -> None:
    """Check a spec: YAML syntax, fields and types, and the compatibility rules.

    Exit 0 when valid, 2 when the file is not a valid spec, 1 when a rule refuses it.
    """
    from provision.catalog import load_catalog
    from provision.plan.validate import validate_spec
    from provision.spec.loader import load_spec

    loaded = load_spec(spec)
    _check_bios(loaded, spec)
    findings = validate_spec(loaded, load_catalog())
    refused = any(f.severity == "blocker" for f in findings)
    if as_json:
        found = [f.model_dump() for f in findings]
        _emit_json({"spec": str(spec), "valid": not refused, "findings": found})
    else:
        for f in findings:
            line = f"{spec}: {f.severity} [{f.rule}]: {f.message} (source: {f.source})"
            (err if f.severity == "blocker" else out).print(escape(line), soft_wrap=True)
        if not refused:
            out.print(f"{spec}: valid")
    if refused:
        raise typer.Exit(1)


@cli.command()
@user_errors()
def schema() -> None:
    """Print the spec's JSON Schema (point your editor's YAML language server at it)."""
    from provision.spec.schema import spec_schema

    sys.stdout.write(json.dumps(spec_schema(), indent=2) + "\n")


@cli.command()
@user_errors()
def catalog(
    table: Annotated[
        str | None,
        typer.Argument(
            help="gpus, drivers, cuda, torch, vllm or monitoring; all of them when left out.",
            show_default=False,
        ),
    ] = None,
    *,
    as_json: JsonOpt = False,
) -> None:
    """List what a spec may name: GPU models, driver branches, CUDA releases, PyTorch and vLLM releases,
    DCGM releases (each with its paired dcgm-exporter)."""
    from provision.catalog import load_catalog
    from provision.catalog.listing import TABLES, listing, render_listing

    if table is not None and table not in TABLES:
        raise ProvisionError(f"no catalog table {table!r}; choose one of {', '.join(TABLES)}")
    chosen = TABLES if table is None else (cast(Any, table),)
    data = listing(load_catalog(), chosen)
    if as_json:
        _emit_json(data)
    else:
        render_listing(data, out)


def _check_bios(loaded: Spec, path: Path) -> None:
    """The spec's ``bios:`` checked, located, as the checklist will read it
    (:func:`provision.checklist.items.check_bios`); its defaults are loaded only when the spec
    changes the checklist."""
    if loaded.bios.items or loaded.bios.skip:
        from provision.checklist.items import check_bios

        check_bios(loaded, path)
