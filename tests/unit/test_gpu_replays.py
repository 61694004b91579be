"""verify knows every GPU in the catalog (issue 15): one replay per model, and the catalog's figures.

SYNTHESIZED INPUTS. Each replay starts from the real two-H200 capture
(``tests/fixtures/verify/h200x2-ubuntu2404/inputs.json``) and edits it to one catalog model: the
nvidia-smi name, memory, compute capability and PCIe link of that model, its topology (NV# on an
NVLink bridge or switch, PHB otherwise, no peer access on GeForce), and figures a healthy card of that
model plausibly gives, as fractions of its published ones (``PLAUSIBLE``). They are not measurements;
the H200 replays in ``test_verify.py`` and ``test_h200x2.py`` are.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.catalog import GpuModel, load_catalog
from provision.detect.domains.pci import AcsControl
from provision.detect.facts import Gpu, Topology, Unknown
from provision.spec.loader import load_spec
from provision.spec.models import Spec
from provision.verify.command import read_inputs
from provision.verify.limits import pcie_gbps, shipped_limits
from provision.verify.models import CheckResult
from provision.verify.runs import P2P, AllReduceRun, GpuRun, VerifyInputs
from provision.verify.workflow import evaluate

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "fixtures" / "verify" / "h200x2-ubuntu2404" / "inputs.json"
SPEC = load_spec(ROOT / "specs" / "h200x2-ubuntu2404.yaml")
CATALOG = load_catalog()
MODELS = sorted(CATALOG.gpus)
SPEED = ("bf16-matmul", "pcie-h2d", "pcie-d2h", "p2p-bandwidth", "nccl-allreduce")

PLAUSIBLE = {"bf16": 0.67, "host": 0.87, "nvlink_p2p": 0.85, "nvlink_busbw": 0.65}
"""Synthesized figures as fractions of the published ones: close to the H200's measured 0.67 (bf16),
0.88 (pinned copies), 0.855 (P2P) and 0.66 (busbw); ``PCIE_PATH`` below for paths over PCIe."""

PCIE_PATH = {"p2p": 0.8, "busbw": 0.45, "host_p2p": 0.35, "host_busbw": 0.25}
"""Synthesized P2P copy and busbw as fractions of the PCIe rate: with P2P, and through host memory."""


def _link(model: GpuModel) -> tuple[int, int]:
    """The model's PCIe link, else the capture's (Gen5 x16) where the catalog has none."""
    return model.pcie_gen_max or 5, model.pcie_width_max or 16


def _count(model: GpuModel) -> int:
    return 1 if model.nvlink.kind == "c2c" else 2


def _gpus(model: GpuModel, inputs: VerifyInputs) -> tuple[Gpu, ...]:
    assert not isinstance(inputs.facts.gpus, Unknown)
    gen, width = _link(model)
    edit = {
        "name": (model.smi_names or (model.name,))[0],
        "memory_total_mib": int(model.memory_gib * 1024 * 0.99),
        "compute_capability": model.compute_capability,
        "pcie_gen_max": gen,
        "pcie_width_max": width,
    }
    return tuple(g.model_copy(update=edit) for g in inputs.facts.gpus[: _count(model)])


def _topology(model: GpuModel) -> Topology:
    cell = "NV12" if model.nvlink.kind in ("bridge", "switch") else "PHB"
    links = {"GPU0": {"GPU0": "X", "GPU1": cell}, "GPU1": {"GPU0": cell, "GPU1": "X"}}
    return Topology(gpus=("GPU0", "GPU1"), links=links)


def _rates(model: GpuModel) -> tuple[float, float, float, float]:
    """(bf16 TFLOP/s, host copy GB/s, P2P GB/s, busbw GB/s) a healthy card plausibly gives."""
    pcie = pcie_gbps(*_link(model))
    peak = model.peaks.bf16_dense_tflops or 100.0
    nvlink = model.nvlink.per_direction_gbps if model.nvlink.kind != "c2c" else None
    host = PLAUSIBLE["host"] * (model.nvlink.per_direction_gbps if model.nvlink.kind == "c2c" else pcie)
    if model.p2p.supported is False:
        return PLAUSIBLE["bf16"] * peak, host, PCIE_PATH["host_p2p"] * pcie, PCIE_PATH["host_busbw"] * pcie
    if nvlink is not None:
        return (
            PLAUSIBLE["bf16"] * peak,
            host,
            PLAUSIBLE["nvlink_p2p"] * nvlink,
            PLAUSIBLE["nvlink_busbw"] * nvlink,
        )
    return PLAUSIBLE["bf16"] * peak, host, PCIE_PATH["p2p"] * pcie, PCIE_PATH["busbw"] * pcie


def synthesized(model: GpuModel, scale: float = 1.0) -> tuple[Spec, VerifyInputs]:
    """The real capture edited to ``model`` (see the module docstring); ``scale`` x every speed figure."""
    inputs = read_inputs(CAPTURE)
    run, allreduce = inputs.gpu_run, inputs.allreduce
    assert isinstance(run, GpuRun) and isinstance(allreduce, AllReduceRun) and run.p2p is not None
    bf16, host, p2p, busbw = (scale * r for r in _rates(model))
    n, cc = _count(model), model.compute_capability.text
    loads = tuple(
        g.model_copy(update={"cc": cc, "bf16_tflops": bf16, "h2d_gbps": host, "d2h_gbps": host})
        for g in run.gpus[:n]
    )
    allowed = model.p2p.supported is not False
    access = ((True, allowed), (allowed, True))
    pairs = P2P(access=access, bandwidth_gbps=dict.fromkeys(run.p2p.bandwidth_gbps, p2p))
    seconds = (allreduce.ranks[0].bytes or 0) / (busbw * 1e9)  # 2 ranks: algbw = busbw
    ranks = tuple(r.model_copy(update={"seconds_per_iter": seconds}) for r in allreduce.ranks)
    facts = inputs.facts.model_copy(update={"gpus": _gpus(model, inputs), "topology": _topology(model)})
    new_run = run.model_copy(update={"gpus": loads, "device_count": n, "p2p": pairs if n > 1 else None})
    new_inputs = inputs.model_copy(
        update={
            "facts": facts,
            "gpu_run": new_run,
            "allreduce": allreduce.model_copy(update={"ranks": ranks}),
        }
    )
    gpus = SPEC.gpus.model_copy(update={"model": model.id, "count": n})
    return SPEC.model_copy(update={"gpus": gpus}), new_inputs


def _results(spec: Spec, inputs: VerifyInputs) -> dict[str, CheckResult]:
    return {r.name: r for r in evaluate(spec, inputs, CATALOG, shipped_limits())}


def _speed(results: dict[str, CheckResult]) -> list[CheckResult]:
    return [r for r in results.values() if r.id in SPEED and r.status != "skip"]


# ---- the catalog's figures -----------------------------------------------------------------------


@pytest.mark.parametrize("model_id", MODELS)
def test_every_model_has_sourced_figures_or_says_why_not(model_id: str) -> None:
    model = CATALOG.gpus[model_id]
    for row in (model.peaks, model.nvlink, model.p2p, model.forward_compat):
        assert row.source and all(key in CATALOG.sources for key in row.source), (model_id, row)
    assert model.peaks.bf16_dense_tflops is not None or model.peaks.unpublished, model_id
    assert model.nvlink.kind == "none" or model.nvlink.gbps is not None or model.nvlink.note, model_id
    assert model.tdp_w is not None or model.id == "a100x", f"{model_id}: TDP unsourced"


def test_geforce_has_no_p2p_and_no_forward_compatibility() -> None:
    geforce = [m for m in CATALOG.gpus.values() if "GeForce" in m.name]
    assert {m.id for m in geforce} == {"rtx-4090", "rtx-5090"}
    assert all(m.p2p.supported is False and m.forward_compat.supported is False for m in geforce)


def test_gh200_name_as_nvidia_smi_prints_it() -> None:
    gh200 = CATALOG.gpus["gh200"]
    assert CATALOG.gpu_by_smi_name("NVIDIA GH200 480GB") == gh200
    assert gh200.tdp_w == 1000


# ---- one replay per model ------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", MODELS)
def test_replay_gives_every_speed_check_a_sourced_floor(model_id: str) -> None:
    model = CATALOG.gpus[model_id]
    results = _results(*synthesized(model))
    assert all(
        results[f"{c}[gpu0]"].status == "pass" for c in ("gpu-model", "compute-capability", "gpu-memory")
    )
    speed = _speed(results)
    assert {r.id for r in speed} >= {"bf16-matmul", "pcie-h2d", "pcie-d2h"}
    for r in speed:
        if r.id == "bf16-matmul" and model.peaks.bf16_dense_tflops is None:
            assert r.status == "warn" and "no published figure" in r.detail, r
            continue
        assert r.status == "pass", r
        assert r.threshold is not None and r.threshold.source, f"{model_id}: {r.name} has no sourced floor"


@pytest.mark.parametrize("model_id", MODELS)
def test_replay_at_half_speed_misses_every_floor(model_id: str) -> None:
    model = CATALOG.gpus[model_id]
    speed = _speed(_results(*synthesized(model, scale=0.5)))
    assert speed and all(r.status in ("fail", "warn") for r in speed), [
        r for r in speed if r.status == "pass"
    ]
    failed = {r.id for r in speed if r.status == "fail"}
    assert {"pcie-h2d", "pcie-d2h"} <= failed
    if model.peaks.bf16_dense_tflops is not None and model.peaks.conf != "U":
        assert "bf16-matmul" in failed


def test_bf16_floor_shows_its_derivation() -> None:
    res = _results(*synthesized(CATALOG.gpus["a100-sxm4-80gb"]))["bf16-matmul[gpu0]"]
    assert res.threshold is not None and res.threshold.value == pytest.approx(0.60 * 312)
    assert res.threshold.source.startswith(
        "derived: 0.60 x 312 TFLOP/s dense bf16 (catalog gpus.yaml a100-sxm4-80gb"
    )
    assert (
        "nvidia-a100-datasheet" in res.threshold.source
        and "docs/device-runs/verify.txt" in res.threshold.source
    )


def test_nvlink_bridge_floor_comes_from_the_bridge_rate() -> None:
    res = _results(*synthesized(CATALOG.gpus["a100-pcie-80gb"]))
    p2p, busbw = res["p2p-bandwidth[gpu0-gpu1]"], res["nccl-allreduce"]
    assert p2p.threshold is not None and p2p.threshold.value == pytest.approx(0.76 * 300)
    assert "NVLink bridge" in p2p.threshold.source
    assert busbw.threshold is not None and busbw.threshold.value == pytest.approx(0.59 * 300)


def test_geforce_skips_p2p_access_and_holds_nccl_to_the_host_memory_path() -> None:
    res = _results(*synthesized(CATALOG.gpus["rtx-4090"]))
    access = res["p2p-access"]
    assert access.status == "skip" and "offers no P2P on rtx-4090" in access.detail
    assert access.hint is None
    busbw = res["nccl-allreduce"]
    assert busbw.status == "pass" and "SHM transport through host memory" in busbw.detail
    assert busbw.threshold is not None and busbw.threshold.value == pytest.approx(0.15 * pcie_gbps(4, 16))
    assert "allreduce_host_efficiency" in busbw.threshold.source


def _denied(model_id: str, acs: dict[str, AcsControl]) -> CheckResult:
    spec, inputs = synthesized(CATALOG.gpus[model_id])
    assert isinstance(inputs.gpu_run, GpuRun) and inputs.gpu_run.p2p is not None
    p2p = inputs.gpu_run.p2p.model_copy(update={"access": ((True, False), (True, True))})
    run = inputs.gpu_run.model_copy(update={"p2p": p2p})
    hardware = inputs.facts.hardware
    assert not isinstance(hardware, Unknown)
    facts = inputs.facts.model_copy(update={"hardware": hardware.model_copy(update={"acs": acs})})
    return _results(spec, inputs.model_copy(update={"facts": facts, "gpu_run": run}))["p2p-access"]


def test_disable_acs_is_hinted_only_where_acs_redirect_was_seen() -> None:
    quiet = _denied("l40s", {"0000:00:01.0": AcsControl(bdf="0000:00:01.0", flags={"ReqRedir": False})})
    assert quiet.status == "fail" and "disable ACS" not in (quiet.hint or "")
    redirect = _denied("l40s", {"0000:00:01.0": AcsControl(bdf="0000:00:01.0", flags={"ReqRedir": True})})
    assert redirect.status == "fail" and "disable ACS" in (redirect.hint or "")
    assert "0000:00:01.0" in (redirect.hint or "")


def test_flagship_spec_floors_are_derived_and_named() -> None:
    spec = load_spec(ROOT / "specs" / "dual-a100x.yaml")
    _, inputs = synthesized(CATALOG.gpus["a100x"])
    res = _results(spec, inputs)
    for name in (
        "bf16-matmul[gpu0]",
        "pcie-h2d[gpu0]",
        "pcie-d2h[gpu1]",
        "p2p-bandwidth[gpu0-gpu1]",
        "nccl-allreduce",
    ):
        threshold = res[name].threshold
        assert threshold is not None and threshold.source.startswith("spec verify."), name
        assert (
            " x " in threshold.source
            and "docs/device-runs/h200-measurements.md#fractions" in threshold.source
        )
    assert res["bf16-matmul[gpu0]"].threshold.value == 187  # type: ignore[union-attr]
    assert res["p2p-bandwidth[gpu0-gpu1]"].threshold.value == 228  # type: ignore[union-attr]
