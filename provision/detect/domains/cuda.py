"""CUDA toolkits under ``/usr/local`` and the default ``nvcc``.

Sources: NVIDIA CUDA Installation Guide for Linux (toolkits install to ``/usr/local/cuda-X.Y`` with
``/usr/local/cuda`` pointing at the default one); ``nvcc --version`` output.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from provision.detect.fact import Derive, Fact, Parsed, Unknown, failure, first_line, if_probed, sh
from provision.models import Frozen
from provision.versions import Dotted, DottedVersion

_CUDA_DIR = re.compile(r"^cuda-(\d+\.\d+)$")
_NVCC = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)+)")


class CudaToolkits(Frozen):
    """CUDA toolkits under /usr/local and the default ``nvcc``."""

    installed: tuple[Dotted, ...] = Field((), description="Releases with a /usr/local/cuda-X.Y directory.")
    default_target: str | None = Field(None, description="What /usr/local/cuda points to, if a link.")
    nvcc_release: Dotted | None = Field(None, description="nvcc --version 'release X.Y'.")
    nvcc_version: Dotted | None = Field(None, description="nvcc --version 'VX.Y.Z'.")
    nvcc_path: str | None = Field(
        None,
        description="The nvcc the probe ran: the first on the default PATH, else /usr/local/cuda/bin/nvcc; "
        "None when not read (older captures).",
    )

    def nvcc_outside_toolkits(self) -> bool:
        """Whether the nvcc found is not one of /usr/local/cuda*'s (a distribution's /usr/bin/nvcc)."""
        return self.nvcc_path is not None and not self.nvcc_path.startswith("/usr/local/cuda")


def parse_cuda_dirs(output: str, rc: int) -> CudaToolkits | Unknown:
    """``ls -la /usr/local/`` (plus our ``resolved cuda -> X`` line) -> installed toolkits."""
    if (bad := failure("ls /usr/local", output, rc)) is not None:
        return bad
    versions: set[DottedVersion] = set()
    target: str | None = None
    for line in output.splitlines():
        words = line.split()
        if line.startswith("resolved cuda -> "):
            target = line.removeprefix("resolved cuda -> ").strip()
        elif len(words) >= 9 and _CUDA_DIR.match(words[8]) and line[0] in "dl":
            versions.add(DottedVersion(words[8].removeprefix("cuda-")))
        elif len(words) >= 11 and words[8] == "cuda" and words[9] == "->" and target is None:
            target = words[10]
    return CudaToolkits(installed=tuple(sorted(versions)), default_target=target)


def parse_nvcc(output: str, rc: int) -> tuple[DottedVersion, DottedVersion, str | None] | Unknown:
    """Our nvcc probe (its path, then ``nvcc --version``) -> (release ``13.0``, full version
    ``13.0.88``, the path, None when the output does not start with one)."""
    if (bad := failure("nvcc", output, rc)) is not None:
        return bad
    match = _NVCC.search(output)
    if match is None:
        return Unknown(unknown=f"no 'release X.Y, VX.Y.Z' in nvcc output: {first_line(output)}")
    path = first_line(output).strip()
    found = path if path.startswith("/") and path.endswith("/nvcc") else None
    return DottedVersion(match.group(1)), DottedVersion(match.group(2)), found


def merge_cuda(
    dirs: CudaToolkits | Unknown, nvcc: tuple[DottedVersion, DottedVersion, str | None] | Unknown
) -> CudaToolkits | Unknown:
    """Add nvcc's versions and path to the toolkit directories; no nvcc is not an unknown."""
    if isinstance(dirs, Unknown) or isinstance(nvcc, Unknown):
        return dirs
    return dirs.model_copy(update={"nvcc_release": nvcc[0], "nvcc_version": nvcc[1], "nvcc_path": nvcc[2]})


_CUDA_DIRS_SCRIPT = (
    "ls -la /usr/local/; "
    'if [ -L /usr/local/cuda ]; then echo "resolved cuda -> $(readlink -f /usr/local/cuda)"; fi'
)
# nvcc is rarely on a non-login PATH; fall back to the default toolkit's copy.
_NVCC_SCRIPT = 'p=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); echo "$p"; exec "$p" --version'


class CudaDirsFact(Fact[CudaToolkits]):
    """Toolkit directories and the ``/usr/local/cuda`` link."""

    id = "cuda-dirs"
    argv = sh(_CUDA_DIRS_SCRIPT)
    parse = staticmethod(parse_cuda_dirs)


class NvccFact(Fact[tuple[DottedVersion, DottedVersion, str | None]]):
    """The default nvcc's release, full version and path."""

    id = "nvcc"
    argv = sh(_NVCC_SCRIPT)
    requires = "nvcc"
    parse = staticmethod(parse_nvcc)


class LibraryCache(Frozen):
    """Where the dynamic linker finds the CUDA driver and runtime libraries (``ldconfig -p``).

    ``libraries`` maps a soname (``libcuda.so.1``) to its paths in the cache's order, the first
    being the one a program without LD_LIBRARY_PATH loads. Source: ldconfig(8).
    """

    libraries: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    def first(self, soname: str) -> str | None:
        """The path the loader picks for ``soname``, or None when the cache has none."""
        paths = self.libraries.get(soname, ())
        return paths[0] if paths else None


def parse_ldconfig(output: str, rc: int) -> LibraryCache | Unknown:
    """``ldconfig -p`` lines ``\\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1``."""
    if (bad := failure("ldconfig", output, rc)) is not None:
        return bad
    found: dict[str, tuple[str, ...]] = {}
    for match in re.finditer(r"^\s*(\S+) \([^)]*\) => (\S+)\s*$", output, re.MULTILINE):
        found[match.group(1)] = (*found.get(match.group(1), ()), match.group(2))
    return LibraryCache(libraries=found)


class LibraryCacheFact(Fact[LibraryCache]):
    """The loader cache's CUDA libraries: which libcuda a program loads (cuda-compat's or the driver's)."""

    id = "ld-cache"
    argv = ("sh", "-c", "ldconfig -p | grep -E 'lib(cuda|cudart|nvidia-ml|cudnn|nccl)[.]so'; exit 0")
    requires = "ldconfig"
    parse = staticmethod(parse_ldconfig)


FACTS: tuple[type[Fact[Any]], ...] = (CudaDirsFact, NvccFact, LibraryCacheFact)


def _cuda(p: Parsed) -> CudaToolkits | Unknown:
    dirs, nvcc = p.of(CudaDirsFact), p.of(NvccFact)
    return merge_cuda(dirs, nvcc)


FIELDS: dict[str, Derive] = {
    "cuda": _cuda,
    "ld_cache": if_probed(LibraryCacheFact),
}
