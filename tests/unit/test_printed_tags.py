"""What plan and verify print names documents, not the catalog's source keys.

A source key (``FMUG``, ``GDC``, ``RN132``) is the catalog's handle for a document: rows and
findings carry it next to the document's citation (``provision catalog`` resolves it), but a plan
step's reason or a check's detail printed alone with ``(FMUG)`` names nothing a user can open.
Planned over every captured machine and replayed over every captured verify input.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from provision.catalog import load_catalog
from tests.unit.factories import ROOT, invoke, one_plan, one_report

RAW = ROOT / "tests" / "fixtures" / "raw"
SPECS = sorted(str(p) for p in (ROOT / "specs").glob("*.yaml"))
KEYS = sorted(load_catalog().sources, key=len, reverse=True)
BARE_KEY = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, KEYS)) + r")(?![\w-])")
"""A source key as a word of its own (``FF-02`` is a field failure's name, not the key ``FF``)."""


def _bare_keys(text: str) -> list[str]:
    return BARE_KEY.findall(text)


@pytest.mark.parametrize("raw", sorted(p.name for p in RAW.iterdir() if p.is_dir()))
@pytest.mark.parametrize("spec", SPECS, ids=[Path(s).stem for s in SPECS])
def test_plan_step_reasons_name_no_source_key(spec: str, raw: str) -> None:
    result = invoke("plan", spec, "--from-raw", str(RAW / raw), "--json")
    plan = one_plan(json.loads(result.stdout))
    reasons = [step["reason"] for step in plan["steps"]]
    assert reasons, result.output
    assert [(r, _bare_keys(r)) for r in reasons if _bare_keys(r)] == []


@pytest.mark.parametrize(
    ("spec", "inputs"),
    [
        ("h200-ubuntu2404.yaml", "h200-ubuntu2404-2026-12-01"),
        ("h200x2-ubuntu2404.yaml", "h200x2-ubuntu2404"),
    ],
)
def test_verify_details_and_hints_name_no_source_key(spec: str, inputs: str) -> None:
    path = ROOT / "tests" / "fixtures" / "verify" / inputs / "inputs.json"
    result = invoke("verify", str(ROOT / "specs" / spec), "--inputs", str(path), "--json")
    report = one_report(json.loads(result.stdout))
    texts = [r.get(k) or "" for r in report["results"] for k in ("detail", "hint")]
    assert [(t, _bare_keys(t)) for t in texts if _bare_keys(t)] == []
