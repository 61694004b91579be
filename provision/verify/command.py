"""The ``provision verify`` workflow behind the CLI: load, detect, collect, check, print, exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from provision.catalog import load_catalog
from provision.errors import FactsError
from provision.output import write_output
from provision.spec.loader import load_spec
from provision.verify.limits import shipped_limits
from provision.verify.models import Report
from provision.verify.render import junit_xml, render_table
from provision.verify.runs import VerifyInputs
from provision.verify.workflow import verify


def read_inputs(path: Path) -> VerifyInputs:
    """Inputs saved by ``verify --save-raw`` (``inputs.json``).

    Raises:
        FactsError: Missing file or not a verify inputs document.
    """
    try:
        return VerifyInputs.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FactsError(f"{path}: no such verify inputs file") from None
    except ValidationError as exc:
        raise FactsError(f"{path}: not a verify inputs file ({str(exc).splitlines()[0]})") from None


def run_verify(spec_path: Path, inputs_file: Path | None = None, save_raw: Path | None = None) -> Report:
    """Verify this machine against the spec (or replay saved inputs)."""
    from provision.detect.runner import detect_local

    spec = load_spec(spec_path)
    inputs = read_inputs(inputs_file) if inputs_file is not None else None
    facts = inputs.facts if inputs else detect_local(venv=spec.python.venv if spec.python else None)
    return verify(
        spec, str(spec_path), facts, load_catalog(), shipped_limits(), inputs=inputs, save_raw=save_raw
    )


def emit(report: Report, console: Console, as_json: bool, junit: Path | None) -> int:
    """Print the table or JSON, write JUnit XML if asked; the exit code: 1 when a check failed."""
    if as_json:
        doc = report.model_dump(mode="json") | {"counts": report.counts(), "failed": report.failed}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_table(report, console)
    if junit is not None:
        write_output(junit, junit_xml(report))
    return 1 if report.failed else 0
