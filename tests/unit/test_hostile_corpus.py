"""The corpus of bad inputs (tests/fixtures/hostile/cases.yaml): one located line each, no traceback."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from typer.testing import CliRunner

from provision.cli import cli

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "hostile"
SPEC = str(ROOT / "specs" / "h200-ubuntu2404.yaml")
CASES: list[dict[str, Any]] = YAML(typ="safe").load((CORPUS / "cases.yaml").read_text())


def _file(name: str, tmp_path: Path) -> str:
    """The case's file: one of the corpus, or a special file made here."""
    if name == "<dev-zero>":
        return "/dev/zero"
    if name == "<fifo>":
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        return str(fifo)
    if name == "<directory>":
        return str(tmp_path)
    if name == "<raw-dir-with-directory>":
        (tmp_path / "query-gpu.txt").mkdir()
        return str(tmp_path)
    return str(
        (CORPUS / name).relative_to(Path.cwd()) if CORPUS.is_relative_to(Path.cwd()) else CORPUS / name
    )


@pytest.mark.parametrize("case", CASES, ids=[f"{c['file']}-{c['command'].split()[0]}" for c in CASES])
def test_bad_input_gives_one_located_line(case: dict[str, Any], tmp_path: Path) -> None:
    file = _file(case["file"], tmp_path)
    args = [a.replace("{file}", file).replace("{spec}", SPEC) for a in shlex.split(case["command"])]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == case["exit"], result.output
    assert result.output == f"error: {case['line'].replace('{file}', file)}\n"
    if case["field"] is not None:
        assert f": {case['field']}: " in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
