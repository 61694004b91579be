"""Remote verify runs the venv's interpreter as root only where only root could have written it:
the host-side probe applies provision.trust's rule with real sh and stat."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from provision.detect.raw import ProbeOutput, read_raw
from provision.trust import untrusted_reason
from provision.verify.remote import (
    TRUST_PROBE_ID,
    HostJob,
    inputs_from,
    trust_probe,
    trust_problem,
    verify_play,
)

CAPTURE = Path(__file__).parents[1] / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01"


def _probe(python: Path) -> ProbeOutput:
    argv = trust_probe(str(python)).argv
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    return ProbeOutput(command=" ".join(argv), output=done.stdout + done.stderr, rc=done.returncode)


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("ownership checks need files owned by root")
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    for part in (tmp_path, tmp_path / "venv", tmp_path / "venv" / "bin"):
        part.chmod(0o755)
    return python


def test_a_root_only_venv_is_trusted_on_the_host_as_here(venv: Path) -> None:
    assert untrusted_reason(venv) is None
    assert trust_problem({TRUST_PROBE_ID: _probe(venv)}) is None


@pytest.mark.parametrize("change", ["group-writable", "other-owner"])
def test_a_venv_others_could_write_is_refused_on_the_host_as_here(venv: Path, change: str) -> None:
    target = venv.parent.parent
    if change == "group-writable":
        target.chmod(0o775)
    else:
        os.chown(target, 1000, 1000)
    here, there = untrusted_reason(venv), trust_problem({TRUST_PROBE_ID: _probe(venv)})
    assert here is not None and there is not None
    assert str(target) in there


def test_an_untrusted_venv_gives_the_reason_instead_of_a_gpu_run(venv: Path) -> None:
    venv.parent.parent.chmod(0o777)
    job = HostJob(venv=str(venv.parent.parent), load_seconds=1.0, gpu_count=1)
    outputs = {**read_raw(CAPTURE), TRUST_PROBE_ID: _probe(venv)}  # a host whose GPUs answer
    inputs = inputs_from("gpu1", outputs, None, job)
    assert "not run as root" in str(inputs.gpu_run) and "writable by group or others" in str(inputs.gpu_run)


def test_the_play_runs_the_gpu_program_only_when_the_host_said_trusted() -> None:
    gpu_task = next(
        t for t in verify_play()[0]["tasks"][1]["block"] if t["name"].startswith("Run the GPU load program")
    )
    assert any(
        TRUST_PROBE_ID in str(condition) and "trusted" in str(condition) for condition in gpu_task["when"]
    )
    assert TRUST_PROBE_ID in {p.id for p in HostJob(venv="/opt/v", load_seconds=1, gpu_count=1).probes()}
