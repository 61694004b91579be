"""Fleets end to end: four real sshd targets, one inventory, specs mapped by group vars and a fleet file.

One target is made unreachable after detection and before Ansible applies: it is
reported, the other three converge, the exit code is 1, and a re-run after restoring
it converges that one and leaves the others untouched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from provision.apply import runner
from tests.fleet.conftest import FleetTargets
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.helpers import STACK, provision, write_spec
from tests.unit.factories import by_host


@pytest.fixture()
def runs(runs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The integration tests' run directory, with a 200-column terminal."""
    monkeypatch.setenv("COLUMNS", "200")
    return runs


def write_inventory(fleet: FleetTargets, spec_by_group: dict[str, list[str]]) -> Path:
    """An INI inventory with one group per spec; each group's provision_spec in group_vars/."""
    lines: list[str] = []
    (fleet.directory / "group_vars").mkdir(exist_ok=True)
    for group, hosts in spec_by_group.items():
        lines += [f"[{group}]", *(fleet.host_line(h) for h in hosts), ""]
    inventory = fleet.directory / "hosts.ini"
    inventory.write_text("\n".join(lines))
    return inventory


def test_plan_maps_specs_by_group_and_fleet_file_and_summarises(
    fleet: FleetTargets, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, runs: Path
) -> None:
    d = fleet.directory
    write_spec(d / "debian.yaml", nvidia_repo.url, nvidia_repo, wheel_index)
    write_spec(
        d / "ubuntu.yaml",
        nvidia_repo.url,
        nvidia_repo,
        wheel_index,
        os={"distro": "ubuntu", "version": "24.04"},
    )
    inventory = write_inventory(fleet, {"a100": ["gpu1", "gpu2"], "h200": ["gpu3", "gpu4"]})
    (d / "group_vars" / "a100.yml").write_text("provision_spec: debian.yaml\n")
    (d / "fleet.yaml").write_text(
        json.dumps({"inventory": "hosts.ini", "specs": {"h200": "debian.yaml", "gpu4": "ubuntu.yaml"}})
    )

    result = provision("plan", "--fleet", str(d / "fleet.yaml"), "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["format_version"] == 2
    assert doc["summary"] == {
        "unchanged": [],
        "to change": ["gpu1", "gpu2", "gpu3"],
        "refused": ["gpu4"],
        "unreachable": [],
        "failed": [],
    }
    assert by_host(doc)["gpu1"]["spec"] == str(d / "debian.yaml")
    assert by_host(doc)["gpu4"]["plan"]["blockers"][0]["rule"] == "os-mismatch"

    fleet.stop_sshd("gpu2")
    text = provision("plan", "-i", str(inventory), "-l", "a100", "--detailed-exitcode")
    assert text.exit_code == 1, text.output
    assert "unreachable" in text.output and "gpu2" in text.output
    assert "Fleet: 2 host(s)" in text.output

    # detect: a host whose own spec is not there is still read (no venv probes), and fails the command
    (d / "detect.yaml").write_text(
        json.dumps({"inventory": "hosts.ini", "specs": {"h200": "debian.yaml", "gpu4": "gone.yaml"}})
    )
    found = provision("detect", "--fleet", str(d / "detect.yaml"), "-l", "gpu3,gpu4", "--json")
    assert found.exit_code == 1, found.output
    facts = json.loads(found.stdout)
    gone = f"spec not loaded: {d / 'gone.yaml'}: no such spec file"
    assert facts["unreachable"] == {"gpu4": gone}
    assert [h["host"] for h in facts["hosts"]] == ["gpu3", "gpu4"]
    assert all(h["os"]["id"] == "debian" and isinstance(h["packages"], list) for h in facts["hosts"])
    assert facts["hosts"][1]["torch"] == {"unknown": gone} and facts["hosts"][1]["venv"] == {"unknown": gone}
    assert facts["hosts"][0]["venv"] != {"unknown": gone}


def test_apply_isolates_an_unreachable_host_and_a_rerun_converges(
    fleet: FleetTargets,
    nvidia_repo: NvidiaRepo,
    wheel_index: WheelIndex,
    runs: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_spec(fleet.directory / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index)
    inventory = write_inventory(fleet, {"gpu": list(fleet.targets)})
    (fleet.directory / "group_vars" / "gpu.yml").write_text("provision_spec: spec.yaml\n")
    real_run = runner.run_playbook

    def lose_gpu3_then_run(*args: Any, **kwargs: Any) -> runner.ApplyResult:
        fleet.stop_sshd("gpu3")  # detected fine, gone when Ansible applies
        return real_run(*args, **kwargs)

    monkeypatch.setattr(runner, "run_playbook", lose_gpu3_then_run)
    first = provision("apply", "-i", str(inventory), "--yes", "--forks", "4")
    assert first.exit_code == 1, first.output
    assert "Apply: 3 ok, 1 failed" in first.output
    assert "unreachable:" in first.output
    for name in ("gpu1", "gpu2", "gpu4"):
        assert held(fleet, name) == STACK, name
    assert held(fleet, "gpu3") == {}

    monkeypatch.setattr(runner, "run_playbook", real_run)
    fleet.start_sshd("gpu3")
    second = provision("apply", "-i", str(inventory), "--yes")
    assert second.exit_code == 0, second.output
    assert "Apply: 4 ok, 0 failed" in second.output
    assert held(fleet, "gpu3") == STACK
    assert len(list(runs.glob("*/plan-gpu3.json"))) == 2
    assert not list(runs.glob("*/plan-gpu1.json"))[1:], "a converged host is not applied again"

    final = provision("plan", "-i", str(inventory), "--json", "--detailed-exitcode")
    assert final.exit_code == 0, final.output
    assert json.loads(final.stdout)["summary"]["unchanged"] == ["gpu1", "gpu2", "gpu3", "gpu4"]


def held(fleet: FleetTargets, name: str) -> dict[str, str]:
    """The target's NVIDIA stack packages that are installed and held: name -> version."""
    status = fleet.targets[name].dpkg_status()
    return {p: v for p, (v, s) in status.items() if p in STACK and s == "hold ok installed"}
