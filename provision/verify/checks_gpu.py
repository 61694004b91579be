"""GPU checks: count, model, memory, compute capability (spec + catalog), then per GPU under load:
a checked CUDA kernel, bf16 TFLOP/s, PCIe link and pinned bandwidth, temperatures (FF-03, FF-09, FF-16).
"""

from __future__ import annotations

from provision.detect.facts import Gpu, Unknown
from provision.verify.context import Context, compare, gpu_subject, result, unknown
from provision.verify.hints import device_count_hint, no_driver, not_on_the_bus, slow_hint
from provision.verify.limits import ModelKey, Resolved, default, link_fraction, resolve
from provision.verify.models import CheckResult, Measured, Threshold
from provision.verify.published import bf16_floor, c2c_floor, is_uncertain, unpublished_bf16
from provision.verify.runs import GpuLoad

CATALOG = "catalog gpus.yaml"
COPY_PHASES = ("h2d-copy", "d2h-copy")


def gpu_count(ctx: Context) -> list[CheckResult]:
    """nvidia-smi's GPU count and torch's CUDA device count both equal the spec's count (FF-03)."""
    want = Threshold(op="==", value=float(ctx.spec.gpus.count), unit="GPUs", source="spec gpus.count")
    hint = "A GPU missing: check lspci -d 10de:, dmesg (Xid, RmInitAdapter), seating and power cables."
    out: list[CheckResult] = []
    gpus = ctx.gpus
    if isinstance(gpus, Unknown):
        why = not_on_the_bus(ctx.facts) or no_driver(ctx.facts, ctx.pm.upstream) or hint
        out.append(unknown("gpu-count", "GPU count (nvidia-smi)", gpus, hint=why))
    else:
        out.append(_count("gpu-count", "GPU count (nvidia-smi)", len(gpus), want, hint))
    run = ctx.run
    title = "CUDA device count (torch)"
    if isinstance(run, Unknown):
        out.append(unknown("cuda-device-count", title, run, hint=device_count_hint(ctx.facts, run.unknown)))
    else:
        out.append(_count("cuda-device-count", title, run.device_count, want, device_count_hint(ctx.facts)))
    return out


def _count(check_id: str, title: str, count: int, want: Threshold, hint: str) -> CheckResult:
    ok = float(count) == want.value
    return result(
        check_id,
        title,
        "pass" if ok else "fail",
        measured=Measured(value=float(count), unit="GPUs"),
        threshold=want,
        hint=hint,
    )


def identity(ctx: Context) -> list[CheckResult]:
    """Per GPU: model name, memory and compute capability as the catalog row of the spec's model."""
    gpus = ctx.gpus
    model = ctx.model
    if isinstance(gpus, Unknown) or model is None:
        why = gpus if isinstance(gpus, Unknown) else f"GPU model {ctx.spec.gpus.model} not in the catalog"
        return [unknown("gpu-model", "GPU model, memory, compute capability", why)]
    return [r for gpu in gpus for r in _identity(ctx, gpu)]


def _identity(ctx: Context, gpu: Gpu) -> list[CheckResult]:
    model = ctx.model
    assert model is not None
    subject, source = gpu_subject(gpu.index), f"{CATALOG} {model.id}"
    names = model.smi_names or (model.name,)
    out = [
        result(
            "gpu-model",
            "GPU model",
            "pass" if gpu.name in names else "fail",
            subject=subject,
            measured=Measured(value=gpu.name),
            threshold=Threshold(op="in", value=" | ".join(names), source=source),
            hint=f"The spec says {model.id}; fix gpus.model or the hardware.",
        )
    ]
    fraction = default(ctx.limits, "memory_fraction")
    floor = Resolved(
        value=fraction.value * model.memory_gib, source=f"{fraction.source} x {source} memory_gib"
    )
    if gpu.memory_total_mib is not None:
        out.append(
            compare(
                "gpu-memory",
                "GPU memory",
                gpu.memory_total_mib / 1024,
                "GiB",
                floor,
                ">=",
                subject=subject,
                hint="Less memory than the model has: wrong SKU or MIG enabled.",
            )
        )
    cc = gpu.compute_capability.text if gpu.compute_capability else "unknown"
    out.append(
        result(
            "compute-capability",
            "compute capability",
            "pass" if cc == model.compute_capability.text else "fail",
            subject=subject,
            measured=Measured(value=cc),
            threshold=Threshold(op="==", value=model.compute_capability.text, source=source),
            hint="Not the GPU the spec names.",
        )
    )
    return out


def kernels(ctx: Context) -> list[CheckResult]:
    """Per GPU: a checked fp32 product (a real kernel, not is_available) and bf16 TFLOP/s (FF-09)."""
    loads = ctx.loads()
    if isinstance(loads, Unknown):
        return [
            unknown(
                "cuda-kernel",
                "CUDA kernel with checked result",
                loads,
                hint="Run the venv's python -c 'import torch; torch.ones(1, device=\"cuda\")'.",
            )
        ]
    return [r for load in loads for r in (_kernel(ctx, load), _bf16(ctx, load))]


