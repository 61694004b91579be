"""The product names the cause on field failures it was not written for.

Every directory of ``tests/fixtures/ff-variants`` is a real capture overlaid with the probe files an
unlisted variant of a field failure changes (its README says which, and the public report they
follow). Planned against its spec, the plan must carry the expected finding (or step), whose text
names the cause and cites a public source. Variants marked ``known_miss`` are expected to fail,
strictly, so a fix shows up here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.detect.registry import BY_ID
from provision.plan.models import Plan
from tests.unit.factories import ROOT
from tests.unit.variants import RAW, meta, plan_of, variants

CITES = ("https://", "docs/field-failures.md", "FF-", "release notes", "User Guide", "RELEASE.md")
"""What a source names: a URL, a field-failure entry, or a vendor document by its title."""
FF_VARIANTS = ROOT / "tests" / "fixtures" / "ff-variants"
VARIANTS = variants(FF_VARIANTS)


def explanation(plan: Plan, m: dict[str, Any]) -> tuple[str, str]:
    """(text, source) of the finding or step the variant expects; AssertionError when absent."""
    if m.get("kind") == "step":
        steps = [s for s in plan.steps if s.component.value == m["expect"] and s.action.value != "noop"]
        assert steps, f"no planned {m['expect']} step in {[s.component.value for s in plan.steps]}"
        return steps[0].reason, steps[0].reason
    found = [f for f in (*plan.blockers, *plan.warnings) if f.rule == m["expect"]]
    assert found, f"no {m['expect']} in {[f.rule for f in (*plan.blockers, *plan.warnings)]}"
    return found[0].message, found[0].source


def test_every_variant_names_its_base_field_failure_and_source() -> None:
    assert len(VARIANTS) >= 16
    for variant in VARIANTS:
        m = meta(variant)
        assert (RAW / m["base"]).is_dir(), variant.name
        assert 1 <= m["ff"] <= 16 and m["source"].startswith("https://"), variant.name
        assert "Derived, not captured" in (variant / "README.md").read_text(), variant.name
        changed = {probe.stem for probe in variant.glob("*.txt")}
        assert changed and changed <= set(BY_ID), f"{variant.name}: {sorted(changed - set(BY_ID))}"


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_variant_names_the_cause(variant: Path, tmp_path: Path) -> None:
    m = meta(variant)
    try:
        text, source = explanation(plan_of(variant, tmp_path), m)
        missing = [w for w in m["words"] if w.lower() not in text.lower()]
        assert not missing, f"{m['expect']} does not name {missing}: {text}"
        assert any(cite in source for cite in CITES), f"no public source in: {source}"
    except AssertionError:
        if "known_miss" in m:
            pytest.xfail(m["known_miss"])
        raise
    assert "known_miss" not in m, f"{variant.name} is now explained: drop its known_miss"
