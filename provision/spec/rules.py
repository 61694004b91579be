"""Cross-field rules: does this spec describe a combination that can work?

:func:`check_spec` is a pure function of the spec and the catalog. Every finding has a
stable rule id, a message naming the values involved and the right value, and the
source of the rule (a release note, a user guide, a field failure). Blockers refuse
the spec; warnings let it through with a reason.

Rule ids:
    gpu-model-unknown, cuda-release-unknown, cuda-driver-floor, cuda-driver-minor-compat,
    torch-release-unknown, torch-release-unconfirmed, torch-variant-unpublished,
    torch-driver-floor, torch-driver-minor-compat, torch-arch-missing, torch-cuda-major-mismatch,
    python-version-range, flavor-open-required, flavor-proprietary-required, flavor-proprietary-removed,
    driver-branch-too-new-for-arch, driver-branch-unknown, arch-min-cuda, arch-min-branch,
    os-repo-unserved, os-repo-cuda-unconfirmed, fm-without-nvswitch, fm-disabled-on-nvswitch,
    driver-distro-unknown, driver-distro-branch, driver-distro-no-fm, driver-distro-fm-unplanned,
    cudnn-major-unpackaged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from provision.catalog import Catalog, Flavor, GpuModel, TorchRelease
from provision.catalog.models import ArchList
from provision.findings import Finding, Severity
from provision.os.select import package_format
from provision.os.select import release as os_release
from provision.spec.models import PythonSpec, Spec
from provision.versions import DottedVersion

_CONFIDENCE = {"P": "from a primary source", "S": "from a secondary source", "U": "unverified"}
"""The catalog's ``conf`` letters in words, for messages."""

FM_SWITCH_GPUS = 8
"""GPU count of the HGX/DGX NVSwitch baseboards FMUG describes (8-GPU)."""


@dataclass(frozen=True)
class _Ctx:
    """The spec with the catalog rows every rule looks up."""

    spec: Spec
    cat: Catalog
    gpu: GpuModel | None
    torch: TorchRelease | None

    def finding(self, rule: str, severity: Severity, message: str, keys: tuple[str, ...]) -> Finding:
        return Finding(rule=rule, severity=severity, message=message, source=self.cat.cite(keys))


Rule = Callable[[_Ctx], Iterator[Finding]]


def check_spec(spec: Spec, catalog: Catalog) -> tuple[Finding, ...]:
    """Check the spec's cross-field compatibility against the catalog.

    Args:
        spec: A validated spec.
        catalog: The loaded catalog (:func:`provision.catalog.load_catalog`).

    Returns:
        Findings in rule order; blockers and warnings mixed (see :func:`blockers_and_warnings`).
    """
    ctx = _context(spec, catalog)
    return tuple(finding for rule in RULES for finding in rule(ctx))


def blockers_and_warnings(findings: Iterable[Finding]) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """Split findings into (blockers, warnings), keeping their order."""
    items = tuple(findings)
    return (
        tuple(f for f in items if f.severity == "blocker"),
        tuple(f for f in items if f.severity == "warning"),
    )


def resolve_flavor(spec: Spec, catalog: Catalog) -> Flavor:
    """Kernel module flavour to install: the spec's, or for ``auto`` open on Turing and newer.

    ``auto`` picks proprietary only for architectures older than open-module support
    (Maxwell, Pascal, Volta; DIG "Kernel Modules"); an unknown GPU model resolves to open,
    NVIDIA's default since R560.
    """
    if spec.driver.flavor != "auto":
        return spec.driver.flavor
    gpu = catalog.gpu(spec.gpus.model)
    if gpu is not None and gpu.architecture < catalog.kernel_modules.open_supported.from_arch:
        return "proprietary"
    return "open"


def _context(spec: Spec, cat: Catalog) -> _Ctx:
    torch = spec.python.torch if spec.python else None
    return _Ctx(
        spec=spec,
        cat=cat,
        gpu=cat.gpu(spec.gpus.model),
        torch=cat.torch_release(torch) if torch is not None else None,
    )


