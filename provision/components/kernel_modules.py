"""Kernel modules around nvidia.ko: nouveau blacklisted so that the NVIDIA module gets the GPU.

Source: NVIDIA Driver Installation Guide (DIG), "Disabling Nouveau".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.steps import noop
from provision.detect.facts import Facts, Unknown

NOUVEAU_PATH = "/etc/modprobe.d/provision-blacklist-nouveau.conf"


class KernelModules(InstallableComponent):
    """nouveau blacklisted and the initramfs regenerated when nouveau is loaded."""

    name = Component.KERNEL_MODULES
    facts = ("nouveau",)
    role = "nvidia_kernel"
    tags = ("kernel",)
    reboots = True

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        return (nouveau_step(ctx.facts),)

    def extravars(self, ctx: PlanContext) -> dict[str, Any]:
        changing = Component.KERNEL_MODULES in ctx.changing()
        return {"provision_nouveau_blacklist": NOUVEAU_PATH if changing else None}


def nouveau_step(facts: Facts) -> Step:
    """Blacklist nouveau and regenerate the initramfs when it is loaded (it claims the GPU first)."""
    state = facts.nouveau
    if isinstance(state, Unknown):
        return noop(Component.KERNEL_MODULES, reason=f"nouveau state not observable ({state.unknown})")
    if not state.loaded:
        return noop(Component.KERNEL_MODULES, reason="nouveau is not loaded")
    if state.blacklisted_by:
        return noop(
            Component.KERNEL_MODULES,
            current="loaded, blacklisted",
            reason=f"nouveau is blacklisted ({', '.join(state.blacklisted_by)}); it goes at the reboot",
        )
    return Step(
        component=Component.KERNEL_MODULES,
        action=Action.CONFIGURE,
        current="nouveau loaded",
        target="nouveau blacklisted",
        tags=("kernel",),
        reason="blacklist nouveau, regenerate the initramfs and reboot: the in-kernel driver claims the "
        "GPU before nvidia.ko can (NVIDIA Driver Installation Guide)",
    )
