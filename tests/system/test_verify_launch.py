"""The GPU load program and its launcher, on CPU: a gloo all-reduce that completes, one that hangs
and is failed within its deadline, the gpus mode without CUDA, and a missing venv."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from provision.detect.facts import Unknown
from provision.verify import launch
from provision.verify.checks_multi import allreduce_problem, busbw_gbps
from provision.verify.runs import GpuRun

pytest.importorskip("torch", reason="CPU torch is needed (CI installs torch==2.13.0)")

PYTHON = Path(sys.executable)


def test_gloo_allreduce_two_processes_completes() -> None:
    run = launch.run_allreduce(PYTHON, 2, backend="gloo", timeout=60, mib=4, iters=3)
    assert not run.timed_out, run.failures
    assert [r.rank for r in run.ranks] == [0, 1]
    assert allreduce_problem(run) is None
    assert all(r.correct for r in run.ranks)
    assert busbw_gbps(run) is not None and busbw_gbps(run) > 0  # type: ignore[operator]


def test_hung_allreduce_is_killed_and_failed_within_the_timeout() -> None:
    started = time.monotonic()
    run = launch.run_allreduce(PYTHON, 2, backend="gloo", timeout=8, mib=1, iters=1, hang=True)
    # The hung ranks never end: any finite bound shows the deadline killed them; a wide one, so that
    # two torch imports on a loaded machine cannot fail it.
    assert time.monotonic() - started < 8 + 60
    assert run.timed_out
    assert (allreduce_problem(run) or "").startswith("hung: not finished within 8 s")


def test_gpus_mode_without_cuda_reports_why() -> None:
    run = launch.run_gpus(PYTHON, 1, timeout=120)
    assert isinstance(run, GpuRun)
    assert run.available is False and run.error == "torch.cuda.is_available() is False"
    assert run.torch is not None and run.gpus == ()


def test_gpus_mode_deadline_kills_the_child() -> None:
    started = time.monotonic()
    run = launch.run_gpus(PYTHON, 1, timeout=0.5)
    assert isinstance(run, Unknown) and "did not finish within" in run.unknown  # killed, not finished
    assert time.monotonic() - started < 60


def test_child_environment_keeps_multicast_off() -> None:
    env = launch.child_env()
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"] == "1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_missing_venv_is_a_reason(tmp_path: Path) -> None:
    assert isinstance(launch.python_of(None), Unknown)
    missing = launch.python_of(str(tmp_path / "venv"))
    assert isinstance(missing, Unknown) and "no such interpreter" in missing.unknown


def test_last_json_skips_library_chatter() -> None:
    assert launch.last_json('warning: x\n{"a": 1}\n') == {"a": 1}
    assert launch.last_json("Traceback\nboom\n") is None
