"""The NVIDIA driver: its meta-package per flavour and branch, locked to the branch (or version).

Sources:
    Package names per branch: catalog ``packages.yaml`` (NVIDIA Driver Installation Guide,
    "DIG"; NVIDIA/gpu-driver-container install.sh, "GDC"; NVIDIA's Ubuntu 24.04 repository index).
    Metas that must never be installed (FF-08): ``cuda`` and ``cuda-X-Y`` pull in a driver.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator
from typing import Any

from provision.catalog import Catalog
from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.distro import DistroDriver, archive_for, distro_driver
from provision.components.kernel_builds import kernel_build_findings, unbuildable
from provision.components.steps import change_action, noop
from provision.detect.unknown import Unknown
from provision.fieldfailures import ff_ref
from provision.findings import Finding
from provision.os.base import PackageManager, Pin, name_regex
from provision.spec.models import Spec
from provision.unknown import because

TAGS = ("repository", "packages")
DRIVER_METAS = ("cuda", "cuda-[0-9]*-[0-9]*", "cuda-drivers*")
"""Metas that pull in a driver (FF-08): never installed by a plan."""
DRIVER_FAMILY = ("nvidia-*", "libnvidia-*", "cuda-drivers*", "xserver-xorg-video-nvidia-*")
"""The driver's own packages: pinned together, and removable when the plan changes the driver."""


BRANCH_CARRIERS = (
    "nvidia-open",
    "nvidia-open-[0-9]*",
    "nvidia-driver",
    "nvidia-driver-open",
    "nvidia-driver-[0-9]*",
    "cuda-drivers",
    "cuda-drivers-[0-9]*",
    "libnvidia-compute",
    "libnvidia-compute-[0-9]*",
    "nvidia-utils",
    "nvidia-utils-[0-9]*",
    "nvidia-kernel-*dkms",
    "nvidia-kernel-common*",
    "nvidia-fabricmanager*",
)
"""Packages whose version is the driver's (``580.95.05-1``): every one apt would install must carry
the spec's branch, or a transitional package delivered another branch (checked on apt's simulated
transaction, before anything is installed)."""


class Driver(InstallableComponent):
    """The driver from NVIDIA's repository, or checked when the host image provides it."""

    name = Component.DRIVER
    spec_section = "driver"
    facts = ("driver", "packages")
    role = "nvidia_packages"
    tags = TAGS
    transaction = True
    reboots = True
    verify_checks = (
        "nvidia-smi",
        "driver-consistency",
        "driver-branch",
        "driver-flavor",
        "persistence-mode",
        "module-signer",
    )

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        step = driver_step(ctx)
        changes = isinstance(step, Step) and step.changes
        replaced = replaced_step(ctx, step) if isinstance(step, Step) else None
        builds = kernel_build_findings(ctx, changes) if builds_module(ctx) else ()
        guard = () if changes else kernel_guard_findings(ctx)
        return (step, *((replaced,) if replaced else ()), *builds, *guard)

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        return source_findings(spec)

    def pins(self, spec: Spec, pm: PackageManager) -> tuple[Pin, ...]:
        """Driver, utilities and fabric manager at the spec's version or branch (not when preinstalled);
        from the distribution, its driver packages (those whose version is the driver's)."""
        if spec.driver.source == "preinstalled":
            return ()
        version = pm.version_glob(spec.driver.version) if spec.driver.version else f"{spec.driver.branch}.*"
        if spec.driver.source == "distro":
            return (
                Pin(
                    packages=" ".join(DISTRO_DRIVER_FAMILY),
                    version=version,
                    why=f"the distribution's NVIDIA driver at {version}",
                ),
            )
        why = f"NVIDIA driver, utilities and fabric manager at {version}"
        from provision.catalog import load_catalog  # pins get no catalog; the loaded one is cached

        family = load_catalog().naming(pm.package_format).driver_family or DRIVER_FAMILY
        return (Pin(packages=" ".join(family), version=version, why=why),)

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        steps = ctx.steps()
        return {
            **super().role_vars(ctx),
            "forbidden_regex": name_regex(forbidden_packages(ctx.spec, steps, ctx.names.closed_modules)),
            "removable_regex": name_regex(
                removable_packages(ctx.spec, steps, ctx.names.driver_family or DRIVER_FAMILY)
            ),
            "driver_regex": name_regex(branch_carriers(ctx)),
            "driver_branch": str(ctx.spec.driver.branch),
            "module_stream": driver_stream(ctx) or "",
        }


