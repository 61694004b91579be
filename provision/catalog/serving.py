"""The catalog file ``data/serving.yaml``: memory-fit constants and vLLM's torch pins, each sourced.

Loaded apart from :func:`~provision.catalog.load_catalog` (only the serve component reads it) but
checked the same way: every row's source keys must exist in ``sources.yaml``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version
from pydantic import Field, field_validator

from provision.catalog.models import Sourced
from provision.catalog.tables import DATA_DIR, SourcesFile, _check_sources, _load, _unique
from provision.models import Frozen
from provision.versions import Pep440


class WeightFormat(Sourced):
    """Bytes per parameter of one weight format (``serve.weights``).

    Attributes:
        linear: Bytes per parameter of the decoder's linear layers (scales and zero points included).
        embeddings: Bytes per parameter of the token embedding and LM head (kept 16-bit when quantized).
        activation_bytes: Bytes of the compute dtype; the KV cache's element size under ``auto``.
        vllm_dtype: vLLM ``--dtype``.
        vllm_quantization: vLLM ``--quantization``, None for unquantized weights.
    """

    id: Literal["fp32", "fp16", "bf16", "fp8", "awq-int4", "gptq-int4"]
    linear: float = Field(gt=0)
    embeddings: float = Field(gt=0)
    activation_bytes: int = Field(ge=1)
    vllm_dtype: Literal["float32", "float16", "bfloat16"]
    vllm_quantization: Literal["fp8", "awq", "gptq"] | None


class KvCacheDtype(Sourced):
    """Bytes of one K or V element in the cache; None: the weight format's activation bytes."""

    id: Literal["auto", "fp8"]
    bytes: int | None = Field(None, ge=1)


class RuntimeAllowance(Sourced):
    """GiB per GPU that vLLM uses beside weights and KV cache (activation peak and non-torch memory)."""

    single_gpu_gib: float = Field(gt=0)
    tensor_parallel_gib: float = Field(gt=0)

    def gib(self, tensor_parallel: int) -> float:
        """The allowance for one GPU of a ``tensor_parallel``-way instance (NCCL buffers from 2 on)."""
        return self.single_gpu_gib if tensor_parallel == 1 else self.tensor_parallel_gib


class VllmRelease(Sourced):
    """One vLLM release on PyPI: the torch its wheel pins, its Python range, its CUDA build."""

    version: Pep440
    torch: Pep440
    python: tuple[str, ...]
    cuda_variant: str = Field(pattern=r"^cu\d{3}$")

    @field_validator("python")
    @classmethod
    def _specifiers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            SpecifierSet(",".join(value))
        except InvalidSpecifier as exc:
            raise ValueError(f"not a Python version range: {exc}") from None
        return value

    def python_allows(self, version: str) -> bool:
        """Whether Requires-Python admits interpreter ``version`` (``3.12``)."""
        return SpecifierSet(",".join(self.python)).contains(Version(version))


class TensorParallelRule(Sourced):
    """Where vLLM's tensor-parallel divisibility rules come from."""


class ServingData(Frozen):
    """The whole of ``serving.yaml``."""

    weight_formats: tuple[WeightFormat, ...]
    kv_cache_dtypes: tuple[KvCacheDtype, ...]
    runtime_allowance: RuntimeAllowance
    vllm_releases: tuple[VllmRelease, ...]
    tensor_parallel: TensorParallelRule

    def weight(self, fmt: str) -> WeightFormat:
        """The weight format ``fmt`` (spec values are validated against these ids)."""
        return next(w for w in self.weight_formats if w.id == fmt)

    def kv_bytes(self, kv: str, fmt: str) -> int:
        """Bytes per cached element for ``kv_cache_dtype`` ``kv`` with weights in ``fmt``."""
        row = next(k for k in self.kv_cache_dtypes if k.id == kv)
        return row.bytes if row.bytes is not None else self.weight(fmt).activation_bytes

    def vllm(self, version: Version) -> VllmRelease | None:
        """The catalog row of vLLM ``version`` (exact), or None."""
        return next((r for r in self.vllm_releases if r.version == version), None)


def load_serving_from(directory: Path) -> ServingData:
    """Load and check ``serving.yaml`` in ``directory`` against its ``sources.yaml``.

    Raises:
        CatalogError: Naming the file and the problem (bad row, unknown source key, duplicate version).
    """
    data = _load(directory, "serving.yaml", ServingData)
    sources = _load(directory, "sources.yaml", SourcesFile).sources
    _check_sources("serving.yaml", data, sources)
    _unique("serving.yaml", "vLLM versions", [str(r.version) for r in data.vllm_releases])
    return data


@functools.cache
def load_serving() -> ServingData:
    """The shipped ``serving.yaml``, loaded once per process."""
    return load_serving_from(DATA_DIR)