def _versions(items: Iterable[object]) -> str:
    return ", ".join(str(i) for i in items)


# ---- GPU model ----------------------------------------------------------------------------------


def gpu_model_known(ctx: _Ctx) -> Iterator[Finding]:
    if ctx.gpu is None:
        yield Finding(
            rule="gpu-model-unknown",
            severity="blocker",
            source="provision catalog, gpus.yaml",
            message=f"gpus.model {ctx.spec.gpus.model!r} is not a catalog GPU id; valid ids: "
            f"{', '.join(ctx.cat.gpus)}",
        )


# ---- CUDA toolkit and driver ----------------------------------------------------------------------


def cuda_release_known(ctx: _Ctx) -> Iterator[Finding]:
    if ctx.spec.cuda is None:
        return
    toolkit = ctx.spec.cuda.toolkit
    release = ctx.cat.cuda_release(toolkit)
    if release is None or not release.verified:
        known = [r.release for r in ctx.cat.cuda_releases.values() if r.verified]
        why = (
            "is not in the catalog"
            if release is None
            else (
                f"has no sourced toolkit driver ({_CONFIDENCE[release.conf]}: "
                f"{(release.note or '').rstrip('.')})"
            )
        )
        yield ctx.finding(
            "cuda-release-unknown",
            "blocker",
            f"cuda.toolkit {toolkit} {why}; choose one of {_versions(known)}",
            ("RN132",),
        )


def cuda_driver(ctx: _Ctx) -> Iterator[Finding]:
    if ctx.spec.cuda is not None:
        yield from _driver_floor(ctx, ctx.spec.cuda.toolkit, f"CUDA {ctx.spec.cuda.toolkit}", "cuda-driver")


def _driver_floor(ctx: _Ctx, cuda: DottedVersion, what: str, rule: str) -> Iterator[Finding]:
    """Family floor (blocker) and toolkit driver (warning: minor-version compatibility), RN132."""
    family = ctx.cat.cuda_family(cuda.major)
    if family is None:
        return
    branch = ctx.spec.driver.branch
    if branch < family.min_branch:
        message = (
            f"{what} needs driver branch >= {family.min_branch} (CUDA {cuda.major}.x minor-version "
            f"compatibility floor){_ga_hint(ctx, cuda)}; spec driver.branch is {branch}"
        )
        yield ctx.finding(f"{rule}-floor", "blocker", message, family.source)
        return
    yield from _toolkit_driver(ctx, cuda, what, rule)


def _ga_hint(ctx: _Ctx, cuda: DottedVersion) -> str:
    release = ctx.cat.cuda_release(cuda)
    if release is None or release.toolkit_driver is None:
        return ""
    return f"; full support from {release.toolkit_driver} (CUDA {release.release} GA toolkit driver)"


def _toolkit_driver(ctx: _Ctx, cuda: DottedVersion, what: str, rule: str) -> Iterator[Finding]:
    release = ctx.cat.cuda_release(cuda)
    if release is None or release.toolkit_driver is None:
        return
    needed, driver = release.toolkit_driver, ctx.spec.driver
    have = str(driver.version) if driver.version is not None else f"branch {driver.branch}"
    below = driver.version < needed if driver.version is not None else driver.branch < needed.branch
    if below:
        message = (
            f"{what}: driver {have} is below the toolkit driver {needed} (CUDA {release.release} GA); "
            "it runs under minor-version compatibility with reduced features (no JIT of newer PTX); "
            f"use >= {needed} for full support"
        )
        yield ctx.finding(f"{rule}-minor-compat", "warning", message, release.source)


# ---- PyTorch ------------------------------------------------------------------------------------------