def driver_step(ctx: PlanContext) -> Step | Finding:
    """The driver step for ``spec.driver.source``; a blocker Finding when it cannot be planned."""
    if ctx.spec.driver.source == "preinstalled":
        return _preinstalled(ctx)
    if ctx.spec.driver.source == "distro":
        return _from_distro(ctx)
    return _from_nvidia_repo(ctx)


def source_findings(spec: Spec) -> Iterator[Finding]:
    """The driver source this version cannot install from; spec-only, so ``validate`` runs it too.
    Every source is implemented; a distribution that lacks the branch is refused by the spec rules
    (``driver-distro-branch``), which list the branches it carries."""
    return iter(())


def _from_distro(ctx: PlanContext) -> Step:
    """The distribution's driver: userspace at the spec's version or branch, and the signed
    precompiled module of the running kernel's flavour (with its meta-package, which follows the
    next kernel) where the distribution builds one, the DKMS module package otherwise."""
    spec = ctx.spec
    found = _distro(ctx)
    if found is None:
        return noop(
            Component.DRIVER,
            target=f"branch {spec.driver.branch}",
            reason=f"not planned: {spec.os.distro} {spec.os.version}'s archive does not carry driver branch "
            f"{spec.driver.branch} ({ctx.flavor} modules); see the refusal driver-distro-branch",
        )
    wanted, branch = spec.driver.version, spec.driver.branch
    have = ctx.installed(found.carrier)
    current = ctx.upstream(have) if have else None
    target_text = str(wanted) if wanted else f"newest {branch}.x"
    missing = tuple(p for p in found.packages if ctx.installed(p) is None)
    in_place = current is not None and current.major == branch and (wanted is None or current == wanted)
    module_text = (
        f"signed precompiled module {found.module[0]} (follows the {found.flavour} kernel; no DKMS, no MOK)"
        if found.signed
        else f"{found.module[0]} (DKMS builds the module: {found.why_dkms})"
    )
    if in_place and not missing:
        return noop(
            Component.DRIVER,
            current=str(current),
            target=target_text,
            reason=f"driver {current} from {spec.os.distro} {found.archive.series} installed; {module_text}",
        )
    version = ctx.pm.version_glob(wanted) if wanted else None
    requests = tuple(ctx.pm.request(p, version if p in found.userspace else None) for p in found.packages)
    action = (
        change_action(current, wanted) if wanted else (Action.INSTALL if current is None else Action.UPGRADE)
    )
    if in_place:
        action = Action.INSTALL
    component = found.archive.components.get(ctx.flavor, "")
    return Step(
        component=Component.DRIVER,
        action=action,
        current=str(current) if current else _other(ctx),
        target=target_text,
        packages=requests,
        tags=TAGS,
        reason=f"install the {spec.os.distro} {found.archive.series} driver"
        + (f" ({component})" if component else "")
        + f": {', '.join(found.userspace)}; {module_text}",
    )


DISTRO_DRIVER_FAMILY = ("nvidia-*", "libnvidia-*", "libcuda1", "firmware-nvidia-gsp*")
"""The distribution's driver packages whose version is the driver's (pinned together)."""


def branch_carriers(ctx: PlanContext) -> tuple[str, ...]:
    """Package names whose version must carry the spec's branch in apt's simulated transaction."""
    if ctx.spec.driver.source != "distro":
        return BRANCH_CARRIERS
    found = _distro(ctx)
    if found is None:
        return BRANCH_CARRIERS
    module = () if found.signed else found.module  # a signed module's version is the kernel's
    return (*found.userspace, *module)


