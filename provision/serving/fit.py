"""Will the model fit? vLLM's memory budget per GPU, computed before anything is installed. Pure.

vLLM gives each GPU of an instance ``total GPU memory x gpu_memory_utilization`` ("the current vLLM
instance can use total_gpu_memory x gpu_memory_utilization", vLLM PR #10511/#12126 logs); out of it
come the model's weights (split over the tensor-parallel GPUs), its activation peak and memory outside
PyTorch (the runtime allowance, ``serving.yaml``), and the KV cache. The plan asks the KV cache to hold
``max_context`` tokens for each of ``sequences`` concurrent sequences.

- Weights: linear parameters x bytes per parameter + embedding parameters x their bytes (serving.yaml
  ``weight_formats``), divided by the tensor-parallel size.
- KV cache per token: 2 (K and V) x layers x KV heads x head size x bytes per element; on each GPU the
  KV heads are ``KV / TP``, or one (replicated) when TP >= KV heads (vLLM ``QKVParallelLinear``).
- Tensor parallelism: vLLM refuses a TP size that does not divide the attention heads, and needs the
  KV heads to divide by TP (or TP by the KV heads when TP >= KV heads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from provision.models import Frozen
from provision.serving.arch import ModelArchitecture

if TYPE_CHECKING:
    from provision.catalog.serving import ServingData

GIB = 1 << 30
"""Bytes per GiB; vLLM reports memory in GiB."""
MAX_TENSOR_PARALLEL = 64
"""Largest TP size suggested (NVIDIA's largest NVLink domain is 72 GPUs; TP sizes are divisors of heads)."""
CONTEXT_STEP = 256
"""Suggested shorter contexts are rounded down to a multiple of this many tokens."""


class FitRequest(Frozen):
    """What is asked: a model, its formats, the load, and the GPUs.

    Attributes:
        gpu_gib: Memory of one GPU, GiB (the catalog's ``memory_gib`` of ``gpus.model``).
        utilization: vLLM ``--gpu-memory-utilization``, the fraction of each GPU's memory vLLM may use.
    """

    arch: ModelArchitecture
    weights: str
    kv_cache_dtype: str = "auto"
    max_context: int = Field(ge=1)
    sequences: int = Field(ge=1)
    tensor_parallel: int = Field(ge=1)
    gpu_count: int = Field(ge=1)
    gpu_gib: float = Field(gt=0)
    gpu_name: str = "GPU"
    utilization: float = Field(gt=0, le=1)


class Fit(Frozen):
    """The arithmetic for one request, per GPU, in bytes, and whether it fits.

    Attributes:
        weights_bytes: The whole model's weights.
        kv_bytes_per_token: K and V of one token over all layers, whole model.
        kv_bytes_per_token_gpu: The same on one GPU (its share of KV heads).
        kv_bytes_gpu: KV cache for ``max_context x sequences`` tokens on one GPU.
        allowance_bytes: Runtime allowance on one GPU.
        budget_bytes: ``gpu_gib x utilization`` in bytes.
        spare_bytes: Budget minus weights/TP, allowance and KV cache (negative: it does not fit).
        kv_tokens: Tokens of KV cache that fit on each GPU beside weights and allowance.
        lines: The arithmetic, one step per line, for the plan.
    """

    fits: bool
    weights_bytes: int
    kv_bytes_per_token: int
    kv_bytes_per_token_gpu: int
    kv_bytes_gpu: int
    allowance_bytes: int
    budget_bytes: int
    spare_bytes: int
    kv_tokens: int
    lines: tuple[str, ...]


def kv_heads_per_gpu(arch: ModelArchitecture, tp: int) -> int:
    """KV heads each GPU holds: ``KV / TP``, or 1 (replicated) when TP >= KV heads (QKVParallelLinear)."""
    return max(1, arch.kv_heads // tp)


def tp_problem(arch: ModelArchitecture, tp: int) -> str | None:
    """Why vLLM refuses tensor-parallel size ``tp`` for this model, or None."""
    if arch.attention_heads % tp:
        return f"{arch.attention_heads} attention heads are not divisible by tensor_parallel_size {tp}"
    if tp >= arch.kv_heads and tp % arch.kv_heads:
        return f"tensor_parallel_size {tp} is not a multiple of the {arch.kv_heads} KV heads"
    if tp < arch.kv_heads and arch.kv_heads % tp:
        return f"{arch.kv_heads} KV heads are not divisible by tensor_parallel_size {tp}"
    return None


def valid_tp_sizes(arch: ModelArchitecture, upto: int) -> tuple[int, ...]:
    """Every TP size from 1 to ``upto`` that vLLM accepts for this model."""
    return tuple(t for t in range(1, upto + 1) if tp_problem(arch, t) is None)


def compute_fit(req: FitRequest, data: ServingData) -> Fit:
    """The per-GPU arithmetic of ``req`` (call only with a TP size :func:`tp_problem` accepts)."""
    arch, tp = req.arch, req.tensor_parallel
    fmt = data.weight(req.weights)
    total, embed = arch.parameter_count(), arch.embedding_parameters()
    linear = max(total - embed, 0)
    weights = round(linear * fmt.linear + embed * fmt.embeddings)
    elem = data.kv_bytes(req.kv_cache_dtype, req.weights)
    per_token = 2 * arch.layers * arch.kv_heads * arch.head_dim * elem
    per_token_gpu = 2 * arch.layers * kv_heads_per_gpu(arch, tp) * arch.head_dim * elem
    tokens = req.max_context * req.sequences
    kv_gpu = per_token_gpu * tokens
    allowance = round(data.runtime_allowance.gib(tp) * GIB)
    budget = round(req.gpu_gib * req.utilization * GIB)
    weights_gpu = -(-weights // tp)
    spare = budget - weights_gpu - allowance - kv_gpu
    room = budget - weights_gpu - allowance
    lines = _lines(
        req,
        fmt.linear,
        fmt.embeddings,
        elem,
        (linear, embed, weights, weights_gpu),
        (per_token, per_token_gpu, kv_gpu),
        allowance,
        budget,
        spare,
    )
    return Fit(
        fits=spare >= 0,
        weights_bytes=weights,
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_gpu=per_token_gpu,
        kv_bytes_gpu=kv_gpu,
        allowance_bytes=allowance,
        budget_bytes=budget,
        spare_bytes=spare,
        kv_tokens=max(room, 0) // per_token_gpu,
        lines=lines,
    )


def _gib(value: int) -> str:
    return f"{value / GIB:,.1f} GiB"


def _lines(
    req: FitRequest,
    linear_b: float,
    embed_b: float,
    elem: int,
    weights: tuple[int, int, int, int],
    kv: tuple[int, int, int],
    allowance: int,
    budget: int,
    spare: int,
) -> tuple[str, ...]:
    arch, tp = req.arch, req.tensor_parallel
    linear, embed, total, per_gpu = weights
    per_token, per_token_gpu, kv_gpu = kv
    need = per_gpu + allowance + kv_gpu
    verdict = "fits" if spare >= 0 else f"does not fit (short by {_gib(-spare)} per GPU)"
    return (
        f"weights ({req.weights}): {linear:,} linear params x {linear_b:g} B + {embed:,} embedding params "
        f"x {embed_b:g} B = {total / 1e9:,.1f} GB ({_gib(total)}); / TP {tp} = {_gib(per_gpu)} per GPU",
        f"KV cache per token: 2 x {arch.layers} layers x {arch.kv_heads} KV heads "
        f"x {arch.head_dim} head size x {elem} B = {per_token:,} B; "
        f"per GPU ({kv_heads_per_gpu(arch, tp)} KV heads) {per_token_gpu:,} B",
        f"KV cache: {per_token_gpu:,} B x {req.max_context:,} tokens x {req.sequences} sequence(s) "
        f"= {_gib(kv_gpu)} per GPU",
        f"runtime allowance (activation peak, CUDA graphs, NCCL): {_gib(allowance)} per GPU",
        f"budget: {req.gpu_name} {req.gpu_gib:g} GiB x gpu_memory_utilization {req.utilization:g} "
        f"= {_gib(budget)} per GPU",
        f"need {_gib(per_gpu)} + {_gib(allowance)} + {_gib(kv_gpu)} = {_gib(need)} per GPU "
        f"{'<=' if spare >= 0 else '>'} {_gib(budget)}: {verdict}",
    )


def alternatives(req: FitRequest, data: ServingData) -> tuple[str, ...]:
    """What would fit when ``req`` does not: other weight formats, an FP8 KV cache, a shorter
    context, fewer sequences, or more GPUs of the same model (TP sizes vLLM accepts). Each entry
    names the spec change; empty when nothing close fits."""
    fit = compute_fit(req, data)
    found = [*_formats(req, data), *_kv_fp8(req, data)]
    per_seq = fit.kv_tokens // req.sequences
    if per_seq >= CONTEXT_STEP:
        found.append(
            f"serve.max_context: {per_seq // CONTEXT_STEP * CONTEXT_STEP} (with {req.sequences} sequences)"
        )
    if fit.kv_tokens // req.max_context >= 1:
        found.append(f"serve.sequences: {fit.kv_tokens // req.max_context} (at {req.max_context:,} tokens)")
    found.extend(_more_gpus(req, data))
    return tuple(found)


def _fits(req: FitRequest, data: ServingData, **change: object) -> bool:
    return compute_fit(req.model_copy(update=change), data).fits


def _formats(req: FitRequest, data: ServingData) -> list[str]:
    here = data.weight(req.weights).linear
    return [
        f"serve.weights: {w.id}"
        for w in data.weight_formats
        if w.linear < here and _fits(req, data, weights=w.id)
    ][:2]


def _kv_fp8(req: FitRequest, data: ServingData) -> list[str]:
    if req.kv_cache_dtype == "fp8" or not _fits(req, data, kv_cache_dtype="fp8"):
        return []
    return ["serve.kv_cache_dtype: fp8"]


def _more_gpus(req: FitRequest, data: ServingData) -> list[str]:
    for tp in range(req.tensor_parallel + 1, MAX_TENSOR_PARALLEL + 1):
        if tp_problem(req.arch, tp) is None and _fits(req, data, tensor_parallel=tp, gpu_count=tp):
            return [f"{tp} x {req.gpu_name} (tensor_parallel_size {tp})"]
    return []
