"""The CUDA toolkit: ``cuda-toolkit-X-Y`` only (never ``cuda`` or ``cuda-X-Y``, which pull in a
driver: FF-08; catalog ``packages.yaml``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.steps import noop
from provision.detect.unknown import Unknown
from provision.versions import DottedVersion

if TYPE_CHECKING:
    from provision.detect.facts import CudaToolkits

TAGS = ("repository", "packages")


class CudaToolkit(InstallableComponent):
    """The toolkit release of ``cuda.toolkit``."""

    name = Component.CUDA_TOOLKIT
    spec_section = "cuda"
    facts = ("packages", "cuda")
    role = "nvidia_packages"
    tags = TAGS
    transaction = True
    verify_checks = ("nvcc", "cuda-symlink")

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        return (cuda_toolkit_step(ctx),) if ctx.spec.cuda is not None else ()


def cuda_toolkit_step(ctx: PlanContext) -> Step:
    """Install ``cuda-toolkit-X-Y`` unless that release is already present."""
    assert ctx.spec.cuda is not None
    release = ctx.spec.cuda.toolkit
    name = ctx.names.cuda_toolkit(release)
    have = ctx.installed(name)
    if have is not None:
        return noop(
            Component.CUDA_TOOLKIT,
            current=have.version,
            target=str(release),
            reason=f"{name} {have.version} installed",
        )
    present = _present_without_meta(ctx.facts.cuda, release)
    if present:
        return noop(Component.CUDA_TOOLKIT, current=str(release), target=str(release), reason=present)
    return Step(
        component=Component.CUDA_TOOLKIT,
        action=Action.INSTALL,
        current=_toolkits_text(ctx.facts.cuda),
        target=str(release),
        packages=(ctx.pm.request(name),),
        tags=TAGS,
        reason=f"install {name} (toolkit only; never the driver-pulling cuda/cuda-X-Y metas, FF-08)",
    )


def _present_without_meta(cuda: CudaToolkits | Unknown, release: DottedVersion) -> str | None:
    """A reason when the toolkit's components are installed without its meta-package. The nvcc
    probed proves it only when it is one of /usr/local/cuda*'s: another one first on PATH (a
    distribution's /usr/bin/nvcc) says nothing of this toolkit (the cuda-toolkit-first invariant
    names it), and installing the meta would not change what PATH finds."""
    if isinstance(cuda, Unknown) or release not in cuda.installed:
        return None
    if cuda.nvcc_outside_toolkits():
        return (
            f"CUDA {release} present (/usr/local/cuda-{release}); the nvcc first on PATH is "
            f"{cuda.nvcc_path} (CUDA {cuda.nvcc_release}), not this toolkit's"
        )
    if cuda.nvcc_release != release:
        return None
    return (
        f"CUDA {release} present (/usr/local/cuda-{release}, nvcc {cuda.nvcc_version}); "
        "installed as components without the toolkit meta-package"
    )


def _toolkits_text(cuda: CudaToolkits | Unknown) -> str:
    if isinstance(cuda, Unknown) or not cuda.installed:
        return "absent"
    return ", ".join(str(v) for v in cuda.installed)
