"""Remote verify runs the venv's interpreter as root only where the trust rule accepts the venv on
the host: the play runs provision/trust.py itself there, just before the GPU program."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision import trust
from provision.detect.raw import read_raw
from provision.verify.remote import (
    GPU_TASK,
    TRUST_TASK,
    GpuOutcome,
    HostJob,
    inputs_from,
    trust_problem,
    verify_play,
)

CAPTURE = Path(__file__).parents[1] / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01"


def _checked(venv: Path) -> GpuOutcome:
    """What the play's trust task reports: the program run as the play runs it."""
    done = subprocess.run(
        [sys.executable, "-I", trust.__file__, "venv", str(venv)], capture_output=True, text=True, check=False
    )
    return GpuOutcome(True, done.returncode, done.stdout, done.stderr)


@pytest.fixture
def venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if os.geteuid() != 0:
        pytest.skip("ownership checks need files owned by root")
    monkeypatch.delenv(trust.SUDO_VAR, raising=False)
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    tmp_path.chmod(0o755)
    return tmp_path / "venv"


def test_a_trusted_venv_is_trusted_on_the_host_as_here(venv: Path) -> None:
    assert trust.problem("venv", str(venv)) is None
    assert trust_problem(_checked(venv)) is None


@pytest.mark.parametrize("change", ["group-writable", "other-owner"])
def test_a_venv_others_could_write_is_refused_on_the_host_as_here(venv: Path, change: str) -> None:
    if change == "group-writable":
        os.chown(venv, 0, 100)
        venv.chmod(0o775)
    else:
        os.chown(venv, 65534, 65534)
    assert trust_problem(_checked(venv)) == trust.problem("venv", str(venv)) is not None


def test_no_answer_from_the_trust_task_is_a_reason_not_a_pass() -> None:
    crashed = GpuOutcome(True, 1, "", "Traceback ...\nSyntaxError: invalid syntax")
    assert trust_problem(crashed) == "the trust check gave no answer (exit 1: SyntaxError: invalid syntax)"
    assert trust_problem(GpuOutcome(False)) is None  # skipped: no venv, and the GPU task is skipped too


def test_an_untrusted_venv_gives_the_reason_instead_of_a_gpu_run(venv: Path) -> None:
    venv.chmod(0o777)
    job = HostJob(venv=str(venv), load_seconds=1.0, gpu_count=1)
    ran = GpuOutcome(True, 0, '{"device_count": 1}', "")  # were the program run anyway, not believed
    inputs = inputs_from("gpu1", read_raw(CAPTURE), ran, job, checked=_checked(venv))
    assert "the venv is not trusted" in str(inputs.gpu_run) and "writable by every user" in str(
        inputs.gpu_run
    )


def test_the_play_runs_the_gpu_program_only_after_the_host_said_trusted() -> None:
    block = verify_play()[0]["tasks"][1]["block"]
    names = [t["name"] for t in block]
    assert names.index(TRUST_TASK) == names.index(GPU_TASK) - 1
    check = block[names.index(TRUST_TASK)]["ansible.builtin.command"]["argv"]
    assert check[1:] == ["-I", "{{ provision_verify_dir.path }}/provision_trust.py", "venv", check[-1]]
    assert "provision_verify_trust" in str(block[names.index(GPU_TASK)]["when"])
    assert any("provision_trust.py" in str(t.get("ansible.builtin.copy", {})) for t in block)
