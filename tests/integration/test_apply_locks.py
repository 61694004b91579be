"""Playbook behaviour behind the field failures, on the real Debian root (FF-01, FF-02, FF-08)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.apply import runner
from provision.plan.models import Plan
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.harness.target import Target
from tests.integration.helpers import provision, write_spec

STACK_AT_580 = ("nvidia-open", "nvidia-driver-open", "libnvidia-compute", "nvidia-utils")


@pytest.fixture()
def apt_spec(tmp_path: Path, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex) -> Callable[..., Path]:
    """Writes the target's spec without ``python`` (these tests are about apt); keywords replace sections."""

    def write(**over: Any) -> Path:
        return write_spec(
            tmp_path / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index, python=None, **over
        )

    return write


def apply_ok(spec: Path, target: Target, *extra: str) -> str:
    result = provision("apply", str(spec), "-i", str(target.inventory), "--yes", *extra)
    assert result.exit_code == 0, result.output
    return str(result.output)


def test_ff01_holds_and_pins_survive_an_upgrade(
    target: Target, apt_spec: Callable[..., Path], runs: Path
) -> None:
    spec = apt_spec()
    apply_ok(spec, target)
    upgrade = target.run(["apt-get", "-y", "dist-upgrade"], check=True)  # 590.48.01 is in the repository
    assert "0 upgraded" in upgrade.stdout
    status = target.dpkg_status()
    assert all(status[name] == ("580.95.05-1", "hold ok installed") for name in STACK_AT_580)
    guard = (target.root / "etc/apt/apt.conf.d/51provision-nvidia-unattended").read_text()
    assert 'Unattended-Upgrade::Package-Blacklist {\n    "nvidia-";' in guard
    replan = provision("plan", str(spec), "-i", str(target.inventory), "--detailed-exitcode")
    assert replan.exit_code == 0, replan.output


def test_ff02_drifted_fabric_manager_goes_back_to_the_driver_version(
    target: Target, apt_spec: Callable[..., Path], runs: Path
) -> None:
    spec = apt_spec(gpus={"model": "h100-sxm", "count": 8})
    apply_ok(spec, target)
    assert target.dpkg_status()["nvidia-fabricmanager"] == ("580.95.05-1", "hold ok installed")
    target.run(
        ["apt-get", "-y", "--allow-change-held-packages", "install", "nvidia-fabricmanager=590.48.01-1"],
        check=True,
    )  # the gpu-driver-container#735 drift, by hand
    drift = provision("plan", str(spec), "-i", str(target.inventory), "--detailed-exitcode")
    assert drift.exit_code == 2
    assert "590.48.01 -> 580.95.05" in drift.output
    apply_ok(spec, target)
    assert target.dpkg_status()["nvidia-fabricmanager"] == ("580.95.05-1", "hold ok installed")


def test_ff08_transaction_pulling_a_driver_is_refused_and_nothing_installed(
    target: Target, apt_spec: Callable[..., Path], tmp_path: Path, runs: Path
) -> None:
    spec = apt_spec()
    saved = tmp_path / "plan.json"
    assert provision("plan", str(spec), "-i", str(target.inventory), "--out", str(saved)).exit_code == 0
    plan = Plan.model_validate_json(saved.read_text())
    # What a careless recipe would ask for: the `cuda-13-0` meta, which depends on cuda-drivers.
    roles = plan.extravars["roles"]
    packages = {**roles["nvidia_packages"], "nvidia_packages_list": ["cuda-13-0"]}
    tampered = {**plan.extravars, "roles": {**roles, "nvidia_packages": packages}}
    bad = plan.model_copy(update={"extravars": tampered})
    before = target.dpkg_status()
    result = runner.run_playbook({"target": bad}, target.inventory, runner.new_run_dir(runs, "ff08"))
    assert not result.succeeded
    assert any("cuda-drivers" in f and "FF-08" in f for f in result.hosts["target"].failures), result.hosts
    assert target.dpkg_status() == before


def test_spec_file_is_yaml(tmp_path: Path, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex) -> None:
    spec = write_spec(tmp_path / "s.yaml", nvidia_repo.url, nvidia_repo, wheel_index)
    assert yaml.safe_load(spec.read_text())["os"] == {"distro": "debian", "version": "12"}


def test_flavour_switch_replaces_the_proprietary_driver_with_the_open_one(
    target: Target, apt_spec: Callable[..., Path], runs: Path
) -> None:
    driver = {"branch": 580, "version": "580.95.05", "source": "nvidia-repo"}
    apply_ok(apt_spec(driver={**driver, "flavor": "proprietary"}), target)
    assert target.dpkg_status()["cuda-drivers"] == ("580.95.05-1", "hold ok installed")
    # The switch removes the held proprietary packages: shown in the plan, applied only with consent.
    switch = apt_spec(driver={**driver, "flavor": "open"})
    before = target.dpkg_status()
    refused = provision("apply", str(switch), "-i", str(target.inventory), "--yes")
    assert refused.exit_code == 1, refused.output
    assert "cuda-drivers 580.95.05-1" in refused.output and "--replace-held" in refused.output
    assert target.dpkg_status() == before
    apply_ok(switch, target, "--replace-held")
    status = target.dpkg_status()
    assert status["nvidia-open"] == ("580.95.05-1", "hold ok installed")
    assert "cuda-drivers" not in status or not status["cuda-drivers"][1].endswith(" installed")
