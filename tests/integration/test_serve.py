"""Serving with vLLM, applied to a real Debian 12 root: real pip installs a stand-in vLLM wheel
(tests/integration/harness/vllm_wheel.py: the real name, version and torch pin, no engine) into the
spec's venv under a constraint that keeps torch 2.11.0+cu130, Ansible writes the systemd unit, which
systemd-analyze verifies, and the next plan is empty."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.harness.server import StaticServer
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.harness.target import Target
from tests.integration.harness.vllm_wheel import publish_pypi
from tests.integration.helpers import provision, write_spec
from tests.unit.factories import LLAMA_31_8B, one_plan

UNIT = "etc/systemd/system/provision-vllm.service"
SERVE = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "vllm": "0.26.0",
    "architecture": LLAMA_31_8B,
    "weights": "awq-int4",
    "max_context": 8192,
    "sequences": 4,
    "served_model_name": "llama-8b",
    "host": "0.0.0.0",
    "port": 8011,
}


def test_apply_installs_vllm_with_torch_held_writes_the_unit_and_converges(
    target: Target,
    nvidia_repo: NvidiaRepo,
    wheel_index: WheelIndex,
    http_server: StaticServer,
    tmp_path: Path,
    runs: Path,
) -> None:
    index = http_server.url + publish_pypi(http_server.root)
    spec = write_spec(
        tmp_path / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index, serve={**SERVE, "index_url": index}
    )
    inv = str(target.inventory)

    plan = one_plan(json.loads(provision("plan", str(spec), "-i", inv, "--json").stdout))
    fit = next(s for s in plan["steps"] if s["component"] == "serve" and s["action"] == "noop")
    assert "memory fit: weights (awq-int4)" in fit["reason"] and fit["reason"].endswith(": fits")

    first = provision("apply", str(spec), "-i", inv, "--yes")
    assert first.exit_code == 0, first.output
    assert "Converged: a fresh plan shows no changes." in first.output

    site = target.root / "opt/provision/venv/lib/python3.11/site-packages"
    assert (site / "vllm-0.26.0.dist-info").is_dir()
    assert "__version__ = '2.11.0+cu130'" in (site / "torch/version.py").read_text()  # the CUDA build kept
    assert (
        target.root / "opt/provision/venv/provision-constraints.txt"
    ).read_text() == "torch==2.11.0+cu130\n"
    ran = target.run(["/opt/provision/venv/bin/vllm", "serve", "x"], check=False)
    assert ran.stdout.strip() == "stand-in vllm serve x"  # pip wrote the console script

    unit = (target.root / UNIT).read_text()
    assert (
        "ExecStart=/opt/provision/venv/bin/vllm serve meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 "
        "--port 8011 --tensor-parallel-size 2 --gpu-memory-utilization 0.9 --max-num-seqs 4 --dtype float16 "
        "--kv-cache-dtype auto --served-model-name llama-8b --max-model-len 8192 --quantization awq"
    ) in unit
    assert "Environment=NCCL_NVLS_ENABLE=0" in unit and "DynamicUser=yes" in unit
    link = target.root / "etc/systemd/system/multi-user.target.wants/provision-vllm.service"
    assert link.is_symlink() and str(link.readlink()) == "/" + UNIT
    if shutil.which("systemd-analyze"):
        # The Debian root has no systemd units of its own (--root= lacks sysinit.target): check the unit
        # on this machine, its ExecStart pointed at the venv inside the root so that the binary exists.
        checked = tmp_path / "provision-vllm.service"
        checked.write_text(unit.replace("ExecStart=/opt/", f"ExecStart={target.root}/opt/"))
        verified = subprocess.run(
            ["systemd-analyze", "verify", "--man=no", str(checked)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert verified.returncode == 0, verified.stderr

    second = provision("apply", str(spec), "-i", inv, "--yes")
    assert second.exit_code == 0, second.output
    assert "Nothing to do: Ansible was not started." in second.output


@pytest.mark.parametrize("torch", ["2.13.0"])
def test_a_torch_that_disagrees_with_vllm_is_refused_before_anything_runs(
    torch: str, target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    spec = write_spec(tmp_path / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index, serve=SERVE)
    text = spec.read_text().replace("torch: 2.11.0", f"torch: {torch}")
    spec.write_text(text)
    refused = provision("apply", str(spec), "-i", str(target.inventory), "--yes")
    assert refused.exit_code == 1
    assert "serve-vllm-torch-pin" in refused.output
    assert not (target.root / UNIT).exists()
    assert not (target.root / "opt/provision/venv").exists()  # refused before Ansible ran
