"""One CUDA world per venv: torch's CUDA build, the CUDA wheels beside it and the toolkit agree.

torch loads the CUDA libraries of the ``nvidia-*`` wheels in its venv; a wheel built for another
CUDA major (``nvidia-cudnn-cu12`` beside a cu13 torch) or a toolkit of another major (extensions
built with nvcc) breaks at import or at the first kernel. PyTorch's own check refuses a major
mismatch between torch and nvcc and warns on a minor one (``torch/utils/cpp_extension.py``,
``_check_cuda_version``: https://github.com/pytorch/pytorch/blob/main/torch/utils/cpp_extension.py).
"""

from __future__ import annotations

import functools
import re

from provision.catalog import Catalog
from provision.detect.facts import CudaToolkits, Facts, Torch, Unknown, Venv
from provision.invariants.base import Invariant, Verdict
from provision.memo import by_identity
from provision.spec.models import Spec
from provision.versions import DottedVersion

_SUFFIX = re.compile(r"(?:-cu|[-_]cuda)(\d{2,})x?(?:$|-)")
"""``nvidia-cudnn-cu13``, ``cupy-cuda13x``, ``jax-cuda13-plugin``: the CUDA major in the name."""
_RUNTIME = ("nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "cuda-toolkit")
"""Wheels whose own version is the CUDA version (``nvidia-cuda-runtime`` 13.0.96)."""


def wheel_majors(venv: Venv) -> dict[str, int]:
    """Distribution -> the CUDA major it was built for, for the CUDA wheels of ``venv``."""
    return dict(_wheel_majors(venv))


@by_identity()
def _wheel_majors(venv: Venv) -> tuple[tuple[str, int], ...]:
    # Three invariants ask per host, and the hosts of one image share one parsed Venv.
    found: list[tuple[str, int]] = []
    for name, version in venv.distributions.items():
        if (major := _named_major(name)) is not None:
            found.append((name, major))
        elif name in _RUNTIME and (first := version.split(".")[0]).isdigit():
            found.append((name, int(first)))
    return tuple(found)


@functools.lru_cache(maxsize=8192)
def _named_major(name: str) -> int | None:
    # Cached by name: invariants ask once per host and a fleet's venvs hold the same wheels.
    return int(match.group(1)) if (match := _SUFFIX.search(name)) is not None else None


def foreign_wheels(venv: Venv, built: DottedVersion) -> tuple[str, ...]:
    """The venv's CUDA wheels built for another CUDA major than torch's ``built``, sorted."""
    return tuple(sorted(n for n, m in wheel_majors(venv).items() if m != built.major))


def torch_cuda(torch: Torch) -> DottedVersion | None:
    try:
        return DottedVersion(torch.cuda) if torch.cuda else None
    except ValueError:
        return None


class OneCudaWorld(Invariant):
    """torch's CUDA major, the venv's CUDA wheels and nvcc agree (a minor apart only warns)."""

    id = "one-cuda-world"
    title = "one CUDA major in the venv and toolkit"
    layer = "venv"
    source = "PyTorch torch/utils/cpp_extension.py _check_cuda_version (https://github.com/pytorch/pytorch/blob/main/torch/utils/cpp_extension.py)"
    reads = ("torch", "venv", "cuda")
    severity = "warning"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        torch, venv = facts.torch, facts.venv
        if isinstance(torch, Unknown):
            if spec.python is None:
                return self.not_applicable("no venv in the spec")
            return self.unknown(torch)
        built = torch_cuda(torch)
        if built is None:
            return self.violated(
                f"torch {torch.version} has no CUDA (torch.version.cuda is None)",
                "a CPU-only torch wheel is installed",
                f"install torch from the {spec.python.cuda_variant if spec.python else 'cuXXX'} index "
                "(apply does this when the spec names the variant)",
            )
        wheels = wheel_majors(venv) if isinstance(venv, Venv) else {}
        foreign = foreign_wheels(venv, built) if isinstance(venv, Venv) else ()
        if foreign:
            return self.violated(
                f"torch CUDA {built}; " + ", ".join(f"{n} (CUDA {wheels[n]})" for n in foreign),
                "wheels built for another CUDA major are in the venv",
                f"pip uninstall {' '.join(foreign)} in {torch.venv} (apply removes them)",
                repaired=True,
            )
        return self._toolkit(built, facts.cuda, len(wheels))

    def _toolkit(self, built: DottedVersion, cuda: CudaToolkits | Unknown, wheels: int) -> Verdict:
        nvcc = None if isinstance(cuda, Unknown) else cuda.nvcc_release
        seen = f"torch CUDA {built}, {wheels} CUDA wheel(s) of CUDA {built.major}"
        if nvcc is None:
            return self.holds(seen + "; no nvcc")
        if nvcc.major != built.major:
            shadow = (
                cuda.nvcc_path if not isinstance(cuda, Unknown) and cuda.nvcc_outside_toolkits() else None
            )
            return self.violated(
                f"{seen}; nvcc {nvcc}" + (f" ({shadow})" if shadow else ""),
                f"the toolkit is CUDA {nvcc.major}, torch is built for CUDA {built.major}",
                _major_fix(shadow),
            )
        if nvcc.minor != built.minor:
            return self.violated(
                f"{seen}; nvcc {nvcc}",
                "nvcc and torch differ in the CUDA minor version",
                "extensions build, with PyTorch's warning; match cuda.toolkit to the variant to silence it",
                notice=True,
            )
        return self.holds(f"{seen}; nvcc {nvcc}")


def _major_fix(shadow: str | None) -> str:
    if shadow is not None:
        return (
            f"{shadow} is not /usr/local/cuda's: take it off the PATH or set CUDA_HOME (cuda-toolkit-first)"
        )
    return "set cuda.toolkit to the CUDA release of the torch variant (or the variant to the toolkit)"
