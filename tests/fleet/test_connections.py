"""verify -i on every connection the inventory uses: local and ssh, in one run (issue 31).

The controller's PATH starts with a broken ``python3.13`` (what a pyenv shim without that
version installed does: it prints why on stderr and exits 127); Ansible's interpreter discovery
on a local connection finds it first. The ssh target names no interpreter either: discovery
runs on the target. Every host must reach its checks, none may fail at the play. Local and ssh
hosts are read over the direct transport (one command each, no ansible-playbook); a host the
direct transport cannot reach (here a templated ``ansible_host``) goes through the play in the
same run, and a host whose become cannot run (the targets have no sudo) fails with sudo's cause.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from typer.testing import CliRunner

from provision import ansible
from provision.cli import cli
from tests.fleet.conftest import FleetTargets
from tests.unit.factories import by_host

ROOT = Path(__file__).parents[2]
SPEC = ROOT / "specs" / "dual-a100x.yaml"


def provision(*args: str | Path) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _broken_shim(directory: Path) -> Path:
    directory.mkdir()
    shim = directory / "python3.13"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    return directory


def test_verify_reaches_a_local_and_an_ssh_host(
    fleet: FleetTargets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    plays = mocker.spy(ansible, "run_play")
    monkeypatch.setenv("PATH", f"{_broken_shim(tmp_path / 'shims')}:{os.environ['PATH']}")
    ssh = fleet.host_line("gpu2", provision_spec=str(SPEC)).replace(
        " ansible_python_interpreter=/usr/bin/python3", ""
    )
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"here ansible_connection=local provision_spec={SPEC}\n{ssh}\n")
    result = provision("verify", "-i", inventory, "--json")
    assert result.exit_code == 1, result.output  # no GPUs: checks fail, each with its own reason
    hosts = by_host(json.loads(result.stdout))
    for name in ("here", "gpu2"):
        assert hosts[name]["unreachable"] is None, hosts[name]["unreachable"]
        by_id = {r["id"]: r for r in hosts[name]["report"]["results"]}
        assert by_id["nvidia-smi"]["detail"] == "nvidia-smi: not found", name
        assert not any("host failed" in (r["detail"] or "") for r in by_id.values()), name
    assert {n: hosts[n]["transport"]["kind"] for n in ("here", "gpu2")} == {"here": "local", "gpu2": "ssh"}
    assert plays.call_count == 0  # no verify, support or lock play: every host had a command


def test_verify_runs_the_play_only_for_the_host_the_direct_transport_cannot_reach(
    fleet: FleetTargets, tmp_path: Path, mocker: MockerFixture
) -> None:
    plays = mocker.spy(ansible, "run_play")
    address = fleet.targets["gpu3"].host
    templated = fleet.host_line("gpu3", provision_spec=str(SPEC), gpu3_address=address).replace(
        f"ansible_host={address}", 'ansible_host="{{ gpu3_address }}"'
    )
    inventory = tmp_path / "hosts.ini"
    lines = [
        f"here ansible_connection=local provision_spec={SPEC}",
        fleet.host_line("gpu2", provision_spec=str(SPEC)),
        templated,
        fleet.host_line("gpu4", provision_spec=str(SPEC), ansible_become="true"),
    ]
    inventory.write_text("\n".join(lines) + "\n")
    result = provision("verify", "-i", inventory, "--json")
    assert result.exit_code == 1, result.output
    hosts = by_host(json.loads(result.stdout))
    kinds = {name: hosts[name]["transport"]["kind"] for name in hosts}
    assert kinds == {"here": "local", "gpu2": "ssh", "gpu3": "play", "gpu4": "ssh"}
    assert "templated" in hosts["gpu3"]["transport"]["why"]
    for name in ("here", "gpu2", "gpu3"):
        assert hosts[name]["unreachable"] is None, hosts[name]["unreachable"]
        by_id = {r["id"]: r for r in hosts[name]["report"]["results"]}
        assert by_id["nvidia-smi"]["detail"] == "nvidia-smi: not found", name
    # gpu4 asks for become and has no sudo: its own cause, in every check.
    cause = hosts["gpu4"]["unreachable"]
    assert cause.startswith("host failed at 'Run the verify agent.': rc 127: ") and "sudo" in cause, cause
    assert {r["detail"] for r in hosts["gpu4"]["report"]["results"]} == {cause}
    verify_plays = [c for c in plays.call_args_list if c.args[1] == "verify.yml"]
    assert [c.kwargs["limit"] for c in verify_plays] == ["gpu3"]


@pytest.mark.parametrize(
    ("switch", "said"),
    [
        ("", "host failed at 'Run the verify agent.': rc 127: "),
        ("ansible", "printed no module result (rc 127): "),
    ],
)
def test_an_interpreter_that_cannot_run_is_the_hosts_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, switch: str, said: str
) -> None:
    monkeypatch.setenv("PROVISION_REMOTE_DETECT", switch)  # "ansible": the play's own words
    shim = _broken_shim(tmp_path / "shims") / "python3.13"
    inventory = tmp_path / "hosts.ini"
    line = f"here ansible_connection=local ansible_python_interpreter={shim} provision_spec={SPEC}"
    inventory.write_text(line + "\n")
    result = provision("verify", "-i", inventory, "--json")
    assert result.exit_code == 1, result.output
    cause = by_host(json.loads(result.stdout))["here"]["unreachable"]
    assert cause.endswith(
        f"{said}pyenv: python3.13: command not found (set ansible_python_interpreter for the host)"
    ), cause
