"""What an installable component is, and the plan values every component builds.

A component (the driver, the fabric manager, cuDNN, ...) is declared once, in one module of
this package: the spec section it reads, the facts it reads, its catalog data
(``catalog/data/components/<name>.yaml``: the package names detection keeps), the plan steps
and findings it builds, the role and tags that carry its steps out, the role's variables it
hands over (one dict per role, checked against the role's ``meta/argument_specs.yml`` before
Ansible runs), what verify observes on a host for it and the checks that prove it.
:mod:`provision.components.registry` lists them; the planner, ``validate``, apply's roles and
tags and verify's host job and checks iterate over that list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from provision.catalog import Catalog, Flavor
from provision.catalog.packages import PackageNaming
from provision.findings import Finding
from provision.models import Frozen
from provision.os.base import numeric_upstream
from provision.spec.models import Spec
from provision.versions import DottedVersion

if TYPE_CHECKING:
    from provision.detect.facts import Facts, Package
    from provision.invariants.base import Verdict
    from provision.os.base import PackageManager, Pin


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
    RELEASE = "release"
    """Release holds for one transaction (they are set again after it)."""


class Component(StrEnum):
    """Plan steps are ordered by component, in this order (the names saved plans carry)."""

    REPOSITORY = "repository"
    KERNEL_MODULES = "kernel_modules"
    DKMS = "dkms"
    DRIVER = "driver"
    FABRIC_MANAGER = "fabric_manager"
    CUDA_TOOLKIT = "cuda_toolkit"
    CUDNN = "cudnn"
    NCCL = "nccl"
    CONTAINERS = "containers"
    HOLDS = "holds"
    GPU_SETTINGS = "gpu_settings"
    MIG = "mig"
    PYTHON_VENV = "python_venv"
    PYTHON_WHEELS = "python_wheels"
    SECURE_BOOT = "secure_boot"
    REBOOT = "reboot"
    SERVE = "serve"
    DCGM = "dcgm"
    MONITORING = "monitoring"


CHANGING = frozenset(
    {
        Action.INSTALL,
        Action.UPGRADE,
        Action.DOWNGRADE,
        Action.REMOVE,
        Action.HOLD,
        Action.CONFIGURE,
        Action.RELEASE,
    }
)


class Step(Frozen):
    """One planned change (or a stated no-op) for one component.

    Attributes:
        current: What the machine has now, as text (``580.82.07``, ``absent``), or None.
        target: What the spec asks for, as text, or None.
        reason: Why this step exists or why nothing needs doing; always set.
        packages: Package requests (``name=version-glob``) or pip requirement strings the step installs.
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


Built = Step | Finding
"""What a component's planning yields: its steps, and the findings that refuse or warn."""


@dataclass(frozen=True)
class PlanContext:
    """Everything a component plans from: the spec, the machine's facts, the catalog, the resolved
    kernel module flavour, the OS's package manager, and what earlier components built.

    Attributes:
        transaction: Components whose packages go into the one package transaction.
        held_outside: Components whose own role installs packages held with the stack.
        pins: Every component's version pins, in registry order.
        built: Component name -> what it built, for the components already planned.
        verdicts: Every invariant's verdict for this machine, by invariant id, judged once per plan.
        fleet_monitored: Inventory hostnames of the command's hosts whose specs have a monitoring
            section (a monitoring server scrapes them); empty for one machine.
    """

    spec: Spec
    facts: Facts
    catalog: Catalog
    flavor: Flavor
    pm: PackageManager
    verdicts: Mapping[str, Verdict]
    transaction: frozenset[Component] = frozenset()
    held_outside: frozenset[Component] = frozenset()
    pins: tuple[Pin, ...] = ()
    built: Mapping[Component, Sequence[Built]] = field(default_factory=dict)
    fleet_monitored: tuple[str, ...] = ()

    @property
    def names(self) -> PackageNaming:
        """The catalog's package names for this host's package format (``deb``, ``rpm``)."""
        return self.catalog.naming(self.pm.package_format)

    def installed(self, name: str) -> Package | None:
        """The package ``name`` when it is fully installed, else None."""
        pkg = self.facts.package(name)
        return pkg if pkg is not None and pkg.installed else None

    def upstream(self, pkg: Package) -> DottedVersion | None:
        """Numeric upstream version of a package (``580.95.05-1`` -> 580.95.05), None if not numeric."""
        return numeric_upstream(self.pm, pkg.version)

    def steps(self) -> tuple[Step, ...]:
        """The steps built so far, in registry order."""
        return tuple(b for items in self.built.values() for b in items if isinstance(b, Step))

    def transaction_requests(self) -> tuple[str, ...]:
        """Package requests of the changing steps in the one package transaction, in step order."""
        return tuple(
            p for s in self.steps() if s.component in self.transaction and s.changes for p in s.packages
        )

    def held_requests(self) -> tuple[str, ...]:
        """Package requests the holds step must hold: the transaction's, then those of components
        whose own role installs packages held with the stack (``holds_packages``)."""
        own = self.held_outside
        extra = tuple(p for s in self.steps() if s.component in own and s.changes for p in s.packages)
        return self.transaction_requests() + extra

    def pins_text(self) -> str:
        """The pins file provision writes for this spec."""
        return self.pm.pins_text(self.pins)

    def changing(self) -> frozenset[Component]:
        return frozenset(s.component for s in self.steps() if s.changes)