def _kernel(ctx: Context, load: GpuLoad) -> CheckResult:
    title, subject = "CUDA kernel with checked result", gpu_subject(load.index)
    hint = "No kernel image for this GPU means a wheel without its arch (FF-09); else see the error."
    if load.error is not None or load.fp32_rel_error is None or load.ones_sum != 1.0:
        return unknown(
            "cuda-kernel", title, load.error or "kernel gave a wrong result", subject=subject, hint=hint
        )
    limit = default(ctx.limits, "max_fp32_rel_error")
    return compare(
        "cuda-kernel",
        title,
        load.fp32_rel_error,
        "rel. error",
        limit,
        "<=",
        subject=subject,
        hint="Wrong results from the GPU: check dmesg for Xid errors and ECC (nvidia-smi -q -d ECC).",
        detail="512^3 fp32 matmul (TF32 off) vs float64 CPU reference",
    )


def _bf16(ctx: Context, load: GpuLoad) -> CheckResult:
    title, subject = "bf16 8192^3 matmul throughput", gpu_subject(load.index)
    if load.bf16_tflops is None:
        return unknown("bf16-matmul", title, load.error or "not measured", subject=subject)
    max_err = default(ctx.limits, "max_bf16_rel_error")
    if load.bf16_rel_error is None or load.bf16_rel_error > max_err.value:
        return compare(
            "bf16-matmul",
            title,
            load.bf16_rel_error or float("nan"),
            "rel. error",
            max_err,
            "<=",
            subject=subject,
            hint="bf16 results wrong: check Xid errors and clocks.",
        )
    model = ctx.model
    derived = bf16_floor(ctx.catalog, ctx.limits, model) if model else None
    limit = resolve(ctx.limits, ctx.spec.verify, ctx.spec.gpus.model, "min_bf16_tflops", derived)
    detail = f"{load.iters} products, result within {load.bf16_rel_error:.1e} of fp32"
    if limit is None:
        why = unpublished_bf16(model, ctx.spec.gpus.model)
        return result(
            "bf16-matmul",
            title,
            "warn",
            subject=subject,
            measured=Measured(value=load.bf16_tflops, unit="TFLOP/s"),
            detail=f"{detail}; {why} (set verify.min_bf16_tflops)",
            hint="No floor to hold this GPU to: measure a healthy card and set verify.min_bf16_tflops.",
        )
    return compare(
        "bf16-matmul",
        title,
        load.bf16_tflops,
        "TFLOP/s",
        limit,
        ">=",
        subject=subject,
        detail=detail,
        hint=slow_hint(ctx.facts, load.index),
        below="warn" if is_uncertain(model, limit, derived) else "fail",
    )


def pcie(ctx: Context) -> list[CheckResult]:
    """Per GPU: link gen/width at maximum while copies run (idle links train down, FF-16), and bandwidth."""
    loads = ctx.loads()
    if isinstance(loads, Unknown):
        return [unknown("pcie-link", "PCIe link under load", loads)]
    return [r for load in loads for r in _pcie(ctx, load)]


def expected_link(ctx: Context, index: int) -> tuple[int, int, str] | None:
    """(gen, width, source) a GPU's link must reach: spec, else catalog, else nvidia-smi's maximum."""
    gpu, model, verify = ctx.gpu(index), ctx.model, ctx.spec.verify
    gen_src = [
        (verify.pcie_gen, verify.pcie_width, "spec verify.pcie_gen/pcie_width"),
        (
            model.pcie_gen_max if model else None,
            model.pcie_width_max if model else None,
            f"{CATALOG} {model.id if model else ''} pcie_gen_max/pcie_width_max",
        ),
        (
            gpu.pcie_gen_max if gpu else None,
            gpu.pcie_width_max if gpu else None,
            "nvidia-smi pcie.link.*.max",
        ),
    ]
    gen = next(((g, s) for g, _, s in gen_src if g is not None), None)
    width = next(((w, s) for _, w, s in gen_src if w is not None), None)
    if gen is None or width is None:
        return None
    return gen[0], width[0], gen[1] if gen[1] == width[1] else f"{gen[1]}; {width[1]}"


def _pcie(ctx: Context, load: GpuLoad) -> list[CheckResult]:
    subject = gpu_subject(load.index)
    link = expected_link(ctx, load.index)
    if link is None:
        return [
            unknown(
                "pcie-link",
                "PCIe link under load",
                "no expected generation/width known",
                subject=subject,
                status="skip",
            )
        ]
    gen, width, source = link
    return [_link(load, gen, width, source), *_bandwidth(ctx, load, gen, width)]