def torch_release_known(ctx: _Ctx) -> Iterator[Finding]:
    py = ctx.spec.python
    if py is None or py.torch is None:
        return
    if ctx.torch is None:
        known = ", ".join(ctx.cat.torch_releases)
        message = f"python.torch {py.torch} is not a catalog PyTorch release; known: {known}"
        yield ctx.finding("torch-release-unknown", "blocker", message, ("PT-REL",))
    elif ctx.torch.status != "released":
        yield ctx.finding(
            "torch-release-unconfirmed",
            "warning",
            f"torch {ctx.torch.release} is {ctx.torch.status}, not confirmed released ({ctx.torch.note})",
            ctx.torch.source,
        )


def _published(ctx: _Ctx, py: PythonSpec) -> bool:
    """Whether the spec's variant exists for its exact torch version."""
    assert ctx.torch is not None and py.torch is not None and py.cuda_variant is not None
    build = ctx.torch.builds.get(py.cuda_variant)
    return build is not None and (build.since is None or py.torch >= build.since)


def torch_variant_published(ctx: _Ctx) -> Iterator[Finding]:
    py = ctx.spec.python
    if py is None or py.cuda_variant is None or ctx.torch is None or _published(ctx, py):
        return
    listed = ", ".join(_variant_label(ctx.torch, v) for v in ctx.torch.variants)
    yield ctx.finding(
        "torch-variant-unpublished",
        "blocker",
        f"torch {py.torch} has no {py.cuda_variant} wheels; published variants: {listed}",
        ctx.torch.source,
    )


def _variant_label(torch: TorchRelease, variant: str) -> str:
    since = torch.builds[variant].since
    return f"{variant} (from {since})" if since else variant


def torch_driver(ctx: _Ctx) -> Iterator[Finding]:
    py = ctx.spec.python
    if py is None or py.cuda_variant is None:
        return
    cuda = ctx.cat.variant_cuda(py.cuda_variant)
    yield from _driver_floor(ctx, cuda, f"torch {py.cuda_variant} (CUDA {cuda})", "torch-driver")


def torch_cuda_major(ctx: _Ctx) -> Iterator[Finding]:
    py, cuda = ctx.spec.python, ctx.spec.cuda
    if py is None or py.cuda_variant is None or cuda is None:
        return
    wheel = ctx.cat.variant_cuda(py.cuda_variant)
    if wheel.major != cuda.toolkit.major:
        message = (
            f"python.cuda_variant {py.cuda_variant} (CUDA {wheel}) and cuda.toolkit {cuda.toolkit} "
            f"differ in major; extensions built with nvcc {cuda.toolkit} will not match the wheel; "
            f"use a cu{cuda.toolkit.major}x variant or cuda.toolkit {wheel}"
        )
        yield ctx.finding("torch-cuda-major-mismatch", "warning", message, ("PT-REL", "RN132"))


def python_in_range(ctx: _Ctx) -> Iterator[Finding]:
    py, torch = ctx.spec.python, ctx.torch
    if py is None or torch is None:
        return
    interp = DottedVersion(f"{py.interpreter.major}.{py.interpreter.minor}")
    if not torch.python_min <= interp <= torch.python_max:
        yield ctx.finding(
            "python-version-range",
            "blocker",
            f"python.interpreter {py.interpreter} is outside torch {torch.release}'s supported "
            f"range {torch.python_min}-{torch.python_max}",
            ("PT-REL",),
        )


# ---- Wheel architectures (PT-MATRIX, FF-09) --------------------------------------------------------------


def _sass_covers(cc: DottedVersion, arches: ArchList) -> bool:
    """SASS for sm_XY runs on every GPU of major X with minor >= Y (same-major binary compatibility)."""
    return any(sm.major == cc.major and sm.minor <= cc.minor for sm in arches.sm)