def _distro(ctx: PlanContext) -> DistroDriver | None:
    return distro_driver(
        ctx.spec, ctx.facts, ctx.catalog, ctx.flavor, ctx.pm.packaged_kernels(ctx.facts.packages)
    )


def kernel_guard_findings(ctx: PlanContext) -> Iterator[Finding]:
    """The kernel-update guard's report: every installed kernel newer than the running one that has
    no NVIDIA module (no signed module package for it, or DKMS has not installed one), which the
    next boot would start without a GPU (GPUOP-SIGNED: check the module packages exist for a kernel
    before upgrading to it). A plan that installs the driver builds or installs them itself."""
    spec, facts, pm = ctx.spec, ctx.facts, ctx.pm
    if spec.driver.source == "preinstalled" or isinstance(facts.kernel, Unknown):
        return
    running = facts.kernel.release
    newer = [k for k in pm.packaged_kernels(facts.packages) if k != running and pm.compare(k, running) > 0]
    found = _distro(ctx) if spec.driver.source == "distro" else None
    for kernel in newer:
        if unbuildable(ctx, kernel):
            continue  # driver-kernel-unbuildable names it, with the release that builds there
        package = found.kernel_module(spec.driver.branch, ctx.flavor, kernel) if found else None
        if package is not None:
            missing = ctx.installed(package) is None
            what = f"its signed module package {package} is not installed"
        else:
            dkms = facts.dkms
            if isinstance(dkms, Unknown):
                continue
            state = dkms.state_for(kernel)
            missing = state != "installed"
            what = f"DKMS has {state or 'not built'} the nvidia module for it"
        if not missing:
            continue
        guard = (
            "driver.kernel_guard: hold keeps the kernel metas held"
            if spec.driver.kernel_guard == "hold"
            else "set driver.kernel_guard: hold to hold the kernel metas"
        )
        yield Finding(
            rule="kernel-without-module",
            severity="warning",
            source=f"{ctx.catalog.cite(('GPUOP-SIGNED',))}; field failures FF-12 ({ff_ref(12)})",
            message=f"kernel {kernel} is installed and newer than the running {running}, but {what}: "
            f"booting it leaves the GPU without a driver; install its headers (DKMS) or its module "
            f"package before it becomes the default ({guard})",
        )


def builds_module(ctx: PlanContext) -> bool:
    """Whether the kernel module is built on this machine: DKMS (NVIDIA's packages, a distribution
    without a signed module for the running flavour) or a preinstalled driver's own build."""
    return ctx.spec.driver.source == "preinstalled" or uses_dkms(ctx)


def uses_dkms(ctx: PlanContext) -> bool:
    """Whether the kernel module is built by DKMS here (NVIDIA's packages, or a distribution without
    a signed precompiled module for the running kernel's flavour)."""
    if ctx.spec.driver.source == "nvidia-repo":
        return True
    if ctx.spec.driver.source != "distro":
        return False
    found = _distro(ctx)
    return found is not None and not found.signed


def signed_driver(ctx: PlanContext) -> DistroDriver | None:
    """The distribution's driver when its module is signed precompiled, else None."""
    if ctx.spec.driver.source != "distro" or archive_for(ctx.spec, ctx.catalog) is None:
        return None
    found = _distro(ctx)
    return found if found is not None and found.signed else None


def _preinstalled(ctx: PlanContext) -> Step | Finding:
    spec, loaded = ctx.spec, ctx.facts.driver
    if isinstance(loaded, Unknown):
        return _blocker(
            "driver-preinstalled-missing",
            because("driver.source is preinstalled but no NVIDIA driver is loaded", loaded.unknown),
        )
    wanted = spec.driver.version
    if loaded.version.branch != spec.driver.branch or (wanted and loaded.version != wanted):
        want_text = str(wanted or f"branch {spec.driver.branch}")
        return _blocker(
            "driver-preinstalled-mismatch",
            f"preinstalled driver is {loaded.version}, spec wants {want_text}; provision never "
            "replaces a driver provided by the host image",
        )
    return noop(
        Component.DRIVER,
        current=str(loaded.version),
        target=str(wanted or spec.driver.branch),
        reason=f"driver {loaded.version} ({loaded.flavor} modules) preinstalled by the host image; "
        f"branch {spec.driver.branch} as specified",
    )


