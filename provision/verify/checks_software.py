"""Software checks: torch build and arch list, CUDA runtime vs driver, cuDNN, NCCL, nvcc and
/usr/local/cuda (FF-09, FF-10).
"""

from __future__ import annotations

import re

from provision.detect.facts import Unknown
from provision.fieldfailures import ff_ref
from provision.verify.context import Context, result, unknown
from provision.verify.models import CheckResult, Measured, Status, Threshold
from provision.versions import DottedVersion

_CUDNN = re.compile(r"^libcudnn\d+(-cuda-\d+)?$")


def torch_build(ctx: Context) -> list[CheckResult]:
    """torch in the venv is the spec's release and CUDA variant (``2.11.0+cu130``)."""
    title = "torch release and CUDA variant"
    py = ctx.spec.python
    if py is None or py.torch is None:
        return [unknown("torch-version", title, "the spec pins no torch", status="skip")]
    want = f"{py.torch}+{py.cuda_variant}"
    run = ctx.inputs.gpu_run
    got = run.torch if not isinstance(run, Unknown) else None
    if got is None:
        facts_torch = ctx.facts.torch
        if isinstance(facts_torch, Unknown):
            return [
                unknown("torch-version", title, facts_torch, hint="Run provision apply to install torch.")
            ]
        got = facts_torch.version
    return [
        result(
            "torch-version",
            title,
            "pass" if got == want else "fail",
            measured=Measured(value=got),
            threshold=Threshold(op="==", value=want, source="spec python.torch + python.cuda_variant"),
            hint="Run provision apply to install the pinned wheel from its variant's index.",
        )
    ]


def torch_arch(ctx: Context) -> list[CheckResult]:
    """Every GPU's ``sm_XY`` is in ``torch.cuda.get_arch_list()`` (older PTX only warns, FF-09)."""
    title = "GPU architecture compiled into the torch wheel"
    run, gpus = ctx.run, ctx.gpus
    if isinstance(run, Unknown) or isinstance(gpus, Unknown):
        why = run if isinstance(run, Unknown) else gpus
        assert isinstance(why, Unknown)
        return [unknown("torch-arch", title, why)]
    ccs = sorted({g.compute_capability for g in gpus if g.compute_capability is not None})
    return [_arch(cc, run.arch_list) for cc in ccs]


def _arch(cc: DottedVersion, arch_list: tuple[str, ...]) -> CheckResult:
    sm = f"sm_{cc.major}{cc.minor}"
    ptx = [
        a
        for a in arch_list
        if a.startswith("compute_") and int(a.removeprefix("compute_")) <= cc.major * 10 + cc.minor
    ]
    status: Status = "pass" if sm in arch_list else ("warn" if ptx else "fail")
    return result(
        "torch-arch",
        "GPU architecture compiled into the torch wheel",
        status,
        subject=sm,
        measured=Measured(value=" ".join(arch_list) or "empty"),
        threshold=Threshold(op="in", value=sm, source=f"FF-09 ({ff_ref(9)}); nvidia-smi compute_cap {cc}"),
        detail="runs only through PTX JIT" if status == "warn" else "",
        hint="Install a wheel whose CUDA variant compiles this arch (Blackwell: cu128 or newer).",
    )


def cuda_driver(ctx: Context) -> list[CheckResult]:
    """torch.version.cuda <= the driver's CUDA version; an older minor only warns (FF-10)."""
    title = "torch CUDA runtime supported by the driver"
    run = ctx.run
    if isinstance(run, Unknown) or run.cuda is None or run.driver_cuda is None:
        why = run if isinstance(run, Unknown) else "torch is a CPU build or the driver version is unknown"
        return [unknown("torch-cuda-driver", title, why)]
    driver = DottedVersion(f"{run.driver_cuda // 1000}.{run.driver_cuda % 1000 // 10}")
    runtime = DottedVersion(run.cuda)
    status: Status = "pass" if runtime <= driver else ("warn" if runtime.major == driver.major else "fail")
    return [
        result(
            "torch-cuda-driver",
            title,
            status,
            measured=Measured(value=f"torch CUDA {runtime}, driver CUDA {driver}"),
            threshold=Threshold(
                op="<=",
                value=f"driver CUDA {driver}",
                source=f"FF-10 ({ff_ref(10)}); CUDA minor-version compat",
            ),
            detail="minor-version compatibility: some features missing" if status == "warn" else "",
            hint="Upgrade the driver (CUDA 13.x needs R580+) or install a wheel built for an older CUDA.",
        )
    ]


