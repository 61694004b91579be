"""Every rule that depends only on the spec (and the catalog): what ``provision validate`` runs.

The spec's own cross-field rules (:func:`provision.spec.rules.check_spec`) and the planner's
rules that read no fact, evaluated without a machine. ``make_plan`` runs the same rules (the
planner's with the machine's facts), so a spec that validates is not refused by a rule that
could have been judged from the spec alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from provision.catalog import Catalog
from provision.findings import Finding
from provision.plan import driver, fabric
from provision.spec.models import Spec
from provision.spec.rules import check_spec

SpecRule = Callable[[Spec, Catalog], Iterable[Finding]]


def _driver_source(spec: Spec, catalog: Catalog) -> Iterable[Finding]:
    del catalog  # the driver source rule reads the spec only
    return driver.source_findings(spec)


PLAN_SPEC_RULES: tuple[SpecRule, ...] = (_driver_source, fabric.spec_findings)
"""The planner's rules that read only the spec and the catalog, in plan order."""


def validate_spec(spec: Spec, catalog: Catalog) -> tuple[Finding, ...]:
    """The spec rules, then the planner's spec-only rules (skipped for an unknown GPU model, as
    the planner stops there too)."""
    findings = check_spec(spec, catalog)
    if any(f.rule == "gpu-model-unknown" for f in findings):
        return findings
    return findings + tuple(f for rule in PLAN_SPEC_RULES for f in rule(spec, catalog))