def driver_stream(ctx: PlanContext) -> str | None:
    """The module stream of the spec's branch and flavour where the release has modules (EL 9:
    ``nvidia-driver:580-open``), for the driver from NVIDIA's repository; else None."""
    if ctx.spec.driver.source != "nvidia-repo":
        return None
    return ctx.pm.driver_stream(ctx.spec.os.version, ctx.spec.driver.branch, ctx.flavor)


def _stream_note(ctx: PlanContext, stream: str | None) -> str:
    """How the module stream gets to the spec's: enabled, or switched from another one (the flavour
    or branch switch: ``dnf module switch-to --allowerasing``, Driver Installation Guide)."""
    if stream is None:
        return ""
    locks = ctx.facts.package_locks
    enabled = () if isinstance(locks, Unknown) else (locks.streams or ())
    others = [s for s in enabled if s != stream]
    if others:
        erased = "erasing the other stream's packages"
        return f"; module stream switched from {', '.join(others)} to {stream} ({erased})"
    return "" if stream in enabled else f"; module stream {stream} enabled first"


def _from_nvidia_repo(ctx: PlanContext) -> Step:
    branch, wanted, flavor = ctx.spec.driver.branch, ctx.spec.driver.version, ctx.flavor
    meta = ctx.names.driver_meta(branch, flavor)
    have = ctx.installed(meta)
    current = ctx.upstream(have) if have else None
    target_text = str(wanted) if wanted else f"newest {branch}.x"
    stream = driver_stream(ctx)
    switch = _stream_note(ctx, stream)
    if (
        current is not None
        and current.major == branch
        and (wanted is None or current == wanted)
        and not switch
    ):
        return noop(
            Component.DRIVER,
            current=str(current),
            target=target_text,
            reason=f"driver {current} ({meta}, {flavor} kernel modules) already installed",
        )
    pin = ctx.names.pinning(branch)
    request = ctx.pm.request(meta, ctx.pm.version_glob(wanted) if wanted else None)
    action = (
        change_action(current, wanted) if wanted else (Action.INSTALL if current is None else Action.UPGRADE)
    )
    return Step(
        component=Component.DRIVER,
        action=action,
        current=str(current) if current else _other(ctx),
        target=target_text,
        packages=tuple(p for p in (pin, request) if p),
        tags=TAGS,
        reason=f"install {meta} ({flavor} kernel modules) from NVIDIA's repository"
        + (f", branch locked by {pin}" if pin else "")
        + (f", branch and flavour by the module stream {stream}" if stream else "")
        + switch,
    )


def replaced_step(ctx: PlanContext, driver: Step) -> Step | None:
    """The held driver packages that a changing driver step replaces, said before anything runs.

    A flavour or branch switch (the wanted meta-package is not installed) removes the installed
    driver's packages: a ``remove`` step. A version change of the same driver moves held packages: a
    ``release`` step (the holds are set again after the transaction). Either needs the user's consent
    (``apply --replace-held`` or ``driver.replace_held``): an administrator may have held that driver.
    None when the driver step changes nothing or nothing installed is held.
    """
    if not driver.changes or isinstance(ctx.facts.packages, Unknown):
        return None
    held = [
        p
        for p in ctx.facts.packages
        if p.installed
        and p.held
        and any(fnmatch.fnmatchcase(p.name, pat) for pat in (ctx.names.driver_family or DRIVER_FAMILY))
        and not p.name.startswith("nvidia-driver-pinning")
    ]
    if not held:
        return None
    found = _distro(ctx) if ctx.spec.driver.source == "distro" else None
    meta = found.carrier if found else ctx.names.driver_meta(ctx.spec.driver.branch, ctx.flavor)
    switch = ctx.installed(meta) is None
    listed = ", ".join(f"{p.name} {p.version}" for p in held)
    consent = "needs consent: `provision apply --replace-held` or driver.replace_held: true"
    if switch:
        return Step(
            component=Component.DRIVER,
            action=Action.REMOVE,
            current=f"{listed} (held)",
            target=f"replaced by {meta} {driver.target}",
            tags=TAGS,
            reason=f"the spec replaces the installed, held driver: apt removes the packages {meta} does not "
            f"keep, after their holds are released; {consent}",
        )
    return Step(
        component=Component.DRIVER,
        action=Action.RELEASE,
        current=f"{listed} (held)",
        target=f"{driver.target}, held again",
        tags=TAGS,
        reason=f"the spec moves the held driver to {driver.target}: its holds are released for this "
        f"transaction and set again after it; {consent}",
    )


