"""Held-out measurement: does the product name the cause of failures it was never fixed for?

Every directory of ``tests/fixtures/heldout-variants`` is the real H200 capture overlaid with the
probe files one failure class changes (its README says which, and the public report they follow).
None of them is a variant of FF-01..FF-16 (``docs/field-failures.md``), and none was written to
fix the product: they measure it. Planned against the spec, the plan must carry the expected
finding (``expect``: a rule id, ``*`` for any finding, or for ``kind: step`` a non-noop step's
component) whose text contains ``words`` and whose source names a public document. A variant with
``known_miss`` is recorded as ``xfail(strict=True)``, so the gap stays visible and a fix shows up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.detect.registry import BY_ID
from provision.plan.models import Plan
from tests.unit.factories import ROOT
from tests.unit.variants import RAW, meta, plan_of, variants

HELDOUT = ROOT / "tests" / "fixtures" / "heldout-variants"
CITES = ("https://", "User Guide", "Installation Guide", "release notes")
"""What a source names: a URL, or a vendor document by its title."""
VARIANTS = variants(HELDOUT)


def explanations(plan: Plan, m: dict[str, Any]) -> list[tuple[str, str]]:
    """(text, source) of every finding or step the variant's ``expect`` selects."""
    if m["kind"] == "step":
        steps = [s for s in plan.steps if s.component.value == m["expect"] and s.action.value != "noop"]
        return [(s.reason, s.reason) for s in steps]
    found = (*plan.blockers, *plan.warnings)
    return [(f.message, f.source) for f in found if m["expect"] in ("*", f.rule)]


def names_cause(text: str, source: str, words: list[str]) -> bool:
    return all(w.lower() in text.lower() for w in words) and any(c in source for c in CITES)


def _param(variant: Path) -> Any:
    m = meta(variant)
    if "known_miss" not in m:
        return pytest.param(variant, id=variant.name)
    miss = pytest.mark.xfail(strict=True, reason=f"not caught yet: {m['known_miss']}")
    return pytest.param(variant, marks=[miss], id=variant.name)


def test_heldout_variants_are_derived_and_sourced() -> None:
    assert len(VARIANTS) >= 8
    for variant in VARIANTS:
        m = meta(variant)
        assert (RAW / m["base"]).is_dir() and (ROOT / m["spec"]).is_file(), variant.name
        assert m["source"].startswith("https://") and m["kind"] in ("finding", "step"), variant.name
        readme = (variant / "README.md").read_text()
        assert "Derived, not captured" in readme and m["source"] in readme, variant.name
        changed = {probe.stem for probe in variant.glob("*.txt")}
        assert changed and changed <= set(BY_ID), f"{variant.name}: {sorted(changed - set(BY_ID))}"


@pytest.mark.parametrize("variant", [_param(v) for v in VARIANTS])
def test_heldout_variant_names_the_cause(variant: Path, tmp_path: Path) -> None:
    m = meta(variant)
    got = explanations(plan_of(variant, tmp_path), m)
    assert got, f"no {m['expect']} {m['kind']} in the plan"
    assert any(names_cause(text, source, m["words"]) for text, source in got), (
        f"{m['expect']} does not name {m['words']} with a source: {got}"
    )
