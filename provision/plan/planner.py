"""make_plan: the pure function from (spec, facts, catalog) to a Plan.

Nothing here runs a command or reads a file; the same inputs give the same plan. The steps
come from the components (:data:`provision.components.registry.COMPONENTS`), in their order:
repository, kernel modules, DKMS, driver, fabric manager, CUDA toolkit, cuDNN, NCCL, holds,
Python venv, wheels, Secure Boot; then a reboot when the kernel side changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import date
from typing import Any

from provision.catalog import Catalog
from provision.components.base import Action, Built, Component, PlanContext, Step
from provision.components.kernel_modules import binding_reboot
from provision.components.registry import COMPONENTS, pins, transaction_components
from provision.components.registry import roles as registry_roles
from provision.detect.facts import Facts
from provision.fieldfailures import ff_ref
from provision.findings import Finding
from provision.invariants.registry import judge_all
from provision.memo import by_identity
from provision.plan.checks import check_facts
from provision.plan.consistency import consistency_findings, reboot_pending
from provision.plan.flavor import flavor_findings
from provision.plan.hardware import hardware_findings
from provision.plan.invariants import invariant_findings
from provision.plan.lifecycle import lifecycle_findings
from provision.plan.models import Plan
from provision.plan.origins import origin_findings
from provision.spec.models import Spec
from provision.spec.rules import check_spec, resolve_flavor


def make_plan(
    spec: Spec,
    facts: Facts,
    catalog: Catalog,
    spec_path: str | None = None,
    fleet_monitored: tuple[str, ...] = (),
    as_of: date | None = None,
) -> Plan:
    """Diff ``spec`` against ``facts`` into an ordered plan.

    Args:
        fleet_monitored: The command's hosts with a monitoring section (a monitoring server
            scrapes them); empty for one machine.
        as_of: The day the driver branch's end of life is judged on, recorded in the plan
            (``Plan.as_of``); None judges no dated end of life. The planner reads no clock:
            :func:`provision.hosts.plan_facts` passes today, apply of a saved plan its ``as_of``.

    Returns:
        A Plan whose ``blockers`` are non-empty when the spec is refused; its steps are then
        still listed, for the reader, but apply will not run.
    """
    ctx = dataclasses.replace(context(spec, facts, catalog), fleet_monitored=fleet_monitored)
    findings = [
        *_spec_findings(spec, catalog),
        *check_facts(spec, facts, catalog),
        *consistency_findings(facts),
        *(f for c in COMPONENTS for f in c.findings(ctx)),
        *flavor_findings(ctx.flavor, facts, catalog),
        *lifecycle_findings(spec, facts, catalog, as_of),
        *hardware_findings(spec, facts, catalog),
        *origin_findings(spec, facts, catalog),
        *invariant_findings(ctx.verdicts),
    ]
    if any(f.rule == "gpu-model-unknown" for f in findings):
        return _plan(ctx, (), findings, spec_path, as_of)
    built = build(ctx)
    steps = tuple(s for s in built if isinstance(s, Step))
    findings += [f for f in built if isinstance(f, Finding)]
    return _plan(ctx, steps, findings, spec_path, as_of)


_spec_findings = by_identity()(check_spec)
""":func:`check_spec`, once per spec and catalog: every host of a fleet shares its spec's findings."""


def context(spec: Spec, facts: Facts, catalog: Catalog) -> PlanContext:
    """The planning context: flavour resolved, package manager chosen by the machine's OS family."""
    pm = facts.package_manager(spec.os.distro)
    return PlanContext(
        spec=spec,
        facts=facts,
        catalog=catalog,
        flavor=resolve_flavor(spec, catalog),
        pm=pm,
        verdicts={v.invariant: v for v in judge_all(spec, facts, catalog)},
        transaction=transaction_components(),
        held_outside=frozenset(c.name for c in COMPONENTS if c.holds_packages),
        pins=pins(spec, pm),
    )


def build(ctx: PlanContext) -> list[Built]:
    """Every component's steps and findings, planned stage by stage, listed in registry order;
    then the reboot."""
    done: dict[Component, list[Built]] = {}
    for stage in sorted({c.stage for c in COMPONENTS}):
        for component in (c for c in COMPONENTS if c.stage == stage):
            done[component.name] = list(component.plan(_with(ctx, done)))
    built = [b for c in COMPONENTS for b in done[c.name]]
    return built + _reboot(ctx, built)