def needs_consent(step: Step) -> bool:
    """Whether applying ``step`` replaces a held driver (see :func:`replaced_step`)."""
    return step.component is Component.DRIVER and step.action in (Action.REMOVE, Action.RELEASE)


def _other(ctx: PlanContext) -> str:
    """Describe what is there when the wanted meta-package is not: another flavour or nothing."""
    from provision.detect.facts import LoadedDriver

    driver = ctx.facts.driver
    if isinstance(driver, LoadedDriver):
        return f"{driver.version} ({driver.flavor}, loaded)"
    return "absent"


def forbidden_packages(spec: Spec, steps: tuple[Step, ...], closed: str = "nvidia-driver") -> tuple[str, ...]:
    """Packages the simulated transaction must not install (FF-08): the driver-pulling CUDA metas
    always, the other flavour's metas (``closed``: the proprietary modules' package of the host's
    format, :attr:`PackageNaming.closed_modules`), and any driver package when the driver is
    preinstalled."""
    if spec.driver.source == "distro":
        # NVIDIA's own driver metas and pinning packages: never on top of the distribution's driver.
        return (*DRIVER_METAS, *NVIDIA_ONLY_DRIVER_NAMES)
    if spec.driver.source == "preinstalled":
        return (
            *DRIVER_METAS,
            "nvidia-driver*",
            "nvidia-open*",
            "nvidia-kernel*",
            "nvidia-dkms*",
            "libnvidia-compute*",
        )
    flavor_driver = next((s for s in steps if s.component is Component.DRIVER), None)
    open_flavor = flavor_driver is not None and any(
        p.startswith("nvidia-open") for p in flavor_driver.packages
    )
    return (*DRIVER_METAS, closed) if open_flavor else (*DRIVER_METAS[:2], "nvidia-open*")


def removable_packages(
    spec: Spec, steps: tuple[Step, ...], family: tuple[str, ...] = DRIVER_FAMILY
) -> tuple[str, ...]:
    """Packages the transaction may remove: the driver's own family, and only when the plan changes
    the driver from NVIDIA's repository (a flavour switch or an upgrade replaces its packages).
    Anything else removed refuses the transaction (FF-08). ``family``: the driver's package globs
    of the host's format (:attr:`PackageNaming.driver_family`; rpm adds ``kmod-nvidia-*``)."""
    driver_changes = any(s.component is Component.DRIVER and s.changes for s in steps)
    if spec.driver.source == "preinstalled" or not driver_changes:
        return ()
    return family if spec.driver.source == "nvidia-repo" else (*family, *DISTRO_DRIVER_FAMILY[2:])


NVIDIA_ONLY_DRIVER_NAMES = (
    "nvidia-open",
    "nvidia-driver-cuda",
    "nvidia-driver-pinning-*",
    "nvidia-kernel-open-dkms",
    "nvidia-fabricmanager",
)
"""Names only NVIDIA's repository uses for its driver (DIG; on Debian 12 NVIDIA's open module is
``nvidia-kernel-open-dkms``, Debian's ``nvidia-open-kernel-dkms``)."""


def _blocker(rule: str, message: str, source: str = "provision planner") -> Finding:
    return Finding(rule=rule, message=message, source=source, severity="blocker")
