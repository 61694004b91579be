"""Real captures edited into a failing state: the shared part of the invariant and plan cases.

A case names a capture (a ``detect --save-raw`` directory under ``tests/fixtures/raw``), the exact
text replaced in its probe outputs (``edits``: probe -> ``[[old, new], ...]``, each must match at
least once; a probe may also be dropped with ``drop: [probe, ...]``, and one the capture predates
added with ``add: {probe: {command, output, rc}}`` in that probe's own output format) and the spec
edits (``spec``: nested keys merged into the spec file, then validated as a spec).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from provision.detect.facts import Facts
from provision.detect.raw import ProbeOutput, read_raw
from provision.detect.registry import facts_from_outputs
from provision.spec.loader import load_spec
from provision.spec.models import Spec

FIXTURES = Path(__file__).parents[1] / "fixtures"
SPECS = Path(__file__).parents[2] / "specs"
CAPTURE = "h200-ubuntu2404-2026-12-01"


def read_case(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    return data


def edited_facts(case: dict[str, Any]) -> Facts:
    """The case's capture with its edits applied, parsed as detection parses it."""
    capture = case.get("capture", CAPTURE)
    outputs = read_raw(FIXTURES / "raw" / capture)
    for probe in case.get("drop") or ():
        del outputs[probe]
    for probe, added in (case.get("add") or {}).items():
        assert probe not in outputs, f"{probe} is in the capture: edit it instead"
        outputs[probe] = ProbeOutput(command=added["command"], output=added["output"], rc=added.get("rc", 0))
    for probe, edits in (case.get("edits") or {}).items():
        out = outputs[probe]
        text = f"{out.output}[exit {out.rc}]"
        for old, new in edits:
            assert old in text, f"edit of {probe} matches nothing: {old[:60]!r}"
            text = text.replace(old, new)
        body, _, rc = text.rpartition("[exit ")
        outputs[probe] = ProbeOutput(command=out.command, output=body, rc=int(rc.rstrip("]\n")))
    return facts_from_outputs(outputs, host=case.get("host", "h200"))


def edited_spec(case: dict[str, Any]) -> Spec:
    """The case's spec file (default the H200's) with its ``spec`` edits merged in and validated."""
    spec = load_spec(SPECS / case.get("spec_file", "h200-ubuntu2404.yaml"))
    edits = case.get("spec") or {}
    if not edits:
        return spec
    return Spec.model_validate(_merge(spec.model_dump(mode="json", exclude_none=True), edits))


def _merge(base: dict[str, Any], edits: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in edits.items():
        old = merged.get(key)
        merged[key] = _merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged
