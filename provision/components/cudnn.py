"""cuDNN 9: ``libcudnn9-cuda-<major>``, ``-headers`` and ``-dev`` for the toolkit's CUDA major
(``packages.yaml``). The whole family goes into one request: ``-dev`` depends on the headers at its
own version, so an upgrade of a held box that left the headers out could never resolve (issue 13)."""

from __future__ import annotations

from collections.abc import Iterable

from provision.components.base import Built, Component, InstallableComponent, PlanContext
from provision.components.steps import CUDNN_VERSION_PARTS, versioned_step
from provision.os.base import PackageManager, Pin
from provision.spec.models import Spec


class Cudnn(InstallableComponent):
    """cuDNN at ``cuda.cudnn`` (a version or prefix)."""

    name = Component.CUDNN
    spec_section = "cuda"
    facts = ("packages",)
    role = "nvidia_packages"
    tags = ("repository", "packages")
    transaction = True
    verify_checks = ("cudnn-version",)

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        cuda = ctx.spec.cuda
        if cuda is None or cuda.cudnn is None:
            return ()
        names = ctx.names.cudnn(cuda.toolkit.major)
        return (versioned_step(ctx, Component.CUDNN, names, cuda.cudnn, "", CUDNN_VERSION_PARTS),)

    def pins(self, spec: Spec, pm: PackageManager) -> tuple[Pin, ...]:
        cuda = spec.cuda
        if cuda is None or cuda.cudnn is None:
            return ()
        return (
            Pin(
                packages="libcudnn9* cudnn9*",
                version=pm.version_glob(cuda.cudnn, full_parts=CUDNN_VERSION_PARTS),
                why=f"cuDNN {cuda.cudnn}",
            ),
        )
