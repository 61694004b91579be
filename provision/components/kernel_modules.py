"""Kernel modules around nvidia.ko: the in-kernel drivers that claim the GPU are blacklisted, and
the blacklist is made effective where the next boot reads it (the initramfs).

The drivers come from the machine, not from a list: every module whose alias matches a GPU's
modalias (``modprobe -R``; nouveau, nova_core, ...) and every driver found holding a GPU
(:func:`provision.invariants.binding.blacklist_modules`). Without those facts (older captures)
the plan falls back to nouveau's loaded state.

Sources: NVIDIA Driver Installation Guide, "Disabling Nouveau"; modprobe.d(5); update-initramfs(8).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.steps import noop
from provision.detect.unknown import Unknown
from provision.spec.models import Spec
from provision.unknown import because

if TYPE_CHECKING:
    from provision.detect.facts import Facts, NouveauState
    from provision.invariants.base import Verdict

NOUVEAU_PATH = "/etc/modprobe.d/provision-blacklist-nouveau.conf"
_HEADER = "# Managed by provision: in-kernel drivers that claim NVIDIA GPUs before nvidia.ko.\n"


def blacklist_text(modules: Iterable[str]) -> str:
    """The modprobe.d file provision writes: one ``blacklist`` line per module (nouveau also
    without kernel mode setting, as NVIDIA's guide writes it)."""
    lines = [f"blacklist {m}\n" + ("options nouveau modeset=0\n" if m == "nouveau" else "") for m in modules]
    return _HEADER + "".join(lines)


class KernelModules(InstallableComponent):
    """Blacklist the drivers that hold or can claim the GPUs, and rebuild the initramfs."""

    name = Component.KERNEL_MODULES
    facts = ("nouveau", "hardware", "initramfs")
    role = "nvidia_kernel"
    tags = ("kernel",)
    reboots = True
    verify_checks = ("invariant-gpu-bound", "invariant-blacklist-in-initramfs")

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        return (kernel_modules_step(ctx),)

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        return {
            "nouveau_blacklist": NOUVEAU_PATH,
            "blacklist": blacklist_text(wanted_blacklist(ctx.spec, ctx.facts)),
            "initramfs_rebuild": self.role_runs(ctx),
            "initramfs_argv": list(ctx.pm.initramfs_command.split()),
        }


def wanted_blacklist(spec: Spec, facts: Facts) -> tuple[str, ...]:
    """The modules provision's blacklist file names: those from the facts, else nouveau."""
    from provision.invariants.binding import blacklist_modules

    return blacklist_modules(facts, spec.gpus.binding) or ("nouveau",)


def kernel_modules_step(ctx: PlanContext) -> Step:
    """The step for the binding and boot-time invariants; nouveau's state when binding is unread."""
    from provision.invariants.binding import BootEffect, GpuBound

    spec, facts = ctx.spec, ctx.facts
    bound, boot = ctx.verdicts[GpuBound.id], ctx.verdicts[BootEffect.id]
    if bound.status == "unknown":
        return _legacy_nouveau(facts.nouveau, boot)
    missing = _unblacklisted(spec, facts)
    if bound.violated and missing:
        return _configure(
            f"{bound.observed}: {bound.cause}",
            f"{', '.join(missing)} blacklisted",
            f"blacklist {', '.join(missing)}, rebuild the initramfs and reboot so that "
            f"{spec.gpus.binding} gets the GPU (NVIDIA Driver Installation Guide, Disabling Nouveau)",
        )
    if boot.violated:
        return _configure(boot.observed, "initramfs rebuilt", f"{boot.cause}: {boot.fix}")
    return noop(Component.KERNEL_MODULES, current=_state(bound), reason=_noop_reason(bound, boot))


def _unblacklisted(spec: Spec, facts: Facts) -> list[str]:
    """The drivers holding a GPU now that no modprobe.d file blacklists yet."""
    from provision.invariants.binding import PASSTHROUGH_DRIVERS, holders

    state = facts.nouveau
    held = {d.replace("-", "_") for d in holders(facts, spec.gpus.binding).values()} - PASSTHROUGH_DRIVERS
    wanted = [m for m in wanted_blacklist(spec, facts) if m in held or _loaded_nouveau(state, m)]
    if isinstance(state, Unknown):
        return wanted
    return [m for m in wanted if state.blacklisted(m) is not True]


def _loaded_nouveau(state: NouveauState | Unknown, name: str) -> bool:
    return name == "nouveau" and not isinstance(state, Unknown) and state.loaded


def _configure(current: str, target: str, reason: str) -> Step:
    return Step(
        component=Component.KERNEL_MODULES,
        action=Action.CONFIGURE,
        current=current,
        target=target,
        tags=("kernel",),
        reason=reason,
    )


def _state(bound: Verdict) -> str | None:
    return bound.observed or None


def _noop_reason(bound: Verdict, boot: Verdict) -> str:
    if bound.violated:
        return f"{bound.observed}: {bound.cause}; {bound.fix}"
    boot_note = "" if boot.status in ("holds", "not-applicable") else f"; initramfs: {boot.cause}"
    return (bound.observed or bound.cause) + boot_note


def _legacy_nouveau(state: NouveauState | Unknown, boot: Verdict) -> Step:
    """Blacklist nouveau when it is loaded (captures without the GPU's bound driver)."""
    if isinstance(state, Unknown):
        return noop(Component.KERNEL_MODULES, reason=because("nouveau state not observable", state.unknown))
    if not state.loaded:
        return noop(Component.KERNEL_MODULES, reason="nouveau is not loaded")
    if state.blacklisted_by and not boot.violated:
        return noop(
            Component.KERNEL_MODULES,
            current="loaded, blacklisted",
            reason=f"nouveau is blacklisted ({', '.join(state.blacklisted_by)}); it goes at the reboot",
        )
    return _configure(
        "nouveau loaded",
        "nouveau blacklisted",
        "blacklist nouveau, regenerate the initramfs and reboot: the in-kernel driver claims the "
        "GPU before nvidia.ko can (NVIDIA Driver Installation Guide)",
    )


def binding_reboot(ctx: PlanContext) -> Step | None:
    """A reboot step when nothing is left to change but the GPUs are not yet bound as they will be
    after a boot: the holding driver is blacklisted in the initramfs, or nvidia.ko is installed and
    not loaded (the verdict says a reboot binds them)."""
    from provision.invariants.binding import BootEffect, GpuBound

    spec, bound = ctx.spec, ctx.verdicts[GpuBound.id]
    if not bound.reboots or _unblacklisted(spec, ctx.facts) or ctx.verdicts[BootEffect.id].violated:
        return None
    return Step(
        component=Component.REBOOT,
        action=Action.REBOOT,
        current=bound.observed,
        target=f"GPUs bound to {spec.gpus.binding}",
        reason=f"reboot pending: {bound.observed} ({bound.cause})",
    )
