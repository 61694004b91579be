"""The console entry point runs without cyclic collection until long work starts, and exits without one."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision import gcpolicy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


@pytest.mark.usefixtures("collector_restored")
def test_long_work_collects_again_but_not_what_start_up_made() -> None:
    gcpolicy.start_up()
    assert not gc.isenabled()
    made_at_start_up = [[i] for i in range(1000)]
    gcpolicy.long_running()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made_at_start_up)


@pytest.mark.usefixtures("collector_restored")
def test_long_running_leaves_a_library_callers_collector_alone() -> None:
    gc.enable()
    frozen = gc.get_freeze_count()
    gcpolicy.long_running()
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_the_console_entry_point_disables_collection_and_freezes_at_exit() -> None:
    script = (
        "import gc, sys\n"
        "from provision.cli import base as cli\n"
        "seen = []\n"
        "real = cli.cli\n"
        "def probe(*a, **k):\n"
        "    seen.append(gc.isenabled())\n"
        "    return real(*a, **k)\n"
        "cli.cli = probe\n"
        "sys.argv = ['provision', '--version']\n"
        "try:\n"
        "    cli.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(seen, gc.isenabled(), gc.get_freeze_count() > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[False] False True"
