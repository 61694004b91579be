"""A probe output reaches the user's terminal without control sequences (ESC, CSI, OSC): a raw
directory from a support bundle or a remote host's answer is untrusted text."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provision.cli import cli
from provision.detect.raw import ProbeOutput, printable

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[2J\x1b]0;PWNED\x07evil", "evil"),
        ("\x1b[4mGPU0\x1b[0m\tCPU Affinity", "GPU0\tCPU Affinity"),  # nvidia-smi topo -m's header
        ("\x1b]0;PWNED unterminated\x1bc", "\ufffd]0;PWNED unterminated\ufffdc"),
        ("line\r\nnext\rover", "line\nnext\ufffdover"),
        ("\x9b31m C1 CSI\x7f", "\ufffd31m C1 CSI\ufffd"),
        ("tab\tand\nnewline kept, é and 中 too", "tab\tand\nnewline kept, é and 中 too"),
    ],
)
def test_control_characters_are_replaced(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert ProbeOutput(command=text, output=text, rc=0).output == shown


def test_a_planted_escape_in_a_raw_file_is_not_printed(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(CAPTURE, raw)
    torch = raw / "torch.txt"
    first = torch.read_text().splitlines()[0]
    torch.write_text(f"{first}\n\x1b[2J\x1b]0;PWNED\x1bcevil\n[exit 0]\n")
    result = CliRunner().invoke(
        cli, ["plan", str(ROOT / "specs" / "h200-ubuntu2404.yaml"), "--from-raw", str(raw)]
    )
    shown = result.output
    assert "PWNED" in shown  # the warning quotes the output ...
    assert "\x1b" not in shown and "\x07" not in shown  # ... without its control characters
