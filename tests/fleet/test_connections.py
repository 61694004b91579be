"""verify -i on every connection the inventory uses: local and ssh, in one run (issue 31).

The controller's PATH starts with a broken ``python3.13`` (what a pyenv shim without that
version installed does: it prints why on stderr and exits 127); Ansible's interpreter discovery
on a local connection finds it first. The ssh target names no interpreter either: discovery
runs on the target. Every host must reach its checks, none may fail at the play.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

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
    fleet: FleetTargets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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


def test_an_interpreter_that_cannot_run_is_the_hosts_cause(tmp_path: Path) -> None:
    shim = _broken_shim(tmp_path / "shims") / "python3.13"
    inventory = tmp_path / "hosts.ini"
    line = f"here ansible_connection=local ansible_python_interpreter={shim} provision_spec={SPEC}"
    inventory.write_text(line + "\n")
    result = provision("verify", "-i", inventory, "--json")
    assert result.exit_code == 1, result.output
    cause = by_host(json.loads(result.stdout))["here"]["unreachable"]
    assert cause.endswith(
        "printed no module result (rc 127): pyenv: python3.13: command not found "
        "(set ansible_python_interpreter for the host)"
    ), cause
