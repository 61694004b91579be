"""Findings: what a rule says about a spec or a machine, at the level of every stage.

Spec rules, the planner's checks and validate all report :class:`Finding` values; the
model lives here, below spec and plan, so that neither package imports the other for it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from provision.models import Frozen

Severity = Literal["blocker", "warning"]
"""A blocker refuses the spec or the plan; a warning lets it through with a reason."""


class Finding(Frozen):
    """A refusal (blocker) or warning, naming its rule id and the source of the rule."""

    rule: str = Field(description="Stable rule id, e.g. cuda-driver-floor.")
    message: str
    source: str = Field(description="Where the rule comes from, e.g. 'CUDA 13.2 U2 release notes, Table 3'.")
    severity: Severity
    unconfirmed: bool = Field(
        False,
        description="A warning that a fact could not be read, so the plan could not confirm what it "
        "covers (the summary then never says the machine matches the spec).",
    )
