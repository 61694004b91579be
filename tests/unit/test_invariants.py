"""Invariants over the real H200 capture edited into failing states (tests/fixtures/invariants/).

Each case checks every invariant's verdict (exactly the listed ones are violated or unknown),
the plan's changing steps and warnings, and that verify's failing invariant checks, with their
hints, are exactly those whose cause the edit put there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.catalog import load_catalog
from provision.detect.facts import Facts
from provision.detect.raw import read_raw
from provision.detect.registry import facts_from_outputs
from provision.invariants.hardware import MEMORY_LOW
from provision.invariants.registry import INVARIANTS, judge_all
from provision.plan.planner import make_plan
from provision.spec.loader import load_spec
from provision.spec.models import Spec
from provision.verify.limits import default, load_limits
from provision.verify.runs import VerifyInputs
from provision.verify.workflow import evaluate
from tests.unit.captures import edited_facts, edited_spec, read_case

FIXTURES = Path(__file__).parents[1] / "fixtures"
INPUTS = FIXTURES / "verify" / "h200-ubuntu2404-2026-12-01" / "inputs.json"
CASES = sorted((FIXTURES / "invariants").glob("*.yaml"))
SPEC = Path(__file__).parents[2] / "specs" / "h200-ubuntu2404.yaml"
CATALOG = load_catalog()


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_invariant_case(path: Path) -> None:
    case = read_case(path)
    assert case["description"], "say what was edited"
    facts, spec = edited_facts(case), edited_spec(case)
    verdicts = {v.invariant: v for v in judge_all(spec, facts, CATALOG)}
    assert sorted(i for i, v in verdicts.items() if v.violated) == sorted(case["violated"])
    assert sorted(i for i, v in verdicts.items() if v.status == "unknown") == sorted(case.get("unknown", []))
    for verdict in verdicts.values():
        if verdict.violated:
            assert verdict.observed and verdict.cause and verdict.fix, verdict
    _check_plan(case, spec, facts)
    _check_verify(case, spec, facts)


def _check_plan(case: dict[str, Any], spec: Spec, facts: Facts) -> None:
    plan = make_plan(spec, facts, CATALOG)
    changing = {s.component.value: s.action.value for s in plan.steps if s.action.value != "noop"}
    assert changing == case["plan"]["steps"]
    invariant_rules = sorted(w.rule for w in plan.warnings if w.rule.startswith("invariant-"))
    assert invariant_rules == sorted(case["plan"].get("warnings", []))
    assert sorted(b.rule for b in plan.blockers) == sorted(case["plan"].get("blockers", []))
    if "uninstall" in case["plan"]:
        assert plan.role_vars("python_env")["python_env_uninstall"] == case["plan"]["uninstall"]
    if "blacklist" in case["plan"]:
        text = plan.role_vars("nvidia_kernel")["nvidia_kernel_blacklist"]
        assert [line.split()[1] for line in text.splitlines() if line.startswith("blacklist ")] == case[
            "plan"
        ]["blacklist"]


def _check_verify(case: dict[str, Any], spec: Spec, facts: Facts) -> None:
    saved = FIXTURES / "verify" / case["inputs"] if "inputs" in case else INPUTS
    inputs = VerifyInputs.model_validate_json(saved.read_text()).model_copy(update={"facts": facts})
    results = {r.id: r for r in evaluate(spec, inputs, CATALOG, load_limits())}
    ids = {i.check_id for i in INVARIANTS if i.verify_check is None}
    failing = {i: r for i, r in results.items() if i in ids and r.status in ("fail", "warn")}
    assert sorted(failing) == sorted(case["verify"])
    if "gpu-memory" in case["violated"]:
        assert any(r.status == "fail" for i, r in results.items() if i.startswith("gpu-memory"))
    for check_id, word in case["verify"].items():
        assert word in (failing[check_id].hint or ""), failing[check_id]
        expected = "warn" if check_id in case.get("warn", []) else "fail"
        assert failing[check_id].status == expected


@pytest.mark.parametrize("capture", ["h200-ubuntu2404", "h200x2-ubuntu2404"])
def test_the_real_captures_hold_every_invariant_they_can_judge_and_plan_no_change(capture: str) -> None:
    facts = facts_from_outputs(read_raw(FIXTURES / "raw" / f"{capture}-2026-12-01"), host=capture)
    spec = load_spec(SPEC.parent / f"{capture}.yaml")
    verdicts = judge_all(spec, facts, CATALOG)
    # one GPU in a VM has no NVSwitch fabric (State N/A); the two-GPU VM's fabric is Completed
    no_fabric = {"fabric-registered": "not-applicable"} if capture == "h200-ubuntu2404" else {}
    # the VMs boot a kernel no package installed: no packaged kernel to hold a module for
    assert {v.invariant: v.status for v in verdicts if v.status != "holds"} == {
        "blacklist-in-initramfs": "not-applicable",
        "module-for-every-kernel": "not-applicable",
        **no_fabric,
    }
    plan = make_plan(spec, facts, CATALOG)
    assert not plan.changes and not plan.blockers
    assert not [w.rule for w in plan.warnings if w.rule.startswith("invariant")]


def test_memory_floor_is_verify_s() -> None:
    assert default(load_limits(), "memory_fraction").value == MEMORY_LOW


def test_every_invariant_has_a_case_that_violates_it() -> None:
    violated = {i for path in CASES for i in read_case(path)["violated"]}
    assert {i.id for i in INVARIANTS} <= violated