def cudnn_version(value: int) -> str:
    """``torch.backends.cudnn.version()`` as text: 91900 -> 9.19.0 (cuDNN 9), 8902 -> 8.9.2 (cuDNN 8)."""
    if value >= 90000:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"


def libraries(ctx: Context) -> list[CheckResult]:
    """System cuDNN and NCCL packages match the spec's prefixes; torch's bundled copies are reported."""
    cuda = ctx.spec.cuda
    run = ctx.inputs.gpu_run
    bundled_cudnn = cudnn_version(run.cudnn) if not isinstance(run, Unknown) and run.cudnn else None
    bundled_nccl = run.nccl if not isinstance(run, Unknown) else None
    return [
        _library(ctx, "cudnn-version", "cuDNN", cuda.cudnn if cuda else None, _CUDNN, bundled_cudnn),
        _library(
            ctx,
            "nccl-version",
            "NCCL",
            cuda.nccl if cuda else None,
            re.compile(r"^libnccl\d+$"),
            bundled_nccl,
        ),
    ]


def _library(
    ctx: Context,
    check_id: str,
    name: str,
    want: DottedVersion | None,
    pattern: re.Pattern[str],
    bundled: str | None,
) -> CheckResult:
    title = f"{name} version as pinned"
    if want is None:
        return unknown(check_id, title, f"the spec pins no {name}", status="skip")
    packages = ctx.facts.packages
    if isinstance(packages, Unknown):
        return unknown(check_id, title, packages)
    found = [(p.name, ctx.pm.upstream(p.version)) for p in packages if pattern.match(p.name) and p.installed]
    ok = any(want.matches(v) for _, v in found if re.fullmatch(r"\d+(\.\d+)*", v))
    measured = ", ".join(f"{n} {v}" for n, v in found) or "not installed"
    if bundled:
        measured += f"; torch bundles {bundled}"
    return result(
        check_id,
        title,
        "pass" if ok else "fail",
        measured=Measured(value=measured),
        threshold=Threshold(op="==", value=f"{want}.*", source=f"spec cuda.{name.lower()}"),
        hint=f"Run provision apply to install and hold the pinned {name}.",
    )


def toolkit(ctx: Context) -> list[CheckResult]:
    """``nvcc`` release and the ``/usr/local/cuda`` target are the spec's toolkit."""
    cuda = ctx.spec.cuda
    if cuda is None:
        return [unknown("nvcc", "nvcc release", "the spec names no CUDA toolkit", status="skip")]
    facts = ctx.facts.cuda
    if isinstance(facts, Unknown):
        return [unknown("nvcc", "nvcc release", facts)]
    source = "spec cuda.toolkit"
    release = facts.nvcc_release.text if facts.nvcc_release else "nvcc not found"
    target = facts.default_target or "no /usr/local/cuda link"
    hint = f"Install cuda-toolkit-{cuda.toolkit.major}-{cuda.toolkit.minor} and point /usr/local/cuda at it."
    return [
        result(
            "nvcc",
            "nvcc release",
            "pass" if release == cuda.toolkit.text else "fail",
            measured=Measured(value=release),
            threshold=Threshold(op="==", value=cuda.toolkit.text, source=source),
            hint=hint,
        ),
        result(
            "cuda-symlink",
            "/usr/local/cuda target",
            "pass" if target.endswith(f"cuda-{cuda.toolkit}") else "fail",
            measured=Measured(value=target),
            threshold=Threshold(op="==", value=f"/usr/local/cuda-{cuda.toolkit}", source=source),
            hint=hint,
        ),
    ]


CHECKS = (torch_build, torch_arch, cuda_driver, libraries, toolkit)
