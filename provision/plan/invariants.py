"""The invariants as plan findings: a violation the plan does not repair is a warning (or a
refusal) with what was observed and the fix; an invariant that cannot be judged says why."""

from __future__ import annotations

from provision.catalog import Catalog
from provision.detect.facts import Facts
from provision.findings import Finding
from provision.invariants.base import Invariant, Verdict
from provision.invariants.registry import INVARIANTS
from provision.spec.models import Spec


def invariant_findings(spec: Spec, facts: Facts, catalog: Catalog) -> tuple[Finding, ...]:
    """One finding per invariant that is violated (and not repaired by a step) or not judgeable."""
    found = (_finding(i, i.judge(spec, facts, catalog)) for i in INVARIANTS)
    return tuple(f for f in found if f is not None)


def _finding(invariant: Invariant, verdict: Verdict) -> Finding | None:
    rule = f"invariant-{invariant.id}"
    if verdict.status == "violated" and not invariant.repaired_by_plan:
        return Finding(
            rule=rule,
            severity=invariant.severity,
            message=f"{invariant.title}: {verdict.observed}: {verdict.cause}; {verdict.fix}",
            source=invariant.source,
        )
    if verdict.status == "unknown":
        return Finding(
            rule=rule,
            severity="warning",
            message=f"cannot confirm {invariant.title}: {verdict.cause}",
            source=invariant.source,
        )
    return None
