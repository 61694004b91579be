"""The invariants as plan findings: a violation the plan does not repair is a warning (or a
refusal) with what was observed and the fix; invariants that cannot be judged are said, one
warning per reason (a box without a driver yet gives one line, not one per GPU invariant)."""

from __future__ import annotations

from collections.abc import Mapping

from provision.findings import Finding
from provision.invariants.base import Invariant, Verdict
from provision.invariants.registry import INVARIANTS

UNCONFIRMED = "invariant-unconfirmed"


def invariant_findings(verdicts: Mapping[str, Verdict]) -> tuple[Finding, ...]:
    """Violations not repaired by a step, then one warning per reason some invariants cannot be judged.

    Args:
        verdicts: Every invariant's verdict by id (``PlanContext.verdicts``).
    """
    judged = [(i, verdicts[i.id]) for i in INVARIANTS]
    violations = [_violation(i, v) for i, v in judged if v.violated and not v.repaired]
    return (*violations, *_unconfirmed([(i, v) for i, v in judged if v.status == "unknown"]))


def _violation(invariant: Invariant, verdict: Verdict) -> Finding:
    return Finding(
        rule=f"invariant-{invariant.id}",
        severity=invariant.severity,
        message=f"{invariant.title}: {verdict.observed}: {verdict.cause}; {verdict.fix}",
        source=verdict.source or invariant.source,
    )


def _unconfirmed(unknown: list[tuple[Invariant, Verdict]]) -> list[Finding]:
    by_cause: dict[str, list[tuple[Invariant, Verdict]]] = {}
    for invariant, verdict in unknown:
        by_cause.setdefault(verdict.cause, []).append((invariant, verdict))
    return [
        Finding(
            rule=UNCONFIRMED,
            severity="warning",
            message=f"cannot confirm {', '.join(i.id for i, _ in judged)}: {cause}",
            source="; ".join(dict.fromkeys(v.source or i.source for i, v in judged)),
            unconfirmed=True,
        )
        for cause, judged in by_cause.items()
    ]
