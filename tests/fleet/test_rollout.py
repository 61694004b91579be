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


def _working_nvidia_smi(path: Path, driver: str = "580.95.05") -> None:
    """A stand-in nvidia-smi answering the GPU query with the H200 capture's row (its driver
    version set to ``driver``), failing anything else."""
    rows = [ln for ln in QUERY_GPU.read_text().splitlines()[1:] if not ln.startswith("[exit")]
    body = "\n".join(row.replace("580.159.04", driver) for row in rows)
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


A = {"nvidia-open": "580.82.07-1", "libnccl2": "2.28.3-1+cuda13.0", "libcudnn9-cuda-13": "9.14.0.64-1"}
B = {"nvidia-open": "580.95.05-1", "libnccl2": "2.29.2-1+cuda13.0", "libcudnn9-cuda-13": "9.20.0.48-1"}


def _at(fleet: FleetTargets, name: str, versions: dict[str, str]) -> bool:
    status = fleet.targets[name].dpkg_status()
    return all(status.get(p, ("",))[0] == v for p, v in versions.items())


def test_a_rolling_rollback_stops_at_the_regressed_host_and_resumes_to_the_chosen_lock(
    fleet6: FleetTargets, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, runs: Path
) -> None:
    """Six hosts at lock 1 (A) then lock 2 (B), rolled back to lock 1 two at a time. gpu4 answers
    gpu-count before the rollback (the working stand-in over nvidia-utils' /usr/bin/nvidia-smi);
    the downgrade of nvidia-utils puts the package's own back, and its gate fails."""
    d = fleet6.directory
    for name, driver, cudnn, nccl in (
        ("a", "580.82.07", "9.14", "2.28.3"),
        ("b", "580.95.05", "9.20", "2.29.2"),
    ):
        write_spec(
            d / f"{name}.yaml",
            nvidia_repo.url,
            nvidia_repo,
            wheel_index,
            gpus={"model": "h200-sxm", "count": 1},
            driver={"branch": 580, "flavor": "open", "version": driver, "source": "nvidia-repo"},
            cuda={"toolkit": "13.0", "cudnn": cudnn, "nccl": nccl},
        )
    inv = d / "hosts.ini"
    inv.write_text("[gpu]\n" + "\n".join(fleet6.host_line(h) for h in fleet6.targets) + "\n")
    for spec, more in (("a.yaml", []), ("b.yaml", ["--replace-held"])):
        done = provision("apply", str(d / spec), "-i", str(inv), "--forks", "6", "--yes", *more)
        assert done.exit_code == 0, done.output
    assert all(_at(fleet6, h, B) for h in fleet6.targets)
    state, log, argv = _hooks(d)
    hooks = {verb: [*argv, verb, "{host}"] for verb in ("drained", "drain", "undrain")}
    (d / "fleet.yaml").write_text(json.dumps({"inventory": "hosts.ini", "rollout": hooks}))
    (state / "gpu2").touch()  # the admin's own drain
    _working_nvidia_smi(fleet6.targets["gpu4"].root / "usr/bin/nvidia-smi")  # over nvidia-utils' file

    args = ["--fleet", str(d / "fleet.yaml"), "--max-unavailable", "2", "--replace-held", "--json"]
    dry = provision("rollback", *args, "--dry-run", "--runs-dir", str(runs))
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["outcome"] == "dry-run" and not _calls(log)
    first = provision("rollback", *args, "--yes", "--runs-dir", str(runs))
    assert first.exit_code == 1, first.output
    doc = json.loads(first.stdout)
    assert doc["format_version"] == 2 and doc["action"] == "rollback" and doc["outcome"] == "stopped"
    assert doc["waves"] == [["gpu1", "gpu2"], ["gpu3", "gpu4"], ["gpu5", "gpu6"]]
    assert _states(doc) == {
        "gpu1": "done",
        "gpu2": "done",
        "gpu3": "done",
        "gpu4": "failed",
        "gpu5": "untouched",
        "gpu6": "untouched",
    }
    assert {h["host"]: h["lock"] for h in doc["hosts"]} == {h: 1 for h in fleet6.targets}
    gpu4 = next(h for h in doc["hosts"] if h["host"] == "gpu4")
    assert any(r.startswith("gpu-count: pass -> fail: ") for r in gpu4["reasons"]), gpu4
    assert "done: gpu1, gpu2, gpu3; failed: gpu4; untouched: gpu5, gpu6" in first.stderr
    # nothing after the failing wave was touched: no hook call, B's versions still there
    assert not [c for c in _calls(log) if c.endswith(("gpu5", "gpu6"))]
    assert _at(fleet6, "gpu5", B) and _at(fleet6, "gpu6", B)
    assert all(_at(fleet6, h, A) for h in ("gpu1", "gpu2", "gpu3", "gpu4"))
    assert [c for c in _calls(log) if c.endswith("gpu2")] == ["drained gpu2"]
    assert sorted(p.name for p in state.iterdir()) == ["gpu2", "gpu4"]
    record = Path(doc["record"])
    assert record.parent == runs / "rollouts" and record.stat().st_mode & 0o777 == 0o600

    # gpu4's converged rollback wrote lock 3 (A again): resume still returns it to lock 1, not 2
    assert (
        json.loads((fleet6.targets["gpu4"].root / "var/lib/provision/lock.json").read_text())["number"] == 3
    )
    _working_nvidia_smi(fleet6.targets["gpu4"].root / "usr/local/bin/nvidia-smi", "580.82.07")
    resumed = provision("resume", str(record), "--yes", "--json")
    assert resumed.exit_code == 0, resumed.output
    again = json.loads(resumed.stdout)
    assert again["action"] == "rollback" and again["outcome"] == "done"
    assert set(_states(again).values()) == {"done"}
    assert all(_at(fleet6, h, A) for h in fleet6.targets)
    assert sorted(p.name for p in state.iterdir()) == ["gpu2"]
    assert [c for c in _calls(log) if c.endswith("gpu4")] == ["drained gpu4", "drain gpu4", "undrain gpu4"]