def _with(ctx: PlanContext, done: dict[Component, list[Built]]) -> PlanContext:
    ordered = {c.name: done[c.name] for c in COMPONENTS if c.name in done}
    return dataclasses.replace(ctx, built=ordered)


def _reboot(ctx: PlanContext, built: list[Built]) -> list[Built]:
    """One reboot step: for a changed kernel side (driver, nouveau's blacklist, fabric manager), or
    one pending."""
    by_name = {c.name: c for c in COMPONENTS}
    causes = [
        s
        for s in built
        if isinstance(s, Step)
        and s.changes
        and s.component in by_name
        and by_name[s.component].reboots_for(s)
    ]
    rebooting = {s.component: by_name[s.component] for s in causes}
    if not causes:
        pending = reboot_pending(ctx.facts) or binding_reboot(ctx)
        return [pending] if pending else []
    names = ", ".join(s.component.value for s in causes)
    notes = dict.fromkeys(
        rebooting[s.component].reboot_note for s in causes if rebooting[s.component].reboot_note
    )
    pending = reboot_pending(ctx.facts)
    # A reboot already pending is the cause of what the user sees now (NVML's "Driver/library
    # version mismatch", FF-01): say so, even when the plan's own changes need the reboot too.
    already = f"; already {pending.reason} (FF-01, {ff_ref(1)})" if pending is not None else ""
    return [
        Step(
            component=Component.REBOOT,
            action=Action.REBOOT,
            target=causes[0].target,
            reason=f"reboot to {_reboot_purpose(causes)} ({names})"
            + "".join(f"; {n}" for n in notes)
            + already,
        )
    ]


def _reboot_purpose(causes: list[Step]) -> str:
    """What the reboot is for: the kernel side, or GPU modes that the GPU takes up only at boot."""
    gpu = {Component.GPU_SETTINGS, Component.MIG}
    if all(s.component in gpu for s in causes):
        return "make the GPUs' pending modes current"
    return "load the changed kernel side"


def _plan(
    ctx: PlanContext,
    steps: tuple[Step, ...],
    findings: list[Finding],
    spec_path: str | None,
    as_of: date | None,
) -> Plan:
    return Plan(
        spec=ctx.spec,
        spec_path=spec_path,
        as_of=as_of,
        host=ctx.facts.host,
        facts_fingerprint=ctx.facts.fingerprint(),
        steps=steps,
        blockers=tuple(f for f in findings if f.severity == "blocker"),
        warnings=tuple(f for f in findings if f.severity == "warning"),
        reboot_required=any(s.action is Action.REBOOT for s in steps),
        extravars=extravars(dataclasses.replace(ctx, built=_by_component(steps))),
    )


def _by_component(steps: tuple[Step, ...]) -> dict[Component, list[Built]]:
    grouped: dict[Component, list[Built]] = {}
    for step in steps:
        grouped.setdefault(step.component, []).append(step)
    return grouped


def extravars(ctx: PlanContext) -> dict[str, Any]:
    """Variables for the playbooks, derived from the changing steps only: per role that has work in
    this plan, its one dict of variables (named as its ``meta/argument_specs.yml`` names them),
    and the keyrings the controller must fetch for it.

    Returns:
        ``{"roles": {role: {variable: value}}, "keys": {role: {variable: key source}}}``, roles in
        registry order (site.yml's); a role none of whose components has work is absent.
    """
    roles: dict[str, dict[str, Any]] = {}
    keys: dict[str, dict[str, Any]] = {}
    for role in registry_roles():
        mine = [c for c in COMPONENTS if c.role == role]
        if not any(c.role_runs(ctx) for c in mine):
            continue
        roles[role] = _merged(role, (c.role_vars(ctx) for c in mine))
        if held := _merged(role, (c.role_keys(ctx) for c in mine)):
            keys[role] = held
    return {"roles": roles, "keys": keys}


def _merged(role: str, parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The parts under the role's prefix; two components naming one variable must agree."""
    merged: dict[str, Any] = {}
    for part in parts:
        for name, value in part.items():
            key = f"{role}_{name}"
            if key in merged and merged[key] != value:
                raise ValueError(f"components of role {role} disagree on {key}")
            merged[key] = value
    return merged
