"""The seal of a saved plan: a digest over everything apply uses, so an edit is named and refused.

``provision plan --out`` writes the plan with a :class:`Seal`: one SHA-256 per part apply reads
(the spec, the steps, the extravars, the facts fingerprint, the host, ...) and one over all of
them and the tool version. ``provision apply plan.json`` recomputes the parts and names the ones
that differ. The seal detects edits; it does not say who made the file (docs/security.md).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from provision import __version__
from provision.errors import DriftError, ProvisionError

if TYPE_CHECKING:
    from pathlib import Path

    from provision.plan.models import Plan

SEALED_PARTS = (
    "format_version",
    "spec",
    "spec_path",
    "as_of",
    "host",
    "facts_fingerprint",
    "steps",
    "blockers",
    "warnings",
    "reboot_required",
    "extravars",
)
"""Every Plan field apply reads; a test keeps it equal to the Plan's fields less the seal."""


class PlanEditedError(ProvisionError):
    """A saved plan's content no longer matches its seal (or it has none)."""


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def part_digests(plan: Plan) -> dict[str, str]:
    """SHA-256 per sealed part of ``plan``, over its canonical JSON form."""
    data = plan.model_dump(mode="json")
    return {name: _digest(data[name]) for name in SEALED_PARTS}


def overall(parts: dict[str, str], tool_version: str) -> str:
    """The digest over the part digests and the tool version."""
    return _digest({"parts": parts, "tool_version": tool_version})


def edited_parts(plan: Plan) -> list[str]:
    """The parts of ``plan`` that differ from its seal, in :data:`SEALED_PARTS` order.

    ``seal`` means the seal itself was edited; ``tool version`` that another provision made it.
    """
    if plan.seal is None:
        return ["seal (missing)"]
    found = part_digests(plan)
    changed = [name for name in SEALED_PARTS if plan.seal.parts.get(name) != found[name]]
    if plan.seal.tool_version != __version__:
        changed.append(f"tool version ({plan.seal.tool_version}, this is {__version__})")
    if not changed and overall(plan.seal.parts, plan.seal.tool_version) != plan.seal.digest:
        changed.append("seal")
    return changed


def check_seal(plan: Plan, where: str) -> None:
    """Refuse a saved plan edited after ``plan --out`` wrote it.

    Raises:
        PlanEditedError: One line naming the changed parts.
    """
    if changed := edited_parts(plan):
        raise PlanEditedError(
            f"{where}: the saved plan was changed after `provision plan --out` wrote it "
            f"(changed: {', '.join(changed)}); make it again with `provision plan --out`"
        )


def check_unchanged(saved: Plan, fresh: Plan) -> None:
    """Refuse to apply ``saved`` unless planning now gives the same plan: apply runs exactly it.

    Raises:
        DriftError: The plan was made from another host's facts (named: ``saved.host``, for a
            capture its directory's name), this host's facts changed, or another part of the plan did.
    """
    facts = f"facts {saved.facts_fingerprint[:12]} -> {fresh.facts_fingerprint[:12]}"
    if saved.host != fresh.host:
        # Made from another host's facts: a capture (`plan --from-raw DIR` records DIR's name), a
        # facts file, or another inventory host; saying "localhost changed" would name the wrong one.
        same = "same facts" if saved.facts_fingerprint == fresh.facts_fingerprint else facts
        raise DriftError(
            f"the plan was made from the facts of {saved.host}, not of {fresh.host} ({same}); "
            f"plan {fresh.host} itself with `provision plan` and apply that"
        )
    if saved.facts_fingerprint != fresh.facts_fingerprint:
        raise DriftError(
            f"the machine {fresh.host} changed since the plan was made ({facts}); run `provision plan` again"
        )
    before, now = part_digests(saved), part_digests(fresh)
    if differ := [name for name in SEALED_PARTS if before[name] != now[name]]:
        raise DriftError(
            f"planning {fresh.host} now gives another plan than the saved one "
            f"(differs: {', '.join(differ)}); run `provision plan` again"
        )


def sealed(plan: Plan) -> Plan:
    """``plan`` with its :class:`~provision.plan.models.Seal`, as ``plan --out`` saves it."""
    from provision.plan.models import Seal

    parts = part_digests(plan)
    return plan.model_copy(
        update={"seal": Seal(tool_version=__version__, parts=parts, digest=overall(parts, __version__))}
    )


def save(plan: Plan, path: Path) -> None:
    """Write ``plan``, sealed, to ``path`` as ``plan --out`` does, in every form of ``plan`` (one
    machine, an inventory, a fleet file), so that ``apply`` takes it exactly or refuses it.

    Raises:
        ProvisionError: The file cannot be written (:func:`provision.output.write_output`).
    """
    from provision.output import write_output

    write_output(path, sealed(plan).model_dump_json(indent=2))
