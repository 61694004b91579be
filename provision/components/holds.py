"""Holds: every NVIDIA stack package held, and automatic upgrades kept away from the stack.

The holds stop ``apt upgrade``; the guard stops unattended-upgrades, which changed userspace
under a loaded module in FF-01. Hold patterns: pando85/homelab PR #4110 (FF-01).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.distro import hold_patterns
from provision.components.steps import noop
from provision.detect.unknown import Unknown
from provision.os.base import name_regex
from provision.unknown import because

if TYPE_CHECKING:
    from provision.detect.facts import Facts


class Holds(InstallableComponent):
    """Holds on the stack (installed now or by this plan) and the upgrade guard, when ``driver.hold``."""

    name = Component.HOLDS
    spec_section = "driver"
    facts = ("packages", "package_locks")
    role = "nvidia_holds"
    tags = ("holds",)
    stage = 2

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        if not ctx.spec.driver.hold:
            return (noop(Component.HOLDS, reason="driver.hold is false: packages are not held"),)
        return (holds_step(ctx, ctx.held_requests()),)

    def role_runs(self, ctx: PlanContext) -> bool:
        return ctx.spec.driver.hold

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        patterns = held_patterns(ctx)
        return {
            "regex": name_regex(patterns),
            "unattended_guard": ctx.pm.upgrade_guard_text(patterns),
            "unattended_file": ctx.pm.files.upgrade_guard,
        }


def holds_step(ctx: PlanContext, new_packages: tuple[str, ...]) -> Step:
    """Hold every NVIDIA stack package (installed now or by this plan) not held yet, and keep the
    upgrade guard (the exact file text) in place."""
    patterns = held_patterns(ctx)
    unheld = _unheld_stack(ctx.facts, patterns)
    # Only what the role holds: the stack's patterns (kernel-devel, dkms and the compiler stay free).
    incoming = tuple(
        name
        for name in (ctx.pm.request_name(p) for p in new_packages)
        if any(fnmatch.fnmatchcase(name, pat) for pat in patterns)
    )
    pending = tuple(dict.fromkeys(unheld + incoming))
    guard_state = _guard_state(ctx, ctx.pm.upgrade_guard_text(patterns))
    if not pending and guard_state is None:
        return noop(
            Component.HOLDS,
            reason=f"all NVIDIA stack packages ({', '.join(patterns)}) held; {ctx.pm.guard_noun} in place",
        )
    why = [
        w
        for w in (
            "hold the NVIDIA stack as one unit, dependencies included (FF-01, FF-02)" if pending else "",
            guard_state or "",
        )
        if w
    ]
    return Step(
        component=Component.HOLDS,
        action=Action.HOLD,
        packages=pending,
        tags=Holds.tags,
        target="held",
        current=f"{len(unheld)} unheld" if unheld else None,
        reason="; ".join(why),
    )


def held_patterns(ctx: PlanContext) -> tuple[str, ...]:
    """The NVIDIA stack's patterns, plus the distribution driver's own names (``libcuda1``, Ubuntu's
    ``linux-modules-nvidia-*``) and, with ``driver.kernel_guard: hold``, the kernel meta-packages."""
    extra = hold_patterns(ctx.spec, ctx.catalog)
    return tuple(dict.fromkeys((*ctx.names.stack_patterns, *extra)))


def _guard_state(ctx: PlanContext, guard: str) -> str | None:
    """Why the unattended-upgrades guard must be written, or None when it is in place."""
    locks = ctx.pm.lock_state(ctx.facts.package_locks)
    if isinstance(locks, Unknown):
        return because(f"write the {ctx.pm.guard_noun}", locks.unknown)
    if locks.upgrade_guard is None:
        return f"write the {ctx.pm.guard_noun} (FF-01: unattended-upgrade moved userspace under the module)"
    if locks.upgrade_guard != guard:
        return f"restore the {ctx.pm.guard_noun} (it drifted from provision's text)"
    return None


def _unheld_stack(facts: Facts, patterns: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(facts.packages, Unknown):
        return ()
    return tuple(
        p.name
        for p in facts.packages
        if p.installed and not p.held and any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)
    )
