"""``checklist -o FILE`` takes its format from the file's extension unless ``--format`` says it, and
refuses a ``--format`` that contradicts the extension (one format under another's name)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from provision.cli import cli

SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "h200-ubuntu2404.yaml")


@pytest.mark.parametrize(
    ("name", "start"), [("list.html", "<!DOCTYPE html>"), ("list.md", "# BIOS"), ("list.txt", "# BIOS")]
)
def test_the_extension_picks_the_format(tmp_path: Path, name: str, start: str) -> None:
    out = tmp_path / name
    result = CliRunner().invoke(cli, ["checklist", SPEC, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith(start)


def test_a_format_against_the_extension_is_refused_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "list.pdf"
    result = CliRunner().invoke(cli, ["checklist", SPEC, "-f", "md", "-o", str(out)])
    assert result.exit_code == 1
    assert "--format md but --output" in result.output and "names pdf" in result.output
    assert not out.exists()
