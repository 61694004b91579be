"""Planner rules over real captures edited into a failing state (tests/fixtures/plans/).

Each case (``tests/unit/captures.py`` for capture, edits and spec edits) names the plan's day
(``as_of``, none: not judged) and what the plan must say: ``blockers``, exactly the refusals' rule
ids; ``warnings``, rule ids that must be among the warnings; ``absent``, rule ids that must not be
there at all; ``words``, per rule id, words its message must contain; ``steps``, when given,
exactly the changing steps (component: action); ``reboot``, when given, whether the plan
reboots; ``extravars``, a dotted path into the plan's
variables for the playbooks (``provision_python.constraints``) and the value it must have.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from provision.catalog import load_catalog
from provision.plan.planner import make_plan
from tests.unit.captures import FIXTURES, edited_facts, edited_spec, read_case

CASES = sorted((FIXTURES / "plans").glob("*.yaml"))
CATALOG = load_catalog()


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_plan_case(path: Path) -> None:
    case = read_case(path)
    assert case["description"], "say what was edited"
    as_of = date.fromisoformat(str(case["as_of"])) if case.get("as_of") else None
    plan = make_plan(edited_spec(case), edited_facts(case), CATALOG, as_of=as_of)
    findings = {f.rule: f for f in (*plan.blockers, *plan.warnings)}
    assert sorted(b.rule for b in plan.blockers) == sorted(case.get("blockers", [])), plan.blockers
    warnings = {w.rule for w in plan.warnings}
    assert set(case.get("warnings", [])) <= warnings, plan.warnings
    assert not set(case.get("absent", [])) & set(findings), [
        findings[r] for r in case["absent"] if r in findings
    ]
    for rule, words in (case.get("words") or {}).items():
        for word in words:
            assert word in findings[rule].message, findings[rule]
    if "steps" in case:
        changing = {s.component.value: s.action.value for s in plan.changes}
        assert changing == case["steps"]
    if "reboot" in case:
        assert plan.reboot_required is case["reboot"], [
            s.reason for s in plan.steps if s.action.value == "reboot"
        ]
    for dotted, expected in (case.get("extravars") or {}).items():
        value: Any = plan.extravars
        for key in dotted.split("."):
            value = value[key]
        assert value == expected, dotted


def test_every_case_names_a_rule_it_exercises() -> None:
    for path in CASES:
        case = read_case(path)
        assert case.get("blockers") or case.get("warnings") or case.get("absent") or case.get("extravars"), (
            path.name
        )
