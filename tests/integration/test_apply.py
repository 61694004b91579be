"""provision apply end to end: a real Debian 12 root, real apt/dpkg, real Ansible over ssh.

Only NVIDIA's packages and the torch wheel are stand-ins (tests/integration/harness).
The key property: apply, then the plan is empty, then apply again changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from provision.apply import runner
from provision.cli import cli
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.harness.target import Target

STACK = {
    "nvidia-driver-pinning-580": "580.95.05-1",
    "nvidia-open": "580.95.05-1",
    "nvidia-driver-open": "580.95.05-1",
    "libnvidia-compute": "580.95.05-1",
    "nvidia-kernel-open-dkms": "580.95.05-1",
    "nvidia-utils": "580.95.05-1",
    "cuda-toolkit-13-0": "13.0.2-1",
    "cuda-nvcc-13-0": "13.0.88-1",
    "libcudnn9-cuda-13": "9.14.0.64-1",
    "libcudnn9-dev-cuda-13": "9.14.0.64-1",
    "libnccl2": "2.28.3-1+cuda13.0",
    "libnccl-dev": "2.28.3-1+cuda13.0",
}


def write_spec(
    path: Path, repo_url: str, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, **over: Any
) -> Path:
    """A spec for the Debian 12 target, pointing at the signed stand-in repository and wheel index."""
    spec: dict[str, Any] = {
        "schema_version": 1,
        "name": "debian12-target",
        "os": {"distro": "debian", "version": "12"},
        "gpus": {"model": "a100x", "count": 2},
        "driver": {"branch": 580, "flavor": "open", "version": "580.95.05", "source": "nvidia-repo"},
        "cuda": {"toolkit": "13.0", "cudnn": "9.14", "nccl": "2.28.3"},
        "python": {
            "interpreter": "3.11",
            "venv": "/opt/provision/venv",
            "torch": "2.11.0",
            "cuda_variant": "cu130",
            "index_url": wheel_index.url,
        },
        "repository": {
            "url": repo_url,
            "key_url": nvidia_repo.key_url,
            "fingerprint": nvidia_repo.fingerprint,
        },
    }
    spec.update(over)
    path.write_text(yaml.safe_dump(spec))
    return path


def provision(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture()
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISION_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path / "runs"


def test_apply_installs_holds_converges_and_reapplies_nothing(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    spec = write_spec(tmp_path / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index)
    inv = str(target.inventory)

    first = provision("apply", str(spec), "-i", inv, "--yes")
    assert first.exit_code == 0, first.output
    assert "Converged: a fresh plan shows no changes." in first.output

    status = target.dpkg_status()
    for name, version in STACK.items():
        assert status[name] == (version, "hold ok installed"), name
    assert not any(name.startswith("nvidia-fabricmanager") for name in status)
    assert "cuda-drivers" not in status and "cuda" not in status  # never the driver-pulling metas (FF-08)
    sources = (target.root / "etc/apt/sources.list.d/provision-nvidia-cuda.sources").read_text()
    assert "Signed-By: /usr/share/keyrings/provision-nvidia-cuda.gpg" in sources
    version_py = target.root / "opt/provision/venv/lib/python3.11/site-packages/torch/version.py"
    assert "__version__ = '2.11.0+cu130'" in version_py.read_text()

    replan = provision("plan", str(spec), "-i", inv, "--detailed-exitcode", "--json")
    assert replan.exit_code == 0, replan.output
    assert json.loads(replan.output)["summary"] == "No changes. The machine matches the spec."

    second = provision("apply", str(spec), "-i", inv, "--yes")
    assert second.exit_code == 0, second.output
    assert "Nothing to do: Ansible was not started." in second.output
    assert len(list(runs.iterdir())) == 1


def test_playbooks_rerun_with_the_same_variables_change_nothing(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    spec = write_spec(tmp_path / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index)
    assert provision("apply", str(spec), "-i", str(target.inventory), "--yes").exit_code == 0
    saved = next(runs.glob("*/plan-target.json"))
    from provision.plan.models import Plan

    plan = Plan.model_validate_json(saved.read_text())
    again = runner.run_playbook({"target": plan}, target.inventory, runner.new_run_dir(runs, "rerun"))
    assert again.succeeded
    assert again.hosts["target"].changed == 0, again.hosts["target"]


@pytest.mark.parametrize("kind", ["unsigned", "tampered", "other-key"])
def test_bad_repository_is_refused_and_nothing_installed(
    kind: str, target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    spec = write_spec(tmp_path / "spec.yaml", nvidia_repo.bad(kind), nvidia_repo, wheel_index)  # type: ignore[arg-type]
    before = target.dpkg_status()
    result = provision("apply", str(spec), "-i", str(target.inventory), "--yes")
    assert result.exit_code == 1, result.output
    assert "apt refused the NVIDIA repository" in result.output
    assert target.dpkg_status() == before
    assert not (target.root / "etc/apt/sources.list.d/provision-nvidia-cuda.sources").exists()
    assert not (target.root / "usr/share/keyrings/provision-nvidia-cuda.gpg").exists()


def test_key_with_wrong_fingerprint_stops_before_ansible(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    spec = write_spec(tmp_path / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index)
    data = yaml.safe_load(spec.read_text())
    data["repository"]["fingerprint"] = "0" * 40
    spec.write_text(yaml.safe_dump(data))
    before = target.dpkg_status()
    result = provision("apply", str(spec), "-i", str(target.inventory), "--yes")
    assert result.exit_code == 1
    assert target.dpkg_status() == before
    assert not (target.root / "usr/share/keyrings/provision-nvidia-cuda.gpg").exists()


def test_dry_run_changes_nothing(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    spec = write_spec(tmp_path / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index)
    before = target.dpkg_status()
    result = provision("apply", str(spec), "-i", str(target.inventory), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "Dry run: nothing was changed." in result.output
    assert "nvidia-open=580.95.05-*" in result.output
    assert target.dpkg_status() == before
    assert not runs.exists()
