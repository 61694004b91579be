"""One check per invariant (``invariant-<id>``), from the same verdicts the planner reads.

holds -> pass; violated -> fail (warn for a notice, e.g. a CUDA minor version apart); unknown
and not-applicable -> skip with the reason. The hint is the fix chosen from the observed cause.
"""

from __future__ import annotations

from provision.invariants.base import Invariant, Verdict
from provision.invariants.registry import INVARIANTS
from provision.verify.context import Context, result
from provision.verify.models import CheckResult, Measured, Status, Threshold


def invariants(ctx: Context) -> list[CheckResult]:
    """The verdict of every invariant that no other check already proves."""
    found = []
    for invariant in INVARIANTS:
        if invariant.verify_check is None:
            found.append(_check(invariant, invariant.judge(ctx.spec, ctx.facts, ctx.catalog)))
    return found


def _check(invariant: Invariant, verdict: Verdict) -> CheckResult:
    status: Status = {"holds": "pass", "violated": "warn" if verdict.notice else "fail"}.get(
        verdict.status, "skip"
    )
    return result(
        invariant.check_id,
        invariant.title,
        status,
        measured=Measured(value=verdict.observed) if verdict.observed else None,
        threshold=Threshold(op="==", value="holds", source=verdict.source or invariant.source),
        detail=verdict.cause if status != "pass" else "",
        hint=verdict.fix or None,
    )


CHECKS = (invariants,)
