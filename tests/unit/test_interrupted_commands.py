"""Ctrl-C on every Ansible-backed command: ``Interrupted`` on stderr, exit 130 (README, "Exit
codes"), and with ``--json`` still exactly one document (``outcome: "interrupted"``).

ansible-runner's status ``canceled`` is what a real Ctrl-C gives (tests/system/test_interrupt_real.py runs
real ansible-playbook for it); here the one ansible-runner call site, ``provision.ansible.run_play``,
returns that status, and the commands run for real through typer's CliRunner.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from typer.testing import CliRunner, Result

from provision import ansible

ROOT = Path(__file__).resolve().parents[2]
A100X = str(ROOT / "specs" / "dual-a100x.yaml")
CANCELED = ansible.PlayResult("canceled", 254, (), {}, "TASK [Read the lock] ****")


@pytest.fixture(autouse=True)
def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("PROVISION_REMOTE_DETECT", "ansible")  # detection through the play, not ssh


@pytest.fixture()
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.ini"
    path.write_text("gpu01 ansible_host=192.0.2.10\n")
    return path


def invoke(*args: str) -> Result:
    from provision.cli import cli

    return CliRunner().invoke(cli, list(args))


def interrupted(result: Result, as_json: bool) -> dict[str, Any] | None:
    assert result.exit_code == 130, result.output
    assert "Interrupted" in result.stderr and "rc 254" not in result.output
    if not as_json:
        assert result.stdout == ""
        return None
    doc = json.loads(result.stdout)  # exactly one document: json.loads refuses trailing text
    assert doc["format_version"] == 1 and doc["outcome"] == "interrupted" and doc["exit_code"] == 130
    return doc


@pytest.mark.parametrize(
    ("command", "as_json"),
    [
        *[
            (c, j)
            for c in (["lock", "show"], ["verify", A100X], ["detect"], ["plan", A100X])
            for j in (False, True)
        ],
        (["checklist", "--fleet"], False),  # checklist has no --json
    ],
)
def test_a_canceled_ansible_run_is_interrupted(
    command: list[str], as_json: bool, inventory: Path, tmp_path: Path, mocker: MockerFixture
) -> None:
    played = mocker.patch.object(ansible, "run_play", return_value=CANCELED)
    if command == ["checklist", "--fleet"]:
        fleet = tmp_path / "fleet.yaml"
        fleet.write_text(f"inventory: {inventory}\nspecs:\n  all: {A100X}\n")
        args = [*command, str(fleet), "-o", str(tmp_path / "out")]
    else:
        args = [*command, "-i", str(inventory)]
    result = invoke(*args, *(["--json"] if as_json else []))
    assert played.called
    interrupted(result, as_json)


@pytest.mark.parametrize("command", [["detect"], ["plan", A100X], ["apply", A100X, "--dry-run"]])
def test_ctrl_c_outside_ansible_is_interrupted_with_one_document(
    command: list[str], inventory: Path, mocker: MockerFixture
) -> None:
    # Direct ssh detection (no Ansible run to cancel) or a second Ctrl-C: KeyboardInterrupt.
    mocker.patch("provision.detect.runner.detect_remote", side_effect=KeyboardInterrupt)
    result = invoke(*command, "-i", str(inventory), "--json")
    doc = interrupted(result, as_json=True)
    assert doc is not None and doc["error"]["type"] == "Interrupted"