def torch_arch(ctx: _Ctx) -> Iterator[Finding]:
    py, torch, gpu = ctx.spec.python, ctx.torch, ctx.gpu
    if py is None or py.cuda_variant is None or torch is None or gpu is None:
        return
    arches = torch.arches.get(py.cuda_variant)
    if arches is None or _sass_covers(gpu.compute_capability, arches):
        return
    listed = ", ".join(torch.arch_list(py.cuda_variant)) + ("+PTX" if arches.ptx else "")
    yield ctx.finding(
        "torch-arch-missing",
        "blocker",
        f"GPU {gpu.id} cc {gpu.compute_capability} not in wheel arch list of torch {py.torch}+"
        f"{py.cuda_variant} ({listed}); {_arch_fix(ctx.cat, gpu.compute_capability, torch)}. "
        "PTX JIT across a major architecture is not counted (FF-09)",
        (*arches.source, "FF"),
    )


def _arch_fix(cat: Catalog, cc: DottedVersion, torch: TorchRelease) -> str:
    same = [v for v in torch.variants if _sass_covers(cc, torch.arches[v])]
    if same:
        return f"use {' or '.join(same)} with torch {torch.release}"
    for rel in cat.torch_releases.values():
        good = [v for v in rel.variants if _sass_covers(cc, rel.arches[v])]
        if rel.release > torch.release and good and rel.status == "released":
            return f"need torch >= {rel.release}.0 with {good[0]} (or newer)"
    return "no catalog release compiles it"


# ---- Kernel module flavour and branch per architecture -----------------------------------------------------


def flavor_for_arch(ctx: _Ctx) -> Iterator[Finding]:
    gpu, rules = ctx.gpu, ctx.cat.kernel_modules
    if gpu is None:
        return
    flavor = resolve_flavor(ctx.spec, ctx.cat)
    if flavor == "proprietary" and _open_required(ctx, gpu):
        yield ctx.finding(
            "flavor-open-required",
            "blocker",
            f"{gpu.architecture.title} GPU {gpu.id} ({gpu.chip}) requires driver.flavor open; "
            "the proprietary module does not initialise it (RmInitAdapter failed, FF-06)",
            rules.open_required.source,
        )
    removed = rules.proprietary_removed
    if flavor == "proprietary" and ctx.spec.driver.branch >= removed.from_branch:
        yield ctx.finding(
            "flavor-proprietary-removed",
            "blocker",
            f"driver branch {ctx.spec.driver.branch} has no proprietary kernel modules (removed from "
            f"{removed.from_branch}); set driver.flavor: open, or a branch below {removed.from_branch}",
            removed.source,
        )
    if flavor == "open" and gpu.architecture in rules.proprietary_required.archs:
        yield ctx.finding(
            "flavor-proprietary-required",
            "blocker",
            f"{gpu.architecture.title} GPU {gpu.id} requires driver.flavor proprietary; open "
            "modules need a GSP (Turing and newer, FF-07)",
            rules.proprietary_required.source,
        )


def _open_required(ctx: _Ctx, gpu: GpuModel) -> bool:
    rules = ctx.cat.kernel_modules
    return gpu.architecture in rules.open_required.archs or gpu.id in rules.open_required_gpus.gpus


def branch_for_arch(ctx: _Ctx) -> Iterator[Finding]:
    gpu, branch = ctx.gpu, ctx.spec.driver.branch
    if gpu is None:
        return
    last = ctx.cat.last_branch_for(gpu.architecture)
    if last is not None and branch > last.branch:
        yield ctx.finding(
            "driver-branch-too-new-for-arch",
            "blocker",
            f"R{last.branch} is the last branch for {gpu.architecture.title} GPUs ({gpu.id}); "
            f"spec driver.branch is {branch}: set driver.branch: {last.branch}",
            last.source,
        )
    floor = ctx.cat.min_branch_for(gpu.architecture)
    if floor is not None and branch < floor.branch:
        yield ctx.finding(
            "arch-min-branch",
            "blocker",
            f"{gpu.architecture.title} GPU {gpu.id} needs driver branch >= {floor.branch}; "
            f"spec driver.branch is {branch}",
            floor.source,
        )


