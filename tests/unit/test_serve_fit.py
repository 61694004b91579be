"""The memory-fit planner over real published model configurations and the catalog's GPUs.

Model figures: tests/fixtures/serve/configs/ (each file's published config.json URL in its README).
Cross-checks against public figures: the Hub's parameter counts, vLLM PR #10511's log of
Meta-Llama-3-8B weights (14.96 GiB), and a published set-up guide's claim of a 405B model in bf16 on two
128 GB cards, which must be refused with what would fit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.catalog import load_catalog
from provision.catalog.serving import load_serving
from provision.serving.arch import ModelArchitecture
from provision.serving.fit import GIB, FitRequest, alternatives, compute_fit, tp_problem, valid_tp_sizes
from provision.serving.modelconfig import parse_config_json

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "serve" / "configs"
DATA = load_serving()
CATALOG = load_catalog()


def arch(name: str) -> ModelArchitecture:
    parsed = parse_config_json((CONFIGS / f"{name}.json").read_text(), name)
    assert isinstance(parsed, ModelArchitecture), parsed
    return parsed


def request(
    model: str,
    gpu: str | float,
    count: int,
    *,
    weights: str = "bf16",
    context: int = 8192,
    sequences: int = 1,
    tp: int | None = None,
    kv: str = "auto",
    util: float = 0.9,
) -> FitRequest:
    gib = gpu if isinstance(gpu, float) else CATALOG.gpus[gpu].memory_gib
    return FitRequest(
        arch=arch(model),
        weights=weights,
        kv_cache_dtype=kv,
        max_context=context,
        sequences=sequences,
        tensor_parallel=tp or count,
        gpu_count=count,
        gpu_gib=gib,
        gpu_name=str(gpu),
        utilization=util,
    )


# The Hub's parameter count of each model (its model page, from the safetensors), to 3 digits.
@pytest.mark.parametrize(
    ("model", "billions"),
    [
        ("llama-3.1-8b", 8.03),
        ("llama-3.1-70b", 70.6),
        ("llama-3.1-405b", 406),
        ("qwen2.5-7b", 7.62),
        ("qwen2.5-72b", 72.7),
        ("mixtral-8x7b", 46.7),
    ],
)
def test_parameters_derived_from_config_match_the_published_count(model: str, billions: float) -> None:
    assert float(f"{arch(model).parameter_count() / 1e9:.3g}") == billions


def test_weights_match_vllms_own_log_for_llama3_8b() -> None:
    # vLLM PR #10511: "model weights take 14.96GiB" (bf16, TP 1) and 7.48GiB at TP 2.
    one = compute_fit(request("llama-3.1-8b", "h100-sxm", 1), DATA)
    two = compute_fit(request("llama-3.1-8b", "h100-sxm", 2), DATA)
    assert round(one.weights_bytes / GIB, 2) == 14.96
    assert round(one.weights_bytes / 2 / GIB, 2) == 7.48 and two.weights_bytes == one.weights_bytes


def test_kv_cache_per_token_is_two_x_layers_x_kv_heads_x_head_size_x_bytes() -> None:
    fit = compute_fit(request("llama-3.1-70b", "h200-sxm", 2), DATA)
    assert fit.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680
    assert fit.kv_bytes_per_token_gpu == 327_680 // 2  # 4 of the 8 KV heads on each GPU
    fp8 = compute_fit(request("llama-3.1-70b", "h200-sxm", 2, kv="fp8"), DATA)
    assert fp8.kv_bytes_per_token == 327_680 // 2


def test_kv_heads_are_replicated_when_tp_exceeds_them() -> None:
    # Qwen2.5-7B has 4 KV heads: at TP 4 each GPU holds one, the same as at TP 8 would (QKVParallelLinear).
    fit = compute_fit(request("qwen2.5-7b", "l4", 4), DATA)
    assert fit.kv_bytes_per_token_gpu == 2 * 28 * 1 * 128 * 2


# model, weights, GPU, count, context, sequences, fits? (the catalog's memory and vLLM's 0.9 default)
TABLE = [
    ("llama-3.1-8b", "bf16", "l4", 1, 8192, 1, True),
    ("llama-3.1-8b", "bf16", "l4", 1, 131072, 1, False),
    ("llama-3.1-8b", "bf16", "h200-sxm", 1, 131072, 8, False),
    ("llama-3.1-8b", "bf16", "h200-sxm", 1, 32768, 8, True),
    ("llama-3.1-70b", "bf16", "h100-sxm", 1, 8192, 1, False),
    ("llama-3.1-70b", "bf16", "h100-sxm", 4, 32768, 4, True),
    ("llama-3.1-70b", "awq-int4", "a100-sxm4-80gb", 1, 8192, 1, True),
    ("llama-3.1-70b", "bf16", "h200-sxm", 2, 32768, 4, True),
    ("llama-3.1-405b", "bf16", "h100-sxm", 8, 8192, 1, False),
    ("llama-3.1-405b", "fp8", "h100-sxm", 8, 8192, 4, True),
    ("llama-3.1-405b", "bf16", "h200-sxm", 8, 8192, 4, True),
    ("llama-3.1-405b", "bf16", "h200-nvl", 2, 8192, 1, False),
    ("qwen2.5-72b", "bf16", "a100-sxm4-80gb", 4, 32768, 1, True),
    ("qwen2.5-72b", "bf16", "a100-sxm4-80gb", 2, 32768, 1, False),
    ("qwen2.5-72b", "bf16", "l40s", 2, 8192, 1, False),
    ("mixtral-8x7b", "bf16", "h100-sxm", 2, 32768, 4, True),
    ("mixtral-8x7b", "bf16", "a100-pcie-40gb", 2, 8192, 1, False),
]


@pytest.mark.parametrize(
    ("model", "weights", "gpu", "count", "context", "sequences", "fits"),
    TABLE,
    ids=[f"{m}-{w}-{c}x{g}-{ctx}x{s}" for m, w, g, c, ctx, s, _ in TABLE],
)
def test_fit_table(
    model: str, weights: str, gpu: str, count: int, context: int, sequences: int, fits: bool
) -> None:
    req = request(model, gpu, count, weights=weights, context=context, sequences=sequences)
    fit = compute_fit(req, DATA)
    assert fit.fits is fits, "\n".join(fit.lines)
    assert fit.lines[-1].endswith("fits") if fits else "does not fit" in fit.lines[-1]
    if not fits:
        other = alternatives(req, DATA)
        assert other, "a refusal names what would fit"
        for change in other:
            assert _applies(req, change), change


def _applies(req: FitRequest, change: str) -> bool:
    """Each suggested change, applied to the request, fits."""
    field, _, value = change.partition(": ")
    if field == "serve.weights":
        return compute_fit(req.model_copy(update={"weights": value}), DATA).fits
    if field == "serve.kv_cache_dtype":
        return compute_fit(req.model_copy(update={"kv_cache_dtype": value}), DATA).fits
    if field == "serve.max_context":
        return compute_fit(req.model_copy(update={"max_context": int(value.split()[0])}), DATA).fits
    if field == "serve.sequences":
        return compute_fit(req.model_copy(update={"sequences": int(value.split()[0])}), DATA).fits
    gpus = int(change.split(" x ")[0])
    return compute_fit(req.model_copy(update={"tensor_parallel": gpus, "gpu_count": gpus}), DATA).fits


def test_guide_claim_405b_bf16_on_two_128gb_cards_is_refused_with_numbers() -> None:
    req = request("llama-3.1-405b", 128.0, 2)
    fit = compute_fit(req, DATA)
    assert not fit.fits
    assert (
        "= 811.7 GB" in fit.lines[0]
    )  # the guide's "about 810 GB" is 405e9 x 2 B; the real count is 405.85e9
    assert "128 GiB x gpu_memory_utilization 0.9 = 115.2 GiB per GPU" in fit.lines[4]
    other = alternatives(req, DATA)
    assert "serve.weights: awq-int4" in other
    assert any(o.startswith("8 x ") for o in other)


def test_shorter_context_and_fewer_sequences_are_suggested() -> None:
    req = request("llama-3.1-8b", "h200-sxm", 1, context=131072, sequences=8)
    other = alternatives(req, DATA)
    context = next(o for o in other if o.startswith("serve.max_context"))
    sequences = next(o for o in other if o.startswith("serve.sequences"))
    assert int(context.split()[1]) % 256 == 0 and int(context.split()[1]) < 131072
    assert int(sequences.split()[1]) in range(1, 8)


@pytest.mark.parametrize(
    ("model", "tp", "why"),
    [
        ("qwen2.5-72b", 3, "64 attention heads are not divisible by tensor_parallel_size 3"),
        ("qwen2.5-7b", 8, "28 attention heads are not divisible by tensor_parallel_size 8"),
        ("llama-3.1-405b", 6, "128 attention heads are not divisible by tensor_parallel_size 6"),
        ("llama-3.1-70b", 8, None),
        ("llama-3.1-405b", 16, None),
        ("qwen2.5-7b", 4, None),
    ],
)
def test_tensor_parallel_must_divide_the_heads(model: str, tp: int, why: str | None) -> None:
    assert tp_problem(arch(model), tp) == why


def test_kv_head_rule_follows_qkv_parallel_linear() -> None:
    # Qwen2.5-14B's published config: 40 attention heads, 8 KV heads
    # (https://huggingface.co/Qwen/Qwen2.5-14B-Instruct/blob/main/config.json).
    qwen14 = ModelArchitecture(
        layers=48, attention_heads=40, kv_heads=8, head_dim=128, max_context=32768, parameters=14_770_033_664
    )
    assert tp_problem(qwen14, 10) == "tensor_parallel_size 10 is not a multiple of the 8 KV heads"
    assert tp_problem(qwen14, 20) == "tensor_parallel_size 20 is not a multiple of the 8 KV heads"
    assert tp_problem(qwen14, 8) is None and tp_problem(qwen14, 4) is None
    assert valid_tp_sizes(qwen14, 8) == (1, 2, 4, 8)
    odd = ModelArchitecture(
        layers=2, attention_heads=12, kv_heads=6, head_dim=64, max_context=2048, parameters=1
    )
    assert tp_problem(odd, 4) == "6 KV heads are not divisible by tensor_parallel_size 4"


def test_every_constant_has_a_source() -> None:
    rows = [
        *DATA.weight_formats,
        *DATA.kv_cache_dtypes,
        DATA.runtime_allowance,
        *DATA.vllm_releases,
        DATA.tensor_parallel,
    ]
    for row in rows:
        assert row.source and CATALOG.cite(row.source)
