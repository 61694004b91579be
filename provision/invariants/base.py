"""What an invariant is and what judging one gives."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Literal

from provision.catalog import Catalog
from provision.detect.facts import Facts, Unknown
from provision.models import Frozen
from provision.spec.models import Spec

Status = Literal["holds", "violated", "unknown", "not-applicable"]
Layer = Literal["firmware", "pci", "modules", "boot", "driver", "gpu", "toolkit", "venv"]


class Verdict(Frozen):
    """One invariant judged on one machine.

    Attributes:
        status: ``holds``, ``violated``, ``unknown`` (a fact it reads could not be read) or
            ``not-applicable`` (nothing to judge here, e.g. no initramfs).
        observed: What was seen, as the user would check it (``0000:61:00.0 bound to nouveau``).
        cause: For a violation, its cause as observed; for unknown, why it could not be judged.
        fix: What makes it hold, chosen from the cause (empty when it holds).
    """

    invariant: str
    status: Status
    observed: str = ""
    cause: str = ""
    fix: str = ""
    notice: bool = False
    """A violation that only warns in verify (e.g. a CUDA minor version apart)."""
    repaired: bool = False
    """The plan repairs this violation with steps (shown as steps, not as a warning)."""
    reboots: bool = False
    """A reboot makes it hold once what the next boot reads is right (nothing else to change)."""
    source: str = ""
    """The public document for this machine where it differs from the invariant's own ``source``
    (the OS family's tool); empty: the invariant's."""

    @property
    def violated(self) -> bool:
        return self.status == "violated"


class Invariant(ABC):
    """A property of the running machine: the facts it reads, how plan and verify treat it.

    Attributes:
        id: Stable id (``gpu-bound``); verify's check id is ``invariant-<id>``.
        title: What holds, in a few words.
        layer: Where in the machine it lives.
        source: The public document that says why it must hold.
        reads: The :class:`Facts` fields it reads.
        severity: What the plan makes of a violation: a refusal or a warning.
        checklist: Checklist item ids that fix a violation at the console or in the firmware.
        repaired_by_plan: The plan repairs every violation with steps (binding, boot-time effect),
            so it shows the steps, not a warning; a verdict can also say so itself (``repaired``).
        verify_check: An existing verify check that already proves it (``gpu-memory``); None: verify
            reports ``invariant-<id>`` from the verdict.
    """

    id: ClassVar[str]
    title: ClassVar[str]
    layer: ClassVar[Layer]
    source: ClassVar[str]
    reads: ClassVar[tuple[str, ...]]
    severity: ClassVar[Literal["blocker", "warning"]] = "warning"
    checklist: ClassVar[tuple[str, ...]] = ()
    repaired_by_plan: ClassVar[bool] = False
    verify_check: ClassVar[str | None] = None

    @property
    def check_id(self) -> str:
        """The verify check that proves it: its own ``invariant-<id>``, or an existing check's id."""
        return self.verify_check or f"invariant-{self.id}"

    @abstractmethod
    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        """The verdict for this machine (pure; never raises on any facts)."""

    def holds(self, observed: str) -> Verdict:
        return Verdict(invariant=self.id, status="holds", observed=observed)

    def violated(
        self,
        observed: str,
        cause: str,
        fix: str,
        *,
        notice: bool = False,
        repaired: bool = False,
        reboots: bool = False,
    ) -> Verdict:
        return Verdict(
            invariant=self.id,
            status="violated",
            observed=observed,
            cause=cause,
            fix=fix,
            notice=notice,
            repaired=repaired or self.repaired_by_plan,
            reboots=reboots,
        )

    def unknown(self, why: Unknown | str) -> Verdict:
        reason = why.unknown if isinstance(why, Unknown) else why
        return Verdict(invariant=self.id, status="unknown", cause=reason)

    def not_applicable(self, why: str) -> Verdict:
        return Verdict(invariant=self.id, status="not-applicable", cause=why)
