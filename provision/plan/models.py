"""The Plan: an ordered, frozen value that round-trips through JSON.

``provision plan --out plan.json`` writes it; ``provision apply plan.json``
reads it back and refuses it when the machine's facts fingerprint changed.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import Field

from provision.components.base import CHANGING as CHANGING  # re-exported: the plan's value types
from provision.components.base import Action as Action
from provision.components.base import Component as Component
from provision.components.base import Step as Step
from provision.findings import Finding as Finding
from provision.models import Frozen
from provision.spec.models import Spec


class Seal(Frozen):
    """Digests over a saved plan (:mod:`provision.plan.seal`).

    Attributes:
        tool_version: The provision version that wrote the plan.
        parts: SHA-256 per sealed part (``spec``, ``steps``, ``extravars``, ...).
        digest: HMAC-SHA256, with the sealing user's key, over ``parts`` and ``tool_version``.
        scheme: ``hmac-sha256``; plans of older releases carry a plain SHA-256 (``sha256``), which
            anyone can recompute, and are refused.
        key_id: The first 16 hex digits of the key's SHA-256: which key sealed it.
    """

    tool_version: str
    parts: dict[str, str]
    digest: str
    scheme: Literal["sha256", "hmac-sha256"] = "sha256"
    key_id: str = ""


class Plan(Frozen):
    """The diff between spec and facts, ready for apply.

    Attributes:
        extravars: Variables handed to the playbooks, computed here so that Ansible makes no
            decisions of its own: ``roles`` (per role with work, its variables as its argument
            specs name them) and ``keys`` (per role, the variables holding a keyring the
            controller fetches at apply time, with the key's source).
        facts_fingerprint: :meth:`Facts.fingerprint` of the facts planned against.
    """

    format_version: Literal[1] = 1
    spec: Spec = Field(description="The spec planned, embedded so that a saved plan is self-contained.")
    spec_path: str | None = None
    as_of: date | None = Field(
        None,
        description="The day the driver branch's end of life was judged on; applying the saved plan "
        "plans again as of this day, so that the comparison does not depend on the date it runs.",
    )
    host: str
    facts_fingerprint: str
    steps: tuple[Step, ...]
    blockers: tuple[Finding, ...] = ()
    warnings: tuple[Finding, ...] = ()
    reboot_required: bool = False
    extravars: dict[str, Any] = Field(default_factory=dict)
    seal: Seal | None = Field(
        None, description="Written by `plan --out`; apply refuses a plan whose seal differs."
    )

    @property
    def spec_name(self) -> str:
        return self.spec.name

    @property
    def changes(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.changes)

    @property
    def tags(self) -> tuple[str, ...]:
        """Ansible tags of the changing steps, de-duplicated in step order."""
        seen: dict[str, None] = {}
        for step in self.changes:
            seen.update(dict.fromkeys(step.tags))
        return tuple(seen)

    def role_vars(self, role: str) -> dict[str, Any] | None:
        """The variables the plan hands ``role``; None when the role has no work in this plan."""
        roles = self.extravars.get("roles")
        found = roles.get(role) if isinstance(roles, dict) else None
        return found if isinstance(found, dict) else None

    @property
    def refused(self) -> bool:
        return bool(self.blockers)
