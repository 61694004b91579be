"""What a shell, a pipe or a packager expects of the command: --version, completion, unwrapped pipes."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from typer.testing import CliRunner

import provision
from provision.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_package_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"provision {provision.__version__}\n"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" in project["dynamic"] and project["scripts"] == {"provision": "provision.cli:main"}


def test_shell_completion_is_typers() -> None:
    result = CliRunner().invoke(cli, ["--show-completion", "bash"], prog_name="provision")
    assert result.exit_code == 0, result.output
    assert "complete -o default -F _provision_completion provision" in result.stdout


def test_piped_output_is_not_wrapped_and_has_no_trailing_spaces() -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"PYTHONPATH": str(ROOT)}
    raw = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec"
    spec = ROOT / "specs" / "dual-a100x.yaml"
    argv = [sys.executable, "-m", "provision", "plan", str(spec), "--from-raw", str(raw)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=60)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stderr  # refused: the H200 capture is not two A100X
    assert max(map(len, lines)) > 80  # rich's default for a pipe would have wrapped these
    assert any(
        line.rstrip().endswith("-> /etc/apt/sources.list.d/provision-nvidia-cuda.sources") for line in lines
    )
    assert all(line == line.rstrip() for line in lines)
