"""DKMS, kernel headers and the kernel's compiler, so the module is built for every kernel.

Sources: field failures FF-12 (no headers for a newly installed kernel, so no module after
reboot: GoogleCloudPlatform/compute-gpu-installation PR #18), FF-13 (the DKMS build must use
the kernel's own compiler; open modules need g++: aws-parallelcluster-cookbook PR #2852,
NVIDIA/open-gpu-kernel-modules#805).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.driver import uses_dkms
from provision.components.steps import noop
from provision.detect.unknown import Unknown
from provision.fieldfailures import ff_ref
from provision.findings import Finding

if TYPE_CHECKING:
    from provision.detect.facts import Kernel


class Dkms(InstallableComponent):
    """DKMS and headers in the driver's transaction; planned after the driver, whose change it reads."""

    name = Component.DKMS
    spec_section = "driver"
    facts = ("kernel", "packages")
    role = "nvidia_packages"
    tags = ("repository", "packages")
    stage = 1
    transaction = True

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        built = dkms_step(ctx, driver_changes(ctx))
        warning = _running_kernel_unpackaged(ctx, driver_changes(ctx))
        return tuple(b for b in (built, warning) if b is not None)

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        changing, steps = ctx.changing(), ctx.steps()
        known = any(s.component is Component.DKMS for s in steps)
        dkms = Component.DKMS in changing or (Component.DRIVER in changing and known)
        return {**super().role_vars(ctx), "dkms": dkms}


def driver_changes(ctx: PlanContext) -> bool:
    """Whether the plan changes the driver (read by the components planned after it)."""
    return any(isinstance(b, Step) and b.changes for b in ctx.built.get(Component.DRIVER, ()))


def dkms_step(ctx: PlanContext, driver_changes: bool) -> Step | Finding | None:
    """DKMS, headers for the running and every installed kernel, the headers meta and the kernel's
    compiler, in the driver's transaction; None when no module is built here."""
    facts = ctx.facts
    if not uses_dkms(ctx) or isinstance(facts.kernel, Unknown):
        return None
    kernels = ctx.pm.packaged_kernels(facts.packages)
    if not kernels:
        return None
    # A running kernel that is not packaged (a custom or the build host's) gets no headers from
    # here, but every packaged kernel the machine can boot next still gets its module.
    compilers = _compilers(ctx, facts.kernel) if facts.kernel.release in kernels else ()
    wanted = ("dkms", *ctx.pm.kernel_build_packages(facts.packages, kernels), *compilers)
    missing = tuple(p for p in wanted if not ctx.pm.satisfied(facts.packages, p))
    if not missing:
        return noop(
            Component.DKMS,
            reason=f"dkms, headers for {', '.join(kernels)} and the kernel's compiler are installed",
        )
    return Step(
        component=Component.DKMS,
        action=Action.INSTALL,
        current="absent" if "dkms" in missing else "partial",
        target="dkms + headers",
        packages=missing,
        tags=Dkms.tags,
        reason="DKMS builds the module for the running and every installed kernel, with the kernel's "
        "own compiler; without headers the next boot into a new kernel has no GPU (FF-12, FF-13)"
        + (f"; dkms from {', '.join(repos)}" if (repos := ctx.pm.add_on_repositories("dkms")) else ""),
    )


def _compilers(ctx: PlanContext, kernel: Kernel) -> tuple[str, ...]:
    """The compiler the kernel was built with (/proc/version), with C++ for open modules, as the
    family packages it (``gcc-13 g++-13``; ``gcc gcc-c++``)."""
    match = re.search(r"gcc(?:-(\d+))?\b[^\d]*(\d+)\.\d+", kernel.compiler or "")
    if not match:
        return ()
    return ctx.pm.compiler_packages(match[1] or match[2], cxx=ctx.flavor == "open")


def _running_kernel_unpackaged(ctx: PlanContext, driver_changes: bool) -> Finding | None:
    facts = ctx.facts
    if not uses_dkms(ctx) or isinstance(facts.kernel, Unknown):
        return None
    if facts.kernel.release in ctx.pm.packaged_kernels(facts.packages):
        return None
    return _custom_kernel(facts.kernel, driver_changes)


def _custom_kernel(kernel: Kernel, driver_changes: bool) -> Finding | None:
    if not driver_changes:
        return None
    return Finding(
        rule="kernel-not-packaged",
        severity="warning",
        source=f"field failures FF-12 ({ff_ref(12)})",
        message=f"the running kernel {kernel.release} does not come from a distribution package: "
        "provision cannot install its headers; DKMS needs them from wherever the kernel came from",
    )