def arch_min_cuda(ctx: _Ctx) -> Iterator[Finding]:
    gpu, cuda = ctx.gpu, ctx.spec.cuda
    if gpu is None or cuda is None:
        return
    row = next((r for r in ctx.cat.arch_min_cuda if r.cc == gpu.compute_capability), None)
    if row is not None and cuda.toolkit < row.cuda:
        yield ctx.finding(
            "arch-min-cuda",
            "blocker",
            f"GPU {gpu.id} (cc {gpu.compute_capability}) needs CUDA >= {row.cuda}; "
            f"spec cuda.toolkit is {cuda.toolkit}",
            row.source,
        )


def branch_known(ctx: _Ctx) -> Iterator[Finding]:
    branch = ctx.spec.driver.branch
    if ctx.cat.driver_branch(branch) is None:
        message = (
            f"driver branch {branch} is not in the catalog's branch table "
            f"({_versions(ctx.cat.driver_branches)}); lifecycle and limits unchecked"
        )
        yield ctx.finding("driver-branch-unknown", "warning", message, ("DC-DRV",))


# ---- Repository and driver source --------------------------------------------------------------------------


def os_repo(ctx: _Ctx) -> Iterator[Finding]:
    spec = ctx.spec
    if spec.driver.source != "nvidia-repo" and spec.cuda is None:
        return
    code = spec.os.repo_code
    repo = ctx.cat.repository(code, spec.os.architecture)
    if repo is None:
        yield ctx.finding(
            "os-repo-unserved",
            "blocker",
            f"NVIDIA's CUDA repository serves no {code} ({spec.os.architecture}); served: "
            f"{', '.join(ctx.cat.repo_distros)}",
            ("DIG",),
        )
    elif spec.cuda is not None and _unconfirmed(ctx, spec.cuda.toolkit, repo.cuda_releases):
        message = (
            f"CUDA {spec.cuda.toolkit} is not confirmed in NVIDIA's {code} repository (confirmed: "
            f"{_versions(repo.cuda_releases)}); check the repository before apply"
        )
        yield ctx.finding("os-repo-cuda-unconfirmed", "warning", message, ctx.cat.repo_distros[code].source)


def _unconfirmed(ctx: _Ctx, toolkit: DottedVersion, confirmed: tuple[DottedVersion, ...]) -> bool:
    """A known, sourced release missing from a non-empty confirmed list (empty means unknown)."""
    release = ctx.cat.cuda_release(toolkit)
    return bool(confirmed) and toolkit not in confirmed and release is not None and release.verified


def driver_source_distro(ctx: _Ctx) -> Iterator[Finding]:
    if ctx.spec.driver.source != "distro":
        return
    code, branch = ctx.spec.os.repo_code, ctx.spec.driver.branch
    archive = ctx.cat.distro_archives.get(code)
    release = os_release(ctx.spec.os.distro, ctx.spec.os.version)
    if archive is None and release is not None and release.signed_open_kmods is False:
        message = (
            f"{ctx.spec.os.distro} {ctx.spec.os.version} ships no NVIDIA open kernel modules of its own "
            "(none signed with the distribution's Secure Boot key that the catalog could confirm); use "
            "driver.source nvidia-repo: DKMS builds them, signed with a MOK key enrolled at the console"
        )
        yield ctx.finding("driver-distro-unknown", "blocker", message, ("DIG-KMOD",))
    elif archive is None:
        message = (
            f"the catalog knows no NVIDIA driver packages in {code}'s own archive; use driver.source "
            f"nvidia-repo (known archives: {', '.join(ctx.cat.distro_archives)})"
        )
        yield ctx.finding("driver-distro-unknown", "blocker", message, ("HARNESS",))
    elif branch not in archive.driver_branches:
        message = (
            f"{code}'s archive carries driver branch {_versions(archive.driver_branches)}, not "
            f"{branch}; use driver.source nvidia-repo or branch {archive.driver_branches[-1]}"
        )
        yield ctx.finding("driver-distro-branch", "blocker", message, archive.source)
    elif _fm_wanted(ctx) and not archive.fabric_manager:
        message = (
            f"{code}'s archive has no fabric manager, which this NVSwitch system needs; use "
            "driver.source nvidia-repo"
        )
        yield ctx.finding("driver-distro-no-fm", "blocker", message, (*archive.source, "FMUG"))
    elif _fm_wanted(ctx):
        # The fabric manager must be the driver's exact build from the same archive; NVIDIA's
        # nvidia-fabricmanager on a distribution driver replaced libnvidia-compute with another
        # build (CUDA error 803). provision plans it only from NVIDIA's repository so far.
        message = (
            f"this NVSwitch system needs the fabric manager, which provision installs only with NVIDIA's "
            f"driver; {code}'s own nvidia-fabricmanager-{branch} is not planned yet, and NVIDIA's on a "
            "distribution driver mixes two builds; use driver.source nvidia-repo"
        )
        yield ctx.finding("driver-distro-fm-unplanned", "blocker", message, (*archive.source, "FMUG", "FF"))


