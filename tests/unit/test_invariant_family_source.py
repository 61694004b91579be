"""The initramfs invariant cites the host family's own tool: dracut on the RHEL family,
initramfs-tools on Debian and Ubuntu."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from provision.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def _source_of_initramfs_warning(spec: str, capture: str) -> str:
    result = CliRunner().invoke(
        cli,
        [
            "plan",
            str(ROOT / "specs" / spec),
            "--from-raw",
            str(ROOT / "tests" / "fixtures" / "raw" / capture),
        ],
    )
    lines = result.output.splitlines()
    at = next(i for i, line in enumerate(lines) if "blacklist-in-initramfs" in line)
    return lines[at + 1]


def test_rocky_cites_dracut() -> None:
    source = _source_of_initramfs_warning("rocky9-dual-a100x.yaml", "rocky9-dual-a100x-fresh")
    assert "dracut(8)" in source and "update-initramfs" not in source


def test_ubuntu_cites_initramfs_tools() -> None:
    source = _source_of_initramfs_warning("h200-ubuntu2404.yaml", "h200-ubuntu2404-probes")
    assert "update-initramfs(8)" in source and "dracut" not in source
