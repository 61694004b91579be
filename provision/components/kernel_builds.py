"""Every kernel the machine can boot against the driver release that must build its module there.

A driver release builds its kernel module (DKMS) only on the kernel series it knows: a newer kernel
changes interfaces the module uses, and releases older than the first that adapts fail to build
(580.126.09 on Linux 6.19; 580.126.18 fixed it). Headers do not help then; only that release or
newer does, or a kernel older than the series. The catalog's ``kernel_builds`` rows
(``data/drivers.yaml``) say, per branch and kernel series, the first release that builds, each
from NVIDIA's issue tracker or release notes as reported; a branch or series without a row is
not judged.

The release judged is the one the plan installs (``driver.version``; a plan that installs the
newest of the branch is judged only where no release of the branch builds), or the one installed
when the plan keeps it. Installing one that cannot build is refused; keeping one that cannot build
on an installed kernel warns, naming the kernel. Ubuntu's signed precompiled modules are built by
the distribution per kernel, not here, and are not judged.
"""

from __future__ import annotations

from collections.abc import Iterator

from provision.catalog.lifecycle import KernelBuild, build_floor, builds, kernel_series, known_building
from provision.components.base import PlanContext
from provision.detect.unknown import Unknown
from provision.findings import Finding
from provision.versions import DottedVersion, DriverVersion

RULE = "driver-kernel-unbuildable"


def installed_driver(ctx: PlanContext) -> DriverVersion | None:
    """The driver release installed here: the module the next boot loads (``modinfo``), else the
    userspace packages' version, else the loaded module's; None when none is seen."""
    from provision.detect.facts import LoadedDriver

    on_disk = ctx.facts.on_disk_driver()
    if on_disk is not None:
        return on_disk
    userspace = ctx.facts.userspace_driver(ctx.pm.upstream)
    if userspace is not None and len(userspace.parts) >= 2:
        return DriverVersion(str(userspace))
    loaded = ctx.facts.driver
    return loaded.version if isinstance(loaded, LoadedDriver) else None


def kernel_build_findings(ctx: PlanContext, installs: bool) -> tuple[Finding, ...]:
    """One finding per kernel the judged driver release cannot build on: a blocker when the plan
    installs that release (``installs``: the driver step changes), a warning when it keeps the
    installed one. The caller judges only where the module is built here (DKMS, or a preinstalled
    driver), not for a distribution's signed precompiled modules."""
    version = ctx.spec.driver.version if installs else installed_driver(ctx)
    branch = version.branch if version is not None else ctx.spec.driver.branch
    return tuple(
        _finding(ctx, kernel, series, row, version, installs)
        for kernel, series in _kernels(ctx)
        if (row := _refusing(ctx, branch, version, series)) is not None
    )


def unbuildable(ctx: PlanContext, kernel: str) -> bool:
    """Whether the driver the plan keeps cannot build on ``kernel`` (the guard's report defers to
    this rule's, which names the release that can)."""
    series = kernel_series(kernel)
    version = installed_driver(ctx)
    if series is None:
        return False
    branch = version.branch if version is not None else ctx.spec.driver.branch
    return _refusing(ctx, branch, version, series) is not None


def _kernels(ctx: PlanContext) -> Iterator[tuple[str, DottedVersion]]:
    """(release, series) of the running kernel and of every packaged one, once each."""
    kernel = ctx.facts.kernel
    releases = ((kernel.release,) if not isinstance(kernel, Unknown) else ()) + ctx.pm.packaged_kernels(
        ctx.facts.packages
    )
    for release in dict.fromkeys(releases):
        if (series := kernel_series(release)) is not None:
            yield release, series


def _refusing(
    ctx: PlanContext, branch: int, version: DriverVersion | None, series: DottedVersion
) -> KernelBuild | None:
    rows = ctx.catalog.kernel_builds
    if version is not None:
        return builds(rows, version, series)
    floor = build_floor(rows, branch, series)
    return floor if floor is not None and floor.first is None else None


def _finding(
    ctx: PlanContext,
    kernel: str,
    series: DottedVersion,
    row: KernelBuild,
    version: DriverVersion | None,
    installs: bool,
) -> Finding:
    failing = f" ({row.fails} fails)" if row.fails else ""
    running = not isinstance(ctx.facts.kernel, Unknown) and ctx.facts.kernel.release == kernel
    where = f"kernel {kernel} ({'running' if running else 'installed'}; series {series})"
    if row.first is None:
        others = [v for v in known_building(ctx.catalog.kernel_builds, row.kernel) if v.branch != row.branch]
        what = (
            f"no {row.branch} release is known to build its kernel module on {where}: none does from "
            f"Linux {row.kernel}{failing}"
        )
        fix = (
            f"the first release known to build on Linux {row.kernel}: "
            + ", ".join(f"{v} (driver.branch: {v.branch}, driver.version: {v})" for v in others)
            if others
            else f"no release in the catalog is known to build on Linux {row.kernel}"
        ) + f"; or boot a kernel older than {row.kernel}"
    else:
        subject = f"driver {version}" if version is not None else f"branch {row.branch}"
        what = (
            f"{subject} does not build its kernel module on {where}: {row.branch} releases before "
            f"{row.first} fail from Linux {row.kernel}{failing}"
        )
        fix = f"set driver.version: {row.first} or newer (or boot a kernel older than {row.kernel})"
    if not installs:
        what += "; booting it leaves the GPU without a driver (installing its headers does not help)"
    return Finding(
        rule=RULE,
        severity="blocker" if installs else "warning",
        message=f"{what}; {fix}",
        source=ctx.catalog.cite(row.source),
    )
