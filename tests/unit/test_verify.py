"""provision verify: checks replayed on the real H200 run, and synthesized faults of each kind."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from provision.catalog import load_catalog
from provision.cli import cli
from provision.detect.domains.driver import FabricManagerVersionFact
from provision.detect.domains.pci import NO_NVIDIA_PCI
from provision.detect.facts import FabricState, Package, Topology, Unknown
from provision.detect.runner import facts_from_raw, unknown_facts
from provision.detect.unknown import NotRun
from provision.spec.loader import load_spec
from provision.spec.models import GpuSpec, Spec
from provision.verify.checks_multi import busbw_gbps
from provision.verify.checks_software import cudnn_version
from provision.verify.command import read_inputs
from provision.verify.launch import python_of
from provision.verify.limits import load_limits, pcie_gbps, shipped_limits
from provision.verify.models import CheckResult, Report
from provision.verify.render import junit_xml, render_table
from provision.verify.runs import P2P, AllReduceRun, FabricGpu, GpuRun, RankResult, VerifyInputs
from provision.verify.workflow import evaluate, verify
from tests.unit.factories import one_report

ROOT = Path(__file__).parents[2]
RUN = ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404"
SPEC_PATH = ROOT / "specs" / "h200-ubuntu2404.yaml"
COMPUTE_580 = Package(
    name="libnvidia-compute-580", version="580.95.05-0ubuntu1", status="install ok installed"
)


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec(SPEC_PATH)


@pytest.fixture(scope="module")
def inputs() -> VerifyInputs:
    return read_inputs(RUN / "inputs.json")


def _results(spec: Spec, inputs: VerifyInputs) -> dict[str, CheckResult]:
    return {r.name: r for r in evaluate(spec, inputs, load_catalog(), shipped_limits())}


def _run(inputs: VerifyInputs) -> GpuRun:
    assert isinstance(inputs.gpu_run, GpuRun)
    return inputs.gpu_run


def _with_load(inputs: VerifyInputs, **update: Any) -> VerifyInputs:
    run = _run(inputs)
    load = run.gpus[0].model_copy(update=update)
    return inputs.model_copy(update={"gpu_run": run.model_copy(update={"gpus": (load,)})})


def _with_spec_verify(spec: Spec, **update: Any) -> Spec:
    return spec.model_copy(update={"verify": spec.verify.model_copy(update=update)})


# ---- the real H200 run ---------------------------------------------------------------------------


def test_h200_run_replays_to_the_saved_report(spec: Spec, inputs: VerifyInputs) -> None:
    saved = json.loads((RUN / "verify.json").read_text())
    replayed = evaluate(spec, inputs, load_catalog(), shipped_limits())
    assert [r.model_dump(mode="json") for r in replayed] == saved["results"]
    # The real run had 24 pass, 5 skip; of the invariants added since, 5 pass on its inputs and the
    # 8 that read facts 0.1 did not collect (binding, initramfs, GPU health, loader cache, the driver
    # bound to each GPU, the GSP firmware) or that do not apply to its kernel, which no package
    # installed (a module for every packaged kernel), skip.
    assert saved["counts"] == {"pass": 29, "warn": 0, "fail": 0, "skip": 13}


def test_h200_figures_and_sources(spec: Spec, inputs: VerifyInputs) -> None:
    res = _results(spec, inputs)
    h2d = res["pcie-h2d[gpu0]"]
    assert h2d.measured is not None and h2d.measured.value == pytest.approx(55.41, abs=0.01)
    assert h2d.threshold is not None and h2d.threshold.value == 50.0
    assert h2d.threshold.source.startswith("verify.yaml h200-sxm.min_h2d_gbps")
    assert res["bf16-matmul[gpu0]"].measured.value == pytest.approx(672, abs=1)  # type: ignore[union-attr]
    assert str(res["pcie-link[gpu0]"].measured) == "Gen5 x16"
    assert res["memory-temperature[gpu0]"].threshold.value == 95  # type: ignore[union-attr]
    assert res["nccl-allreduce"].status == "skip" and "1 GPU(s)" in res["nccl-allreduce"].detail
    assert "torch bundles 9.19.0" in str(res["cudnn-version"].measured)


def test_h200_driver_consistency_names_the_unknown_on_disk_module(spec: Spec, inputs: VerifyInputs) -> None:
    res = _results(spec, inputs)["driver-consistency"]
    assert res.status == "pass"
    assert "on-disk unknown: modinfo: not found" in str(res.measured)


# ---- synthesized faults --------------------------------------------------------------------------


def test_ff01_userspace_newer_than_loaded_module_fails(spec: Spec, inputs: VerifyInputs) -> None:
    pkg = Package(name="libnvidia-compute-580", version="580.95.05-0ubuntu1", status="install ok installed")
    facts = inputs.facts.model_copy(update={"packages": (pkg,)})
    res = _results(spec, inputs.model_copy(update={"facts": facts}))["driver-consistency"]
    assert res.status == "fail"
    assert "libnvidia-compute-580 is 580.95.05" in (res.hint or "")


def test_machine_without_gpus_or_driver_fails_and_skips_with_reasons(spec: Spec) -> None:
    bare = VerifyInputs(
        facts=unknown_facts("localhost", "nvidia-smi: not found"),
        gpu_run=Unknown(unknown="no GPU work: nvidia-smi: not found"),
    )
    results = evaluate(spec, bare, load_catalog(), shipped_limits())
    gpu_ids = {"nvidia-smi", "gpu-count", "cuda-device-count", "cuda-kernel", "pcie-link", "torch-arch"}
    by_id = {r.id: r for r in results}
    assert all(by_id[i].status == "fail" and by_id[i].detail for i in gpu_ids)
    assert all(r.detail for r in results if r.status == "skip")


def test_gpu_checks_that_never_ran_say_what_lets_them_run_not_a_hardware_guess(
    spec: Spec, inputs: VerifyInputs, tmp_path: Path
) -> None:
    # Seen on the real H200: a venv refused by the trust rule made every torch check hint "A GPU missing".
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to("/bin/true")
    (tmp_path / "bin").chmod(0o777)
    refused = python_of(str(tmp_path))
    assert isinstance(refused, NotRun) and "the venv is not trusted" in refused.unknown
    for run in (refused, python_of(None), python_of(str(tmp_path / "absent"))):
        assert isinstance(run, NotRun)
        by_id = {r.id: r for r in _results(spec, inputs.model_copy(update={"gpu_run": run})).values()}
        for check in ("cuda-device-count", "cuda-kernel", "torch-arch"):
            assert by_id[check].status == "fail" and by_id[check].detail == run.unknown
            assert by_id[check].hint == run.fix and "A GPU missing" not in by_id[check].hint
    saved = VerifyInputs.model_validate_json(inputs.model_copy(update={"gpu_run": refused}).model_dump_json())
    assert saved.gpu_run == refused  # a saved run replays with the same hint


def test_link_trained_down_under_load_fails(spec: Spec, inputs: VerifyInputs) -> None:
    load = _run(inputs).gpus[0]
    phases = tuple(
        p.model_copy(
            update={
                "samples": tuple(s.model_copy(update={"pcie_link_width_current": 8.0}) for s in p.samples)
            }
        )
        for p in load.phases
    )
    res = _results(spec, _with_load(inputs, phases=phases))["pcie-link[gpu0]"]
    assert res.status == "fail" and str(res.measured) == "Gen5 x8"
    assert "FF-16" in (res.hint or "")


def test_hot_hbm_fails_against_95c(spec: Spec, inputs: VerifyInputs) -> None:
    load = _run(inputs).gpus[0]
    phases = tuple(
        p.model_copy(
            update={"samples": tuple(s.model_copy(update={"temperature_memory": 97.0}) for s in p.samples)}
        )
        for p in load.phases
    )
    res = _results(spec, _with_load(inputs, phases=phases))["memory-temperature[gpu0]"]
    assert res.status == "fail" and "nvidia-smi(1)" in res.threshold.source  # type: ignore[union-attr]


def test_card_limit_below_default_applies(spec: Spec, inputs: VerifyInputs) -> None:
    res = _results(spec, _with_load(inputs, gpu_max_operating_c=50.0))["gpu-temperature[gpu0]"]
    assert res.status == "fail"
    assert (
        res.threshold is not None
        and res.threshold.value == 50.0
        and "card's own limit" in res.threshold.source
    )


def test_spec_override_wins_and_is_named(spec: Spec, inputs: VerifyInputs) -> None:
    res = _results(_with_spec_verify(spec, min_h2d_gbps=60.0), inputs)["pcie-h2d[gpu0]"]
    assert res.status == "fail"
    assert res.threshold is not None and res.threshold.source == "spec verify.min_h2d_gbps"


def test_unknown_model_falls_back_to_the_derived_pcie_formula(spec: Spec, inputs: VerifyInputs) -> None:
    other = spec.model_copy(update={"gpus": spec.gpus.model_copy(update={"model": "h200-nvl"})})
    res = _results(other, inputs)["pcie-h2d[gpu0]"]
    assert res.threshold is not None and res.threshold.value == pytest.approx(0.8 * 63.015, abs=0.01)
    assert res.threshold.source.startswith("derived: 0.80 x PCIe Gen5 x16 63.0 GB/s; pcie_efficiency: ")


def test_wheel_without_the_gpu_arch_fails(spec: Spec, inputs: VerifyInputs) -> None:
    run = _run(inputs).model_copy(update={"arch_list": ("sm_75", "sm_80", "sm_86")})
    res = _results(spec, inputs.model_copy(update={"gpu_run": run}))["torch-arch[sm_90]"]
    assert res.status == "fail" and "FF-09" in res.threshold.source  # type: ignore[union-attr]


def test_cuda13_wheel_on_cuda12_driver_fails(spec: Spec, inputs: VerifyInputs) -> None:
    run = _run(inputs).model_copy(update={"driver_cuda": 12080})
    assert _results(spec, inputs.model_copy(update={"gpu_run": run}))["torch-cuda-driver"].status == "fail"
    run = _run(inputs).model_copy(update={"cuda": "13.1", "driver_cuda": 13000})
    assert _results(spec, inputs.model_copy(update={"gpu_run": run}))["torch-cuda-driver"].status == "warn"


def test_kernel_error_is_a_failure_with_the_error(spec: Spec, inputs: VerifyInputs) -> None:
    err = "AcceleratorError: CUDA error: no kernel image is available for execution on the device"
    res = _results(spec, _with_load(inputs, error=err, fp32_rel_error=None))["cuda-kernel[gpu0]"]
    assert res.status == "fail" and "no kernel image" in res.detail


def test_nvswitch_fabric_in_progress_and_fm_drift_fail(spec: Spec, inputs: VerifyInputs) -> None:
    facts = inputs.facts.model_copy(update={"fabric": FabricState(states=(("In Progress", "N/A"),))})
    fm = inputs.model_copy(update={"facts": facts, "fm_version": "580.95.05"})
    res = _results(spec, fm)
    assert res["fabric-state"].status == "fail"
    assert res["fabricmanager-version"].status == "fail"
    assert res["fabricmanager-version"].threshold.value == "580.159.04"  # type: ignore[union-attr]


def _two_gpus(spec: Spec, inputs: VerifyInputs, allreduce: AllReduceRun) -> tuple[Spec, VerifyInputs]:
    run = _run(inputs)
    gpu1 = run.gpus[0].model_copy(update={"index": 1})
    p2p = P2P(access=((True, False), (True, True)), bandwidth_gbps={"0-1": 40.0, "1-0": 10.0})
    run2 = run.model_copy(update={"gpus": (run.gpus[0], gpu1), "device_count": 2, "p2p": p2p})
    assert not isinstance(inputs.facts.gpus, Unknown)
    g0 = inputs.facts.gpus[0]
    topo = Topology(
        gpus=("GPU0", "GPU1"),
        links={"GPU0": {"GPU0": "X", "GPU1": "SYS"}, "GPU1": {"GPU0": "SYS", "GPU1": "X"}},
    )
    facts = inputs.facts.model_copy(
        update={"gpus": (g0, g0.model_copy(update={"index": 1})), "topology": topo}
    )
    spec2 = spec.model_copy(update={"gpus": spec.gpus.model_copy(update={"count": 2})})
    return spec2, inputs.model_copy(update={"facts": facts, "gpu_run": run2, "allreduce": allreduce})


def test_two_gpus_p2p_and_hung_allreduce(spec: Spec, inputs: VerifyInputs) -> None:
    hung = AllReduceRun(world=2, backend="nccl", timeout_s=90, seconds=90.1, timed_out=True)
    res = _results(*_two_gpus(spec, inputs, hung))
    assert res["p2p-access"].status == "fail" and "0->1" in str(res["p2p-access"].measured)
    assert res["p2p-bandwidth[gpu0-gpu1]"].status == "pass"  # 40 >= 0.5 x 63.0
    assert res["p2p-bandwidth[gpu1-gpu0]"].status == "fail"
    assert res["nccl-allreduce"].status == "fail" and "hung" in res["nccl-allreduce"].detail
    assert res["topology"].status == "pass" and str(res["topology"].measured) == "worst SYS"


def test_two_gpus_allreduce_busbw(spec: Spec, inputs: VerifyInputs) -> None:
    ranks = tuple(
        RankResult(rank=r, world=2, bytes=256 << 20, iters=20, correct=True, seconds_per_iter=0.01)
        for r in range(2)
    )
    run = AllReduceRun(world=2, backend="nccl", timeout_s=90, seconds=5, ranks=ranks)
    res = _results(*_two_gpus(spec, inputs, run))["nccl-allreduce"]
    assert res.status == "pass" and res.measured.value == pytest.approx(26.84, abs=0.01)  # type: ignore[union-attr]


@pytest.mark.skipif("max_path" not in GpuSpec.model_fields, reason="gpus.max_path not in this spec model")
def test_topology_worse_than_required_warns(spec: Spec, inputs: VerifyInputs) -> None:
    spec2, inputs2 = _two_gpus(
        spec, inputs, AllReduceRun(world=2, backend="nccl", timeout_s=9, seconds=9, timed_out=True)
    )
    spec3 = spec2.model_copy(update={"gpus": spec2.gpus.model_copy(update={"max_path": "PXB"})})
    assert _results(spec3, inputs2)["topology"].status == "warn"


# ---- formulas, parsers, limits ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gen", "width", "gbps"), [(5, 16, 63.015), (4, 16, 31.508), (3, 8, 7.877), (1, 1, 0.25)]
)
def test_pcie_rate(gen: int, width: int, gbps: float) -> None:
    assert pcie_gbps(gen, width) == pytest.approx(gbps, abs=0.001)


def test_busbw_is_nccl_tests_formula() -> None:
    ranks = tuple(
        RankResult(rank=r, bytes=10**9, seconds_per_iter=s) for r, s in enumerate((0.5, 1.0, 0.5, 0.5))
    )
    run = AllReduceRun(world=4, backend="nccl", timeout_s=1, seconds=1, ranks=ranks)
    assert busbw_gbps(run) == pytest.approx(1.0 * 2 * 3 / 4)  # slowest rank: algbw 1 GB/s


@pytest.mark.parametrize(("raw", "text"), [(91900, "9.19.0"), (90100, "9.1.0"), (8902, "8.9.2")])
def test_cudnn_version(raw: int, text: str) -> None:
    assert cudnn_version(raw) == text


def test_fabric_comes_from_the_facts_and_older_inputs_still_count(inputs: VerifyInputs) -> None:
    assert inputs.fabric_states() == (FabricGpu(state="N/A", status="N/A"),)
    # An inputs.json written before facts carried the fabric: its own ``fabric`` field is read.
    older = inputs.model_copy(
        update={
            "facts": inputs.facts.model_copy(update={"fabric": Unknown(unknown="not probed")}),
            "fabric": (FabricGpu(state="In Progress", status="N/A"),),
        }
    )
    assert older.fabric_states() == (FabricGpu(state="In Progress", status="N/A"),)
    assert FabricManagerVersionFact.parse("Fabric Manager version is : 535.183.01\n", 0) == "535.183.01"
    assert FabricManagerVersionFact.parse("nv-fabricmanager: not found", 127) == Unknown(
        unknown="nv-fabricmanager: not found"
    )


def test_limits_reject_undefined_sources(tmp_path: Path) -> None:
    from provision.errors import CatalogError

    bad = (
        (ROOT / "provision" / "catalog" / "data" / "verify.yaml")
        .read_text()
        .replace("[H200-VERIFY, H200-BENCH]", "[NOPE]")
    )
    (tmp_path / "verify.yaml").write_text(bad)
    with pytest.raises(CatalogError, match="NOPE"):
        load_limits(tmp_path / "verify.yaml")


# ---- output ----------------------------------------------------------------------------------------


def test_junit_has_one_testcase_per_check_and_failures(spec: Spec, inputs: VerifyInputs) -> None:
    report = verify(
        spec,
        "s.yaml",
        inputs.facts,
        load_catalog(),
        shipped_limits(),
        inputs=_with_load(inputs, h2d_gbps=10.0),
    )
    root = ET.fromstring(junit_xml(report))
    cases = root.findall(".//testcase")
    assert len(cases) == len(report.results)
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["pcie-h2d[gpu0]"]
    assert root.find("testsuite").get("skipped") == "13"  # type: ignore[union-attr]


def test_cli_replays_inputs_with_json_and_junit(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    args = ["verify", str(SPEC_PATH), "--inputs", str(RUN / "inputs.json"), "--json", "--junit", str(junit)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert one_report(json.loads(result.output))["counts"]["fail"] == 0
    assert ET.parse(junit).getroot().tag == "testsuites"


def test_cli_table_and_exit_1_on_failure(tmp_path: Path, inputs: VerifyInputs) -> None:
    bad = tmp_path / "inputs.json"
    bad.write_text(_with_load(inputs, bf16_tflops=100.0).model_dump_json())
    result = CliRunner().invoke(cli, ["verify", str(SPEC_PATH), "--inputs", str(bad)])
    assert result.exit_code == 1, result.output
    assert "bf16-matmul[gpu0]" in result.output and "fail" in result.output


def test_cli_bad_inputs_file_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["verify", str(SPEC_PATH), "--inputs", str(tmp_path / "missing.json")])
    assert result.exit_code == 1 and "no such verify inputs file" in result.output


def test_junit_is_valid_against_the_strict_schema(spec: Spec, inputs: VerifyInputs) -> None:
    from tests.unit.junit_strict import problems

    report = verify(
        spec,
        "s.yaml",
        inputs.facts,
        load_catalog(),
        shipped_limits(),
        inputs=_with_load(inputs, h2d_gbps=10.0),
    )
    xml = junit_xml(report)
    assert problems(xml) == []
    failure = ET.fromstring(xml).find(".//testcase/failure")
    assert failure is not None and "measured: " in (failure.text or "")  # the details are the element's text
    # The format provision wrote before: no timestamp, output inside testcases, an attribute on the root.
    old = (Path(__file__).parents[1] / "fixtures" / "verify" / "h200-ubuntu2404" / "junit.xml").read_text()
    assert any("timestamp" in p for p in problems(old)) and any("testsuites" in p for p in problems(old))


def _bare(pci: Unknown | None, packages: tuple[Package, ...]) -> VerifyInputs:
    """A machine without nvidia-smi and without a loaded module: sysfs from the H200 capture (or
    ``pci`` in its place), the package list read as ``packages``."""
    hardware = facts_from_raw(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01").hardware
    assert not isinstance(hardware, Unknown)
    if pci is not None:
        hardware = hardware.model_copy(update={"pci": pci})
    facts = unknown_facts("localhost", "nvidia-smi: not found").model_copy(
        update={
            "hardware": hardware,
            "packages": packages,
            "fabric": Unknown(unknown="nvidia-smi: not found"),
        }
    )
    return VerifyInputs(facts=facts, gpu_run=Unknown(unknown="no GPU work: nvidia-smi: not found"))


@pytest.mark.parametrize(
    ("pci", "packages", "nvidia_smi", "consistency"),
    [
        # no NVIDIA function on the bus: no driver or cable helps, the spec is another machine's
        (Unknown(unknown=NO_NVIDIA_PCI), (), "No NVIDIA GPU in this machine", "No NVIDIA driver package"),
        # GPUs on the bus, no driver package, no module: the driver was never installed
        (None, (), "No NVIDIA driver package is installed", "No NVIDIA driver package is installed"),
        # a driver package installed, no module loaded: the module is the question
        (None, (COMPUTE_580,), "Is the module loaded", "Load the module or reboot"),
        # sysfs not readable: nothing said about the bus
        (Unknown(unknown="cannot read"), (COMPUTE_580,), "Is the module loaded", "Load the module or reboot"),
    ],
)
def test_no_nvidia_smi_hint_names_the_observed_cause(
    spec: Spec, pci: Unknown | None, packages: tuple[Package, ...], nvidia_smi: str, consistency: str
) -> None:
    by_id = {r.id: r for r in evaluate(spec, _bare(pci, packages), load_catalog(), shipped_limits())}
    assert by_id["nvidia-smi"].status == "fail" and (by_id["nvidia-smi"].hint or "").startswith(nvidia_smi)
    assert (by_id["gpu-count"].hint or "").startswith(
        nvidia_smi.replace("Is the module loaded", "A GPU missing")
    )
    assert (by_id["driver-consistency"].hint or "").startswith(consistency)
    not_here = pci is not None and pci.unknown == NO_NVIDIA_PCI
    assert (by_id["cuda-device-count"].hint or "").startswith("No NVIDIA GPU") is not_here


def test_fabric_manager_skip_says_the_fabric_was_not_read(spec: Spec) -> None:
    by_id = {r.id: r for r in evaluate(spec, _bare(None, ()), load_catalog(), shipped_limits())}
    skipped = by_id["fabricmanager-version"]
    assert skipped.status == "skip"
    assert skipped.detail == (
        "no NVSwitch fabric seen (fabric state not read: nvidia-smi: not found) "
        "and the spec does not require FM (FF-04)"
    )


def test_the_table_title_starts_its_line_however_wide_the_output(spec: Spec, inputs: VerifyInputs) -> None:
    # Piped output is not wrapped (README "Commands"): a centred title sat ~170 columns in.
    report = Report(
        spec="specs/h200-ubuntu2404.yaml",
        results=tuple(evaluate(spec, inputs, load_catalog(), shipped_limits())),
    )
    out = io.StringIO()
    render_table(report, Console(file=out, width=400, no_color=True))
    text = out.getvalue()
    assert text.startswith("provision verify specs/h200-ubuntu2404.yaml on localhost")
