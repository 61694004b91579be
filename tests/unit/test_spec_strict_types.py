"""A spec's integers and booleans are what YAML says they are: a quoted number, a ``yes`` string or a
``true`` count is refused with the field and its line, never coerced."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from provision.cli import cli

SPEC = Path(__file__).resolve().parents[2] / "specs" / "h200-ubuntu2404.yaml"


@pytest.mark.parametrize(
    ("written", "edited", "said"),
    [
        ("count: 1", "count: true", "gpus.count: Input should be a valid integer"),
        ("hold: false", 'hold: "yes"', "driver.hold: Input should be a valid boolean"),
        ("branch: 580", 'branch: "580"', "driver.branch: Input should be a valid integer"),
    ],
)
def test_a_coercible_value_is_refused(tmp_path: Path, written: str, edited: str, said: str) -> None:
    text = SPEC.read_text()
    assert text.count(written) == 1
    spec = tmp_path / "spec.yaml"
    spec.write_text(text.replace(written, edited))
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 2
    assert said in result.output and f"{spec}:" in result.output