# ---- Fabric manager (FF-03, FF-04) -----------------------------------------------------------------


def _fm_wanted(ctx: _Ctx) -> bool:
    gpu, spec = ctx.gpu, ctx.spec
    if spec.fabric_manager == "required":
        return True
    switched = gpu is not None and gpu.nvswitch and spec.gpus.count >= FM_SWITCH_GPUS
    return spec.fabric_manager == "auto" and switched


def fabric_manager(ctx: _Ctx) -> Iterator[Finding]:
    gpu, setting, count = ctx.gpu, ctx.spec.fabric_manager, ctx.spec.gpus.count
    if gpu is None:
        return
    if setting == "required" and not gpu.nvswitch:
        yield ctx.finding(
            "fm-without-nvswitch",
            "blocker",
            f"fabric_manager: required, but {gpu.id} has no NVSwitch; FM fails there with "
            "NV_WARN_NOTHING_TO_DO (FF-04); use auto or disabled",
            ("FMUG", "FF"),
        )
    if setting == "disabled" and gpu.nvswitch and count >= FM_SWITCH_GPUS:
        yield ctx.finding(
            "fm-disabled-on-nvswitch",
            "blocker",
            f"{count} x {gpu.id} is an NVSwitch system: fabric manager is required, CUDA fails "
            "with error 802 without it (FF-03); use auto or required",
            ("FMUG", "FF"),
        )


def cudnn_major_packaged(ctx: _Ctx) -> Iterator[Finding]:
    """``cuda.cudnn`` must be of the cuDNN major the repository packages for this CUDA major: the
    package names carry it (``libcudnn9-cuda-13``), so "8.9" could only fail inside apt, after the
    repository was written, with "no package matching"."""
    cuda = ctx.spec.cuda
    if cuda is None or cuda.cudnn is None:
        return
    runtime = ctx.cat.naming(package_format(ctx.spec.os.distro)).cudnn(cuda.toolkit.major)[0]
    packaged = re.match(r"libcudnn(\d+)-", runtime)
    if packaged is None or int(packaged.group(1)) == cuda.cudnn.major:
        return
    yield ctx.finding(
        "cudnn-major-unpackaged",
        "blocker",
        f"cuda.cudnn {cuda.cudnn} is cuDNN {cuda.cudnn.major}, but NVIDIA's repository packages cuDNN "
        f"{packaged.group(1)} for CUDA {cuda.toolkit.major} ({runtime}); choose a cuDNN "
        f"{packaged.group(1)}.x version",
        ("DIG", "CUDNN-SM"),
    )


RULES: tuple[Rule, ...] = (
    gpu_model_known,
    cuda_release_known,
    cuda_driver,
    torch_release_known,
    torch_variant_published,
    torch_driver,
    torch_cuda_major,
    python_in_range,
    torch_arch,
    flavor_for_arch,
    branch_for_arch,
    arch_min_cuda,
    branch_known,
    os_repo,
    driver_source_distro,
    fabric_manager,
    cudnn_major_packaged,
)
"""Every rule, in the order findings are reported."""
