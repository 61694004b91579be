"""provision apply end to end: a real Debian 12 root, real apt/dpkg, real Ansible over ssh.

Only NVIDIA's packages and the torch wheel are stand-ins (tests/integration/harness).
The key property: apply, then the plan is empty, then apply again changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from provision.apply import runner
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.harness.target import Target
from tests.integration.helpers import STACK, assert_no_change_unconfirmed, provision, write_spec
from tests.unit.factories import one_plan


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
    assert f"Signed-By: /usr/share/keyrings/provision-nvidia-cuda.gpg {nvidia_repo.fingerprint}" in sources
    version_py = target.root / "opt/provision/venv/lib/python3.11/site-packages/torch/version.py"
    assert "__version__ = '2.11.0+cu130'" in version_py.read_text()

    replan = provision("plan", str(spec), "-i", inv, "--detailed-exitcode", "--json")
    assert replan.exit_code == 0, replan.output
    replanned = one_plan(json.loads(replan.stdout))
    assert_no_change_unconfirmed(replanned)
    assert all(w["rule"] != "mixed-driver-sources" for w in replanned["warnings"])

    facts = json.loads(provision("detect", "-i", inv, "--json").stdout)["hosts"][0]
    repo_host = nvidia_repo.url.split("/")[2]
    assert facts["origins"]["origins"]["nvidia-open"] == repo_host  # apt-cache policy, real apt
    assert set(facts["origins"]["origins"].values()) == {repo_host}

    second = provision("apply", str(spec), "-i", inv, "--yes")
    assert second.exit_code == 0, second.output
    assert "Nothing to do: Ansible was not started." in second.output
    assert len(list(runs.iterdir())) == 1

    _imported_back(spec, inv, tmp_path / "imported")


def _imported_back(spec: Path, inv: str, out: Path) -> None:
    """``provision import`` of the converged target gives the stack back (the target has no GPU,
    hence --gpus; a remote venv is not searched, hence --venv) and names the one section it cannot
    read, the mirror; with that section written, the imported fleet plans no changes. The versions
    are the applied spec's, prefixes included (cuDNN "9.14"), as provision's pins file records them."""
    result = provision(
        "import", "-i", inv, "--gpus", "a100x:2", "--venv", "/opt/provision/venv", "--out", str(out)
    )
    assert result.exit_code == 2, result.output  # the mirror's repository: is the user's to write
    (written,) = (out / "specs").iterdir()
    imported = yaml.safe_load(written.read_text())
    assert imported["driver"] == {
        "branch": 580,
        "flavor": "open",
        "version": "580.95.05",
        "source": "nvidia-repo",
        "hold": True,
    }
    assert imported["cuda"] == {"toolkit": "13.0", "cudnn": "9.14", "nccl": "2.28.3"}  # as the pins say
    assert (imported["python"]["torch"], imported["python"]["cuda_variant"]) == ("2.11.0", "cu130")
    text = " ".join(written.read_text().replace("#   ", "").split())
    assert "provision's repository keyring holds key" in text and "a mirror (packages from 127.0.0.1" in text
    imported["repository"] = yaml.safe_load(spec.read_text())["repository"]
    written.write_text(yaml.safe_dump(imported))
    replan = provision("plan", "--fleet", str(out / "fleet.yaml"), "--json")
    assert replan.exit_code == 0, replan.output
    assert json.loads(replan.stdout)["summary"]["unchanged"] == ["target"], replan.stdout


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


def test_wheel_of_another_cuda_major_is_removed_and_the_venv_converges(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    """The one-cuda-world invariant: a CUDA 12 wheel beside the cu130 torch is planned for removal,
    removed by the real pip of the venv (from its RECORD), and the next plan is empty."""
    spec = write_spec(tmp_path / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index)
    inv = str(target.inventory)
    assert provision("apply", str(spec), "-i", inv, "--yes").exit_code == 0
    site = target.root / "opt/provision/venv/lib/python3.11/site-packages"
    _plant_wheel(site, "nvidia_cudnn_cu12", "9.1.0.70")

    planned = one_plan(json.loads(provision("plan", str(spec), "-i", inv, "--json").output))
    removal = [s for s in planned["steps"] if s["component"] == "python_wheels" and s["action"] == "remove"]
    assert [s["packages"] for s in removal] == [["nvidia-cudnn-cu12"]]

    applied = provision("apply", str(spec), "-i", inv, "--yes")
    assert applied.exit_code == 0, applied.output
    assert not (site / "nvidia_cudnn_cu12-9.1.0.70.dist-info").exists()
    assert not (site / "nvidia_cudnn12_stub").exists()
    replan = provision("plan", str(spec), "-i", inv, "--detailed-exitcode")
    assert replan.exit_code == 0, replan.output


def _plant_wheel(site: Path, name: str, version: str) -> None:
    """A distribution as pip leaves it: files, and a dist-info whose RECORD lists them."""
    package = site / "nvidia_cudnn12_stub"
    package.mkdir()
    (package / "__init__.py").write_text("")
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
    )
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text(
        f"nvidia_cudnn12_stub/__init__.py,,\n{info.name}/METADATA,,\n{info.name}/INSTALLER,,\n{info.name}/RECORD,,\n"
    )
