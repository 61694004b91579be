"""NCCL: ``libnccl2`` and ``libnccl-dev`` built for the toolkit's release, ``<nccl>-1+cuda<X.Y>``
(catalog ``packages.yaml``)."""

from __future__ import annotations

from collections.abc import Iterable

from provision.components.base import Built, Component, InstallableComponent, PlanContext
from provision.components.steps import NCCL_VERSION_PARTS, versioned_step
from provision.os.base import PackageManager, Pin
from provision.spec.models import Spec


class Nccl(InstallableComponent):
    """NCCL at ``cuda.nccl`` (a version or prefix) for ``cuda.toolkit``."""

    name = Component.NCCL
    spec_section = "cuda"
    facts = ("packages",)
    role = "nvidia_packages"
    tags = ("repository", "packages")
    transaction = True
    verify_checks = ("nccl-version", "nccl-allreduce")

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        cuda = ctx.spec.cuda
        if cuda is None or cuda.nccl is None:
            return ()
        names = ctx.names.nccl()
        suffix = f"+cuda{cuda.toolkit}"
        return (versioned_step(ctx, Component.NCCL, names, cuda.nccl, suffix, NCCL_VERSION_PARTS),)

    def pins(self, spec: Spec, pm: PackageManager) -> tuple[Pin, ...]:
        cuda = spec.cuda
        if cuda is None or cuda.nccl is None:
            return ()
        return (
            Pin(
                packages="libnccl*",
                version=pm.version_glob(cuda.nccl, f"+cuda{cuda.toolkit}", NCCL_VERSION_PARTS),
                why=f"NCCL {cuda.nccl} for CUDA {cuda.toolkit}",
            ),
        )
