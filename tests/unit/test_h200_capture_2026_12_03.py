"""The H200 capture of 2026-12-03 (every probe of the fact registry, tests/fixtures/raw/
h200-ubuntu2404-2026-12-03/README.md) plans and imports as the real run did."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from provision.cli import cli
from provision.detect.runner import facts_from_raw
from provision.unknown import Unknown

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-03"
SPEC = ROOT / "specs" / "h200-ubuntu2404.yaml"


def test_the_gpu_runtime_probes_read_as_on_the_machine() -> None:
    facts = facts_from_raw(CAPTURE, venv="/opt/torch/.venv")
    runtime = facts.gpu_runtime
    assert runtime is not None
    assert not isinstance(runtime.modules, Unknown) and set(runtime.modules.names) == {"nvidia", "nvidia_uvm"}
    assert runtime.services == Unknown(unknown="systemctl: not found")
    assert runtime.holders() == ()  # no nvidia_drm, and no systemd to say what runs


def test_the_spec_plans_no_changes() -> None:
    result = CliRunner().invoke(cli, ["plan", str(SPEC), "--from-raw", str(CAPTURE)])
    assert result.exit_code == 0, result.output
    assert "No changes. The machine matches the spec." in result.output


def test_import_writes_a_spec_that_plans_no_changes(tmp_path: Path) -> None:
    out = tmp_path / "imported.yaml"
    runner = CliRunner()
    imported = runner.invoke(
        cli, ["import", "--from-raw", str(CAPTURE), "--venv", "/opt/torch/.venv", "-o", str(out)]
    )
    assert imported.exit_code == 0, imported.output
    text = out.read_text()
    assert "\ngpu:" not in text  # every setting at the card's default
    assert "gpu.persistence left out: nvidia-persistenced.service was not read" in text
    planned = runner.invoke(cli, ["plan", str(out), "--from-raw", str(CAPTURE)])
    assert planned.exit_code == 0 and "No changes" in planned.output, planned.output