def _link(load: GpuLoad, gen: int, width: int, source: str) -> CheckResult:
    title, subject = "PCIe link gen/width under load", gpu_subject(load.index)
    samples = load.samples(*COPY_PHASES)
    gens = [s.pcie_link_gen_current for s in samples if s.pcie_link_gen_current is not None]
    widths = [s.pcie_link_width_current for s in samples if s.pcie_link_width_current is not None]
    if not gens or not widths:
        errors = (
            "; ".join(p.error for p in load.phases if p.error) or "no nvidia-smi samples during the copies"
        )
        return unknown("pcie-link", title, errors, subject=subject, status="skip")
    got_gen, got_width = int(max(gens)), int(max(widths))
    ok = got_gen >= gen and got_width >= width
    return result(
        "pcie-link",
        title,
        "pass" if ok else "fail",
        subject=subject,
        measured=Measured(value=f"Gen{got_gen} x{got_width}"),
        threshold=Threshold(op=">=", value=f"Gen{gen} x{width}", source=source),
        detail=f"max of {len(samples)} samples taken during pinned copies",
        hint="Link trained down under load: reseat the card, remove risers, check the slot is CPU-attached "
        "and BIOS bifurcation / M.2 lane sharing (FF-16).",
    )


def _bandwidth(ctx: Context, load: GpuLoad, gen: int, width: int) -> list[CheckResult]:
    subject, out = gpu_subject(load.index), []
    model = ctx.model
    c2c = c2c_floor(ctx.catalog, ctx.limits, model) if model else None
    derived = c2c or link_fraction(ctx.limits, "pcie_efficiency", gen, width)
    rows: tuple[tuple[str, ModelKey, float | None, str], ...] = (
        ("pcie-h2d", "min_h2d_gbps", load.h2d_gbps, "pinned host-to-device bandwidth"),
        ("pcie-d2h", "min_d2h_gbps", load.d2h_gbps, "pinned device-to-host bandwidth"),
    )
    for check_id, key, value, title in rows:
        limit = resolve(ctx.limits, ctx.spec.verify, ctx.spec.gpus.model, key, derived)
        if value is None or limit is None:
            out.append(unknown(check_id, title, load.error or "not measured", subject=subject))
            continue
        out.append(
            compare(
                check_id,
                title,
                value,
                "GB/s",
                limit,
                ">=",
                subject=subject,
                hint="Below the link's expectation: check the link (pcie-link), NUMA placement "
                "(run on the GPU's NUMA node) and IOMMU settings (iommu=pt).",
            )
        )
    return out


def thermals(ctx: Context) -> list[CheckResult]:
    """Per GPU: highest GPU and memory temperature during the bf16 load vs their limits."""
    loads = ctx.loads()
    if isinstance(loads, Unknown):
        return [unknown("gpu-temperature", "GPU temperature under load", loads, status="skip")]
    return [r for load in loads for r in (_gpu_temp(ctx, load), _memory_temp(ctx, load))]


def _gpu_temp(ctx: Context, load: GpuLoad) -> CheckResult:
    title, subject = "GPU temperature under load", gpu_subject(load.index)
    temps = [s.temperature_gpu for s in load.samples("bf16-matmul") if s.temperature_gpu is not None]
    if not temps:
        return unknown(
            "gpu-temperature", title, "no temperature samples during the load", subject=subject, status="skip"
        )
    limit = _temperature_limit(ctx, "max_gpu_temp_c")
    card = load.gpu_max_operating_c
    if card is not None and card < limit.value and ctx.spec.verify.max_gpu_temp_c is None:
        limit = Resolved(value=card, source="card's own limit: temperature.gpu + temperature.gpu.tlimit")
    hint = "Improve airflow / fan curves; check the power limit and the heatsink."
    return _hottest("gpu-temperature", title, temps, limit, subject=subject, hint=hint)


def _memory_temp(ctx: Context, load: GpuLoad) -> CheckResult:
    title, subject = "memory (HBM) temperature under load", gpu_subject(load.index)
    temps = [s.temperature_memory for s in load.samples("bf16-matmul") if s.temperature_memory is not None]
    if not temps:
        return unknown(
            "memory-temperature",
            title,
            "nvidia-smi reports no memory temperature for this GPU",
            subject=subject,
            status="skip",
        )
    limit = _temperature_limit(ctx, "max_memory_temp_c")
    hint = "Compare with nvidia-smi -q -d TEMPERATURE 'Memory Max Operating Temp'; improve airflow."
    return _hottest("memory-temperature", title, temps, limit, subject=subject, hint=hint)


def _temperature_limit(ctx: Context, key: ModelKey) -> Resolved:
    """The spec's, else the model's, else ``verify.yaml``'s default limit ``key`` in C."""
    limit = resolve(ctx.limits, ctx.spec.verify, ctx.spec.gpus.model, key, default(ctx.limits, key))
    assert limit is not None  # a default is given, so resolve always finds one
    return limit


def _hottest(
    check_id: str, title: str, temps: list[float], limit: Resolved, *, subject: str, hint: str
) -> CheckResult:
    """The highest of ``temps`` (C, sampled over the bf16 load) held to ``limit``."""
    detail = f"max of {len(temps)} samples over the bf16 load"
    return compare(check_id, title, max(temps), "C", limit, "<=", subject=subject, detail=detail, hint=hint)


CHECKS = (gpu_count, identity, kernels, pcie, thermals)
