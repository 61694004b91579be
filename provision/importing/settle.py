"""Settle a draft's open choices with the planner: the spec whose plan changes least on these facts.

The planner is the one model of what a spec means on a machine, so import asks it rather than
keeping a second copy of its rules: each choice's options are planned in turn, the option with the
fewest refusals, then the fewest changing steps, then whose version pins are the ones provision's
pins file on the machine holds (the record of the spec that wrote it: ``9.14`` where the spec said
``9.14``, a difference a plan may not show while another step hides it), is kept; a tie keeps the
evidence's order. When the option the facts pointed at lost, its note says what its plan would
have done.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from provision.catalog import Catalog
from provision.components.registry import pins
from provision.detect.facts import Facts, Unknown
from provision.errors import first_error
from provision.importing.draft import DROP, Choice, Draft, Option, updated
from provision.plan.models import Plan
from provision.plan.planner import make_plan
from provision.spec.models import Spec


@dataclass(frozen=True)
class Settled:
    """The chosen spec mapping, the notes per dotted path, and its plan on the facts."""

    data: dict[str, Any]
    notes: dict[str, list[str]]
    plan: Plan


def settle(draft: Draft, facts: Facts, catalog: Catalog) -> Settled:
    """Each of ``draft.choices`` decided in order, the late ones last (later choices see the earlier
    ones' values).

    Raises:
        ValueError: The draft without any option is not a valid spec (a bug in a section).
    """
    data, notes = draft.data, {k: list(v) for k, v in draft.notes.items()}
    for choice in sorted(draft.choices, key=lambda c: c.late):
        data, note = _decide(choice, data, facts, catalog)
        if note:
            notes.setdefault(choice.field, []).append(note)
    return Settled(data, notes, plan_of(data, facts, catalog))


def plan_of(data: Mapping[str, Any], facts: Facts, catalog: Catalog) -> Plan:
    """The plan of the spec ``data`` on ``facts``.

    Raises:
        ValueError: ``data`` is not a valid spec (the first error, located).
    """
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"imported spec is not valid: {first_error(exc)}") from None
    return make_plan(spec, facts, catalog)


def _decide(
    choice: Choice, data: dict[str, Any], facts: Facts, catalog: Catalog
) -> tuple[dict[str, Any], str]:
    """The data with the best option applied, and the note to attach."""
    tried = [(option, _try(data, option, facts, catalog)) for option in choice.options]
    scored = [(score, i) for i, (_, (_, score, _)) in enumerate(tried) if score is not None]
    if not scored:
        return data, ""
    best = min(scored)[1]
    option, (chosen, _, _) = tried[best]
    note = option.note
    if best != 0:
        note = f"{note}; {_lost(choice, tried[0], tried[best])}"
    return chosen, note


def _try(
    data: dict[str, Any], option: Option, facts: Facts, catalog: Catalog
) -> tuple[dict[str, Any], tuple[int, int, int] | None, Plan | None]:
    """The data with ``option``, its score (refusals, changing steps, pins unlike the machine's; None:
    not a valid spec), its plan."""
    candidate = updated(data, option.updates)
    try:
        plan = plan_of(candidate, facts, catalog)
    except ValueError:
        return candidate, None, None
    return candidate, (len(plan.blockers), len(plan.changes), _pins_differ(plan, facts)), plan


def _pins_differ(plan: Plan, facts: Facts) -> int:
    """1 when the machine has provision's pins file and the spec's pins are not its text, else 0."""
    pm = facts.package_manager(plan.spec.os.distro)
    locks = pm.lock_state(facts.package_locks)
    if isinstance(locks, Unknown) or locks.pins is None:
        return 0
    return int(pm.pins_text(pins(plan.spec, pm)) != locks.pins)


def _lost(choice: Choice, first: tuple[Option, Any], best: tuple[Option, Any]) -> str:
    """What the option the facts pointed at would have planned, beyond the chosen one's plan."""
    option, (_, score, plan) = first
    written = (
        ", ".join(f"{k}: {_yaml(v)}" for k, v in option.updates.items() if v is not DROP)
        or f"{choice.field} kept"
    )
    if plan is None or score is None:
        return f"with {written} the spec was not valid"
    other: Plan = best[1][2]
    extra = [f"{s.component.value}: {s.reason}" for s in plan.changes if s not in other.changes]
    refused = [f"refused [{f.rule}] {f.message}" for f in plan.blockers if f not in other.blockers]
    return f"with {written}, plan would: " + "; ".join(refused + extra or ["change more"])


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


__all__ = ["Settled", "plan_of", "settle"]
