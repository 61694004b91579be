"""The real two-H200 machine (device kind nvidia-h200-x2): parsers, planner and verify on its outputs.

Captured 2026-11-29 (tests/fixtures/detect/h200x2-ubuntu2404/README.md): GPU0-GPU1 on 18 NVLinks,
fabric Completed/Success although the VM shows no NVSwitch and runs no fabric manager.
"""

from __future__ import annotations

from pathlib import Path

from provision.catalog import load_catalog
from provision.detect.domains.gpu import fabric_state, parse_nvidia_smi_q, parse_topology
from provision.detect.facts import FabricState, Topology
from provision.detect.raw import read_raw
from provision.detect.runner import facts_from_raw
from provision.plan.models import Action, Component
from provision.plan.planner import make_plan
from provision.spec.loader import load_spec
from provision.verify.command import read_inputs
from provision.verify.limits import shipped_limits
from provision.verify.runs import AllReduceRun, VerifyInputs
from provision.verify.workflow import evaluate
from tests.unit.factories import step

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "fixtures" / "detect" / "h200x2-ubuntu2404"
RAW = ROOT / "tests" / "fixtures" / "raw" / "h200x2-ubuntu2404-spec"
INPUTS = ROOT / "tests" / "fixtures" / "verify" / "h200x2-ubuntu2404" / "inputs.json"
SPEC = load_spec(ROOT / "specs" / "h200x2-ubuntu2404.yaml")


def test_real_two_gpu_topology_is_nv18() -> None:
    out = read_raw(CAPTURE)["topo-m"]
    topo = parse_topology(out.output, out.rc)
    assert isinstance(topo, Topology)
    assert topo.gpus == ("GPU0", "GPU1")
    assert topo.links["GPU0"]["GPU1"] == "NV18" and topo.links["GPU1"]["GPU0"] == "NV18"
    assert topo.numa_affinity == {"GPU0": "0", "GPU1": "0"}


def test_real_fabric_state_completed_on_both_gpus() -> None:
    out = read_raw(CAPTURE)["nvidia-smi-q"]
    fabric = fabric_state(parse_nvidia_smi_q(out.output, out.rc))
    assert fabric == FabricState(states=(("Completed", "Success"), ("Completed", "Success")))
    assert fabric.nvswitch and fabric.completed


def test_plan_has_no_changes_and_installs_no_fabric_manager_in_the_guest() -> None:
    plan = make_plan(SPEC, facts_from_raw(RAW), load_catalog())
    assert plan.changes == () and plan.blockers == ()
    fm = step(plan, Component.FABRIC_MANAGER)
    assert fm.action is Action.NOOP
    assert "managed outside (shared NVSwitch virtualization)" in fm.reason


def test_fabric_manager_disabled_is_fine_when_the_fabric_is_managed_outside() -> None:
    spec = SPEC.model_copy(update={"fabric_manager": "disabled"})
    assert make_plan(spec, facts_from_raw(RAW), load_catalog()).blockers == ()


def _results(inputs: VerifyInputs) -> dict[str, object]:
    return {r.name: r for r in evaluate(SPEC, inputs, load_catalog(), shipped_limits())}


def test_verify_replay_passes_with_the_measured_nvlink_figures() -> None:
    results = _results(read_inputs(INPUTS))
    statuses = [r.status for r in results.values()]  # type: ignore[attr-defined]
    # 45: the cuda-toolkit-first invariant passes too (its nvcc is /usr/local/cuda's, release 13.0).
    assert statuses.count("fail") == 0 and statuses.count("pass") == 45
    p2p = results["p2p-bandwidth[gpu0-gpu1]"]
    assert p2p.measured.value == 384.99378842077726  # type: ignore[attr-defined]
    assert p2p.threshold.value == 345.0  # type: ignore[attr-defined]
    assert results["nccl-allreduce"].threshold.value == 268.0  # type: ignore[attr-defined]
    assert results["fabricmanager-version"].status == "skip"  # type: ignore[attr-defined]


def test_verify_fails_an_allreduce_below_the_h200_nvlink_floor() -> None:
    inputs = read_inputs(INPUTS)
    assert isinstance(inputs.allreduce, AllReduceRun)
    slow = tuple(
        r.model_copy(update={"seconds_per_iter": r.seconds_per_iter * 2}) for r in inputs.allreduce.ranks
    )
    halved = inputs.model_copy(update={"allreduce": inputs.allreduce.model_copy(update={"ranks": slow})})
    result = _results(halved)["nccl-allreduce"]
    assert result.status == "fail"  # type: ignore[attr-defined]
    assert 148 < result.measured.value < 150  # type: ignore[attr-defined]
