"""A rolling upgrade over six real sshd targets, gated by verify, stopped and resumed (issue 31).

All six are held to one spec (an H200, the stand-in NVIDIA repository's stack). gpu4 starts with
a working ``nvidia-smi`` that is no package's (a stand-in at /usr/bin/nvidia-smi answering with the
H200 capture's GPU row), so its baseline passes gpu-count; the upgrade installs nvidia-utils, whose
nvidia-smi (the stand-in repository's: it cannot talk to a GPU) replaces it, and gpu-count fails
after gpu4's wave: the regression the gate must stop on. The other hosts fail the GPU checks before
and after alike: not regressions.

The drain hooks are a real program run by provision as argv lists: it keeps each host's drain in
a state directory (as a scheduler would) and logs every call. gpu2 was drained by its admin
before the rollout, so it is neither drained nor undrained by provision.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.conftest import FleetTargets
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.helpers import STACK, provision, write_spec

ROOT = Path(__file__).parents[2]
QUERY_GPU = ROOT / "tests" / "fixtures" / "detect" / "h200-ubuntu2404" / "query-gpu.txt"
HOOKS = """import sys
from pathlib import Path
state, log, verb, host = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
with log.open("a") as f:
    f.write(f"{verb} {host}\\n")
mark = state / host
if verb == "drained":
    sys.exit(0 if mark.exists() else 1)
if verb == "drain":
    mark.touch()
elif verb == "undrain":
    mark.unlink()
"""


@pytest.fixture()
def runs(runs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", "200")
    return runs


def _working_nvidia_smi(path: Path) -> None:
    """A stand-in nvidia-smi answering the GPU query with the H200 capture's row (its driver
    version set to the spec's), failing anything else."""
    rows = [ln for ln in QUERY_GPU.read_text().splitlines()[1:] if not ln.startswith("[exit")]
    body = "\n".join(row.replace("580.159.04", "580.95.05") for row in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '#!/bin/sh\ncase "$*" in *--query-gpu=index,name*) cat <<"EOF"\n' + body + "\nEOF\n;;\n"
        '*) echo "stand-in nvidia-smi: $*" >&2; exit 9;;\nesac\n'
    )
    path.chmod(0o755)


def _hooks(directory: Path) -> tuple[Path, Path, list[str]]:
    state, log = directory / "drained", directory / "hooks.log"
    state.mkdir()
    program = directory / "hooks.py"
    program.write_text(HOOKS)
    return state, log, [sys.executable, str(program), str(state), str(log)]


def _states(doc: dict[str, Any]) -> dict[str, str]:
    return {h["host"]: h["state"] for h in doc["hosts"]}


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_a_rolling_upgrade_stops_at_the_regressed_host_and_resumes(
    fleet6: FleetTargets, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, runs: Path
) -> None:
    d = fleet6.directory
    write_spec(
        d / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index, gpus={"model": "h200-sxm", "count": 1}
    )
    (d / "hosts.ini").write_text("[gpu]\n" + "\n".join(fleet6.host_line(h) for h in fleet6.targets) + "\n")
    state, log, argv = _hooks(d)
    hooks = {verb: [*argv, verb, "{host}"] for verb in ("drained", "drain", "undrain")}
    (d / "fleet.yaml").write_text(
        json.dumps({"inventory": "hosts.ini", "specs": {"gpu": "spec.yaml"}, "rollout": hooks})
    )
    (state / "gpu2").touch()  # the admin's own drain
    _working_nvidia_smi(fleet6.targets["gpu4"].root / "usr/bin/nvidia-smi")

    first = provision(
        "apply",
        "--fleet",
        str(d / "fleet.yaml"),
        "--max-unavailable",
        "2",
        "--yes",
        "--json",
        "--runs-dir",
        str(runs),
    )
    assert first.exit_code == 1, first.output
    doc = json.loads(first.stdout)
    assert doc["outcome"] == "stopped" and doc["waves"] == [
        ["gpu1", "gpu2"],
        ["gpu3", "gpu4"],
        ["gpu5", "gpu6"],
    ]
    assert _states(doc) == {
        "gpu1": "done",
        "gpu2": "done",
        "gpu3": "done",
        "gpu4": "failed",
        "gpu5": "untouched",
        "gpu6": "untouched",
    }
    gpu4 = next(h for h in doc["hosts"] if h["host"] == "gpu4")
    assert any(r.startswith("gpu-count: pass -> fail: ") for r in gpu4["reasons"]), gpu4
    assert gpu4["drained_by"] == "provision"
    assert "done: gpu1, gpu2, gpu3; failed: gpu4; untouched: gpu5, gpu6" in first.stderr
    # nothing after the failing wave was touched: no hook call, no package
    assert not [c for c in _calls(log) if c.endswith(("gpu5", "gpu6"))]
    for name in ("gpu5", "gpu6"):
        assert not set(fleet6.targets[name].dpkg_status()) & set(STACK), name
    for name in ("gpu1", "gpu3", "gpu4"):
        assert set(STACK) <= set(fleet6.targets[name].dpkg_status()), name
    # the admin's drain is kept and never touched; gpu4 stays drained; the passed ones are back
    assert [c for c in _calls(log) if c.endswith("gpu2")] == ["drained gpu2"]
    assert sorted(p.name for p in state.iterdir()) == ["gpu2", "gpu4"]
    record = Path(doc["record"])
    assert record.parent == runs / "rollouts" and record.stat().st_mode & 0o777 == 0o600

    # the admin repairs gpu4 (its GPU answers again), then resumes
    _working_nvidia_smi(fleet6.targets["gpu4"].root / "usr/local/bin/nvidia-smi")
    resumed = provision("resume", str(record), "--yes", "--json")
    assert resumed.exit_code == 0, resumed.output
    again = json.loads(resumed.stdout)
    assert again["outcome"] == "done" and set(_states(again).values()) == {"done"}
    assert sorted(p.name for p in state.iterdir()) == ["gpu2"]
    assert [c for c in _calls(log) if c.endswith("gpu4")] == ["drained gpu4", "drain gpu4", "undrain gpu4"]
    for name in ("gpu5", "gpu6"):
        assert set(STACK) <= set(fleet6.targets[name].dpkg_status()), name
    done = provision("resume", str(record), "--json")
    assert done.exit_code == 0 and json.loads(done.stdout)["outcome"] == "done", done.output
