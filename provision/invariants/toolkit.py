"""The CUDA toolkit that builds find is the spec's.

Extension builds look for CUDA in this order: ``CUDA_HOME``/``CUDA_PATH``, then the directory of
the first ``nvcc`` on ``PATH``, then ``/usr/local/cuda`` (PyTorch ``torch/utils/cpp_extension.py``,
``_find_cuda_home``; CMake's FindCUDAToolkit likewise starts from nvcc on PATH). A distribution's own
toolkit (Debian's and Ubuntu's ``nvidia-cuda-toolkit`` installs ``/usr/bin/nvcc``) is on every default
PATH, so it wins over ``/usr/local/cuda-X.Y`` unless ``CUDA_HOME`` says otherwise: extensions then
build with another CUDA than the one the spec installs. Judged on the nvcc the detection's default
PATH finds; a ``CUDA_HOME`` set in a user's own shell is not seen.
"""

from __future__ import annotations

from provision.catalog import Catalog
from provision.detect.facts import CudaToolkits, Facts, Unknown
from provision.invariants.base import Invariant, Verdict
from provision.spec.models import Spec
from provision.versions import DottedVersion

DISTRO_TOOLKIT = "nvidia-cuda-toolkit"
"""Debian's and Ubuntu's CUDA toolkit package, which installs /usr/bin/nvcc (packages.debian.org)."""


class ToolkitFirst(Invariant):
    """The first nvcc on the default PATH, or /usr/local/cuda without one, is the spec's toolkit."""

    id = "cuda-toolkit-first"
    title = "the spec's CUDA toolkit found first"
    layer = "toolkit"
    source = (
        "PyTorch torch/utils/cpp_extension.py _find_cuda_home "
        "(https://github.com/pytorch/pytorch/blob/main/torch/utils/cpp_extension.py); "
        "Debian nvidia-cuda-toolkit (https://packages.debian.org/bookworm/nvidia-cuda-toolkit)"
    )
    reads = ("cuda", "packages")
    severity = "warning"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        if spec.cuda is None:
            return self.not_applicable("no CUDA toolkit in the spec")
        cuda = facts.cuda
        if isinstance(cuda, Unknown):
            return self.unknown(cuda)
        want = spec.cuda.toolkit
        home = f"/usr/local/cuda-{want.major}.{want.minor}"
        if cuda.nvcc_release is None:
            return self._default_link(cuda, want, home)
        found = f"{cuda.nvcc_path or 'nvcc'} (CUDA {cuda.nvcc_release})"
        if _same(cuda.nvcc_release, want):
            return self.holds(f"{found} first on PATH")
        if cuda.nvcc_path is None:
            return self.unknown("the nvcc probe gave no path (an older capture)")
        if cuda.nvcc_outside_toolkits():
            return self._shadowed(facts, cuda, found, want, home)
        return self.violated(
            f"{found} first on PATH",
            f"{cuda.nvcc_path} is another toolkit than the spec's CUDA {want}",
            f"point /usr/local/cuda at {home} (update-alternatives --set cuda {home}) or put {home}/bin "
            f"first on PATH; set CUDA_HOME={home} for builds",
        )

    def _shadowed(
        self, facts: Facts, cuda: CudaToolkits, found: str, want: DottedVersion, home: str
    ) -> Verdict:
        owner = facts.package(DISTRO_TOOLKIT)
        builds = (
            f"torch extensions (no CUDA_HOME: the first nvcc on PATH) and CMake build with CUDA "
            f"{cuda.nvcc_release} from {cuda.nvcc_path}, not {home}"
        )
        if owner is not None and owner.installed:
            return self.violated(
                f"{found} first on PATH, from the distribution's {DISTRO_TOOLKIT} {owner.version}",
                f"the distribution's toolkit shadows the spec's CUDA {want}: {builds}",
                f"remove it ({facts.package_manager().remove_command((DISTRO_TOOLKIT,))}; "
                "provision installs cuda-toolkit-"
                f"{want.major}-{want.minor}), or set CUDA_HOME={home} and put {home}/bin first on PATH",
            )
        return self.violated(
            f"{found} first on PATH, outside /usr/local/cuda",
            f"another nvcc (a conda or hand-installed toolkit?) shadows the spec's CUDA {want}: {builds}",
            f"take {cuda.nvcc_path} off the default PATH, or set CUDA_HOME={home} and put {home}/bin first",
        )

    def _default_link(self, cuda: CudaToolkits, want: DottedVersion, home: str) -> Verdict:
        if cuda.default_target is None:
            return self.not_applicable(
                "no nvcc on PATH and no /usr/local/cuda link (toolkit not installed yet)"
            )
        if cuda.default_target.rstrip("/") == home:
            return self.holds(f"no nvcc on PATH; /usr/local/cuda -> {home}")
        return self.violated(
            f"no nvcc on PATH; /usr/local/cuda -> {cuda.default_target}",
            f"builds fall back to /usr/local/cuda, which is not the spec's CUDA {want}",
            f"update-alternatives --set cuda {home}, or set CUDA_HOME={home}",
        )


def _same(release: DottedVersion, want: DottedVersion) -> bool:
    return (release.major, release.minor) == (want.major, want.minor)
