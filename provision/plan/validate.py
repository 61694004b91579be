"""Every rule that depends only on the spec (and the catalog): what ``provision validate`` runs.

The spec's own cross-field rules (:func:`provision.spec.rules.check_spec`) and each component's
spec-only rules (:meth:`~provision.components.base.InstallableComponent.spec_rules`). ``make_plan``
runs the same rules (the components' with the machine's facts), so a spec that validates is not
refused by a rule that could have been judged from the spec alone.
"""

from __future__ import annotations

from provision.catalog import Catalog
from provision.components.registry import COMPONENTS
from provision.findings import Finding
from provision.spec.models import Spec
from provision.spec.rules import check_spec


def validate_spec(spec: Spec, catalog: Catalog) -> tuple[Finding, ...]:
    """The spec rules, then the components' spec-only rules (skipped for an unknown GPU model, as
    the planner stops there too)."""
    findings = check_spec(spec, catalog)
    if any(f.rule == "gpu-model-unknown" for f in findings):
        return findings
    return findings + tuple(f for c in COMPONENTS for f in c.spec_rules(spec, catalog))
