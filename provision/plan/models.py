"""The Plan: an ordered, frozen value that round-trips through JSON.

``provision plan --out plan.json`` writes it; ``provision apply plan.json``
reads it back and refuses it when the machine's facts fingerprint changed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from provision.findings import Finding as Finding  # re-exported: a Plan holds Findings
from provision.models import Frozen
from provision.spec.models import Spec


class Action(StrEnum):
    """What a step does. ``noop`` and ``manual`` change nothing through apply."""

    INSTALL = "install"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    REMOVE = "remove"
    HOLD = "hold"
    CONFIGURE = "configure"
    NOOP = "noop"
    MANUAL = "manual"
    REBOOT = "reboot"


class Component(StrEnum):
    """Plan steps are ordered by component, in this order."""

    REPOSITORY = "repository"
    KERNEL_MODULES = "kernel_modules"
    DKMS = "dkms"
    DRIVER = "driver"
    FABRIC_MANAGER = "fabric_manager"
    CUDA_TOOLKIT = "cuda_toolkit"
    CUDNN = "cudnn"
    NCCL = "nccl"
    HOLDS = "holds"
    PYTHON_VENV = "python_venv"
    PYTHON_WHEELS = "python_wheels"
    SECURE_BOOT = "secure_boot"
    REBOOT = "reboot"


CHANGING = frozenset(
    {Action.INSTALL, Action.UPGRADE, Action.DOWNGRADE, Action.REMOVE, Action.HOLD, Action.CONFIGURE}
)


class Step(Frozen):
    """One planned change (or a stated no-op) for one component.

    Attributes:
        current: What the machine has now, as text (``580.82.07``, ``absent``), or None.
        target: What the spec asks for, as text, or None.
        reason: Why this step exists or why nothing needs doing; always set.
        packages: ``name=version`` (apt) or pip requirement strings the step installs.
        tags: Ansible tags that carry out this step.
    """

    component: Component
    action: Action
    current: str | None = None
    target: str | None = None
    reason: str
    packages: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def changes(self) -> bool:
        return self.action in CHANGING


class Plan(Frozen):
    """The diff between spec and facts, ready for apply.

    Attributes:
        extravars: Variables handed to the playbooks (``provision_*``), computed here
            so that Ansible makes no decisions of its own.
        facts_fingerprint: :meth:`Facts.fingerprint` of the facts planned against.
    """

    format_version: Literal[1] = 1
    spec: Spec = Field(description="The spec planned, embedded so that a saved plan is self-contained.")
    spec_path: str | None = None
    host: str
    facts_fingerprint: str
    steps: tuple[Step, ...]
    blockers: tuple[Finding, ...] = ()
    warnings: tuple[Finding, ...] = ()
    reboot_required: bool = False
    extravars: dict[str, Any] = Field(default_factory=dict)

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

    @property
    def refused(self) -> bool:
        return bool(self.blockers)
