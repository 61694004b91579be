"""Helpers shared by the components' step builders. All pure."""

from __future__ import annotations

from provision.components.base import Action, Component, PlanContext, Step
from provision.versions import DottedVersion

CUDNN_VERSION_PARTS = 4
"""cuDNN versions have four fields: ``9.14.0.64-1`` (H200 capture), ``9.20.0.48-1`` (NVIDIA repository)."""
NCCL_VERSION_PARTS = 3
"""NCCL versions have three fields: ``2.28.3-1+cuda13.0`` (H200 capture, tests/fixtures/raw)."""


def change_action(current: DottedVersion | None, target: DottedVersion) -> Action:
    """install when absent, else upgrade or downgrade towards ``target``."""
    if current is None:
        return Action.INSTALL
    return Action.UPGRADE if current < target else Action.DOWNGRADE


def noop(component: Component, reason: str, current: str | None = None, target: str | None = None) -> Step:
    """A step that changes nothing and says why."""
    return Step(component=component, action=Action.NOOP, reason=reason, current=current, target=target)


def versioned_step(
    ctx: PlanContext,
    component: Component,
    names: tuple[str, ...],
    target: DottedVersion,
    suffix: str,
    full_parts: int,
) -> Step:
    """Install ``names`` at ``target`` (a version or prefix) with the build ``suffix`` (``+cuda13.0``),
    unless the first is installed at a matching version and the others are installed."""
    have = ctx.installed(names[0])
    current = ctx.upstream(have) if have else None
    suffix_ok = have is None or not suffix or have.version.endswith(suffix)
    if current is not None and target.matches(current) and suffix_ok and all(ctx.installed(n) for n in names):
        return noop(
            component,
            current=have.version if have else None,
            target=str(target),
            reason=f"{', '.join(names)} {have.version if have else ''} installed, matches {target}",
        )
    glob = ctx.pm.version_glob(target, suffix, full_parts)
    return Step(
        component=component,
        # Same version but another CUDA build or a missing companion package: not a downgrade.
        action=Action.INSTALL
        if current is not None and target.matches(current)
        else change_action(current, target),
        current=have.version if have else "absent",
        target=str(target),
        packages=tuple(ctx.pm.request(n, glob) for n in names),
        tags=("repository", "packages"),
        reason=f"install {', '.join(names)} {target}" + (f" built for CUDA {suffix[5:]}" if suffix else ""),
    )