class InstallableComponent:
    """One installable component, declared once. Subclasses set the class attributes and
    override the hooks they need; the defaults build nothing and hand no variables.

    Attributes:
        name: The component's plan name (its steps' ``component``).
        spec_section: The spec field it reads (``driver``, ``cuda``), None when it has none.
        facts: The :class:`~provision.detect.facts.Facts` fields it reads.
        role: The Ansible role that carries its steps out (``playbooks/roles/<role>``), or None.
        tags: The tags of its changing steps (the runner passes them to Ansible).
        stage: Planning order: a component reads what components of lower stages built.
        transaction: Its packages go into the one package transaction (the packages role).
        reboots: A change of it needs a reboot (kernel side).
        reboot_note: What else the reboot does for it, said in the reboot step.
        holds_packages: The packages its changing steps install outside the one transaction are
            held with the stack (the holds step counts them as incoming).
        verify_checks: Ids of the verify checks that prove it on the machine.
        observer: What verify reads on a host for it and the checks over that, named
            ``module:attribute`` (a :class:`provision.verify.observe.Observer`); None when its
            checks read only detection's facts and the GPU program. Named, not imported: verify
            imports the components, never the reverse (``tests/unit/test_imports.py``), and
            ``validate`` never loads verify.
    """

    name: ClassVar[Component]
    spec_section: ClassVar[str | None] = None
    facts: ClassVar[tuple[str, ...]] = ()
    role: ClassVar[str | None] = None
    tags: ClassVar[tuple[str, ...]] = ()
    stage: ClassVar[int] = 0
    transaction: ClassVar[bool] = False
    reboots: ClassVar[bool] = False
    reboot_note: ClassVar[str] = ""
    holds_packages: ClassVar[bool] = False
    verify_checks: ClassVar[tuple[str, ...]] = ()
    observer: ClassVar[str | None] = None

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        """Its steps (a no-op with its reason when nothing is to do) and findings."""
        return ()

    def reboots_for(self, step: Step) -> bool:
        """Whether this changing step of it needs a reboot: by default, whenever it ``reboots``."""
        return self.reboots

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        """Its rules that read only the spec and the catalog (``validate`` runs them too)."""
        return ()

    def findings(self, ctx: PlanContext) -> Iterable[Finding]:
        """Its rules on the machine's facts that are not tied to a step."""
        return ()

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        """Its variables for its role, named without the role's prefix (``venv`` for the role
        ``vllm_serve``'s ``vllm_serve_venv``), from the whole plan's steps in ``ctx.built``.

        The components of one role each give their part; the planner prefixes and merges them
        into the role's one dict (:func:`provision.plan.planner.extravars`).
        """
        if self.transaction:
            return {"list": list(ctx.transaction_requests())}
        return {}

    def role_runs(self, ctx: PlanContext) -> bool:
        """Whether its role has work for it in this plan: by default, when a step of it changes
        something (a transaction component: when the transaction installs anything)."""
        if self.transaction:
            return bool(ctx.transaction_requests())
        return self.name in ctx.changing()

    def role_keys(self, ctx: PlanContext) -> dict[str, dict[str, Any]]:
        """Role variables (unprefixed) whose value is a signing keyring the controller fetches and
        verifies at apply time, each with its source: ``{"url": str | None, "file": str | None,
        "hosts": [str], "fingerprint": str}`` (:mod:`provision.apply.keyring`)."""
        return {}

    def pins(self, spec: Spec, pm: PackageManager) -> tuple[Pin, ...]:
        """Its package families locked to the spec's versions in every transaction."""
        return ()


def not_on_family(spec: Spec, section: str, missing: str) -> Finding:
    """The blocker for a spec section the catalog cannot plan on the spec's OS family yet, naming
    what the catalog lacks for it (shared by the components, worded once)."""
    return Finding(
        rule=f"{section}-os-unsupported",
        severity="blocker",
        message=f"{section}: not planned on {spec.os.distro} {spec.os.version} yet: the catalog has no "
        f"{missing}; remove the {section} section or use a Debian or Ubuntu host",
        source="provision catalog (provision/catalog/data); docs/architecture.md#where-a-new-thing-goes",
    )
