"""This machine's probes start before the command has loaded, and are taken over exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from provision import regenerate
from provision.detect import collector, early

RAW = Path(__file__).resolve().parents[1] / "fixtures" / "raw" / "h200-ubuntu2404-spec"


def _probe(probe_id: str, script: str, timeout: float = 10.0) -> dict[str, Any]:
    return {"id": probe_id, "argv": ["sh", "-c", script], "timeout": timeout}


@pytest.fixture
def probes_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "probes.json"
    monkeypatch.setattr(early, "PROBES", path)
    monkeypatch.setattr(early, "_pending", [])
    return path


def _runs(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def test_the_shipped_list_is_the_registrys_probes_with_the_venv_as_a_placeholder() -> None:
    assert early.PROBES.read_text(encoding="utf-8") == regenerate.early_probes_text(), (
        "provision/detect/probes.json is stale: run `python3 -m provision.regenerate`"
    )
    listed = early.read_probes()
    with_venv = {p["id"] for p in listed if early.VENV in p["argv"]}
    assert with_venv == {"venv", "torch"}
    assert "nvidia-smi-q" in {p["id"] for p in listed}


def test_venv_probes_start_with_the_spec_venv_and_are_taken_over(probes_file: Path, tmp_path: Path) -> None:
    from provision.detect.registry import all_probes

    venv = str(tmp_path / "venv with 'quotes'")
    probes_file.write_text(regenerate.early_probes_text(), encoding="utf-8")
    early.start_venv(venv)  # before start(): nothing to add to
    assert early._pending == []
    early.start()
    early.start_venv(venv)
    assert len(early._pending) == 2
    assert [p["argv"][-1] for p in early._pending[1].probes] == [venv, venv]
    asked = [p.to_json() for p in all_probes(venv)]
    results, _ = early.collect(asked)
    assert results["torch"]["output"].startswith(f"venv {venv}\n")
    # every probe asked for, but another OS family's (the collector never runs those here)
    assert list(results) == [p["id"] for p in collector.for_this_os(asked, collector.os_ids())]
    assert len(results) < len(asked)


def test_a_venv_holding_a_nul_or_a_placeholder_inside_an_argument_is_not_substituted(
    probes_file: Path,
) -> None:
    inside = {"id": "x", "argv": ["sh", "-c", f"echo {early.VENV}"], "timeout": 5.0}
    whole = {"id": "y", "argv": ["echo", early.VENV], "timeout": 5.0}
    probes_file.write_text(json.dumps([_probe("a", "true"), inside, whole]), encoding="utf-8")
    early.start()
    early.start_venv("/opt/v\x00x")
    assert len(early._pending) == 1
    early.start_venv("/opt/v")
    assert [p["id"] for p in early._pending[1].probes] == ["y"]
    assert early._pending[1].probes[0]["argv"] == ["echo", "/opt/v"]


def test_a_started_probe_is_taken_over_not_run_again(probes_file: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    started = _probe("a", f"echo a >> {log}; echo early")
    probes_file.write_text(json.dumps([started]), encoding="utf-8")
    early.start()
    later = _probe("b", f"echo b >> {log}; echo late")
    results, when = early.collect([started, later])
    assert list(results) == ["a", "b"]
    assert results["a"]["output"] == "early\n" and results["b"]["output"] == "late\n"
    assert sorted(_runs(log)) == ["a", "b"] and when is not None
    again, when_again = early.collect([started])  # taken once: a second detection runs afresh
    assert again["a"]["output"] == "early\n" and when_again is None
    assert sorted(_runs(log)) == ["a", "a", "b"]


def test_a_probe_asked_for_with_another_argv_or_timeout_runs_afresh(
    probes_file: Path, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    probes_file.write_text(json.dumps([_probe("a", f"echo old >> {log}; echo old")]), encoding="utf-8")
    early.start()
    asked = [_probe("a", f"echo new >> {log}; echo new", timeout=5.0)]
    results, _ = early.collect(asked)
    assert results["a"]["output"] == "new\n"
    assert "new" in _runs(log)


@pytest.mark.parametrize(
    "text",
    ["", "not json", "{}", '[{"id": 1}]', '[{"id": "a", "argv": "uname", "timeout": 1}]', "[" * 100000],
    ids=["empty", "not-json", "object", "bad-id", "argv-string", "deep"],
)
def test_a_missing_or_broken_list_starts_nothing(probes_file: Path, text: str) -> None:
    probes_file.write_text(text, encoding="utf-8")
    assert early.read_probes() == []
    early.start()
    assert early._pending == []
    results, when = early.collect([_probe("a", "echo fine")])
    assert results["a"]["output"] == "fine\n" and when is None


def test_probes_a_command_never_collected_are_killed_at_exit(
    probes_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collector, "_STOPPED", [False])  # stop() is final for the process
    pid_file = tmp_path / "pid"
    probes_file.write_text(json.dumps([_probe("slow", f"echo $$ > {pid_file}; exec sleep 60", 120)]), "utf-8")
    early.start()
    deadline = time.monotonic() + 60  # a wait for an event, generous under load
    while not (pid_file.exists() and pid_file.read_text(encoding="utf-8").strip()):
        assert time.monotonic() < deadline, "the early probe never started"
        time.sleep(0.01)
    pid = int(pid_file.read_text(encoding="utf-8"))
    run = early._pending[0]
    early.stop()
    assert early._pending == []  # a killed probe's output is never taken over
    assert run.wait()["slow"]["rc"] == -9  # killed, not left to time out
    assert not collector._RUNNING
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_live_detect_and_plan_start_the_probes_first_offline_ones_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from provision.cli import cli

    calls: list[str] = []
    monkeypatch.setattr(early, "start", lambda: calls.append("start"))
    monkeypatch.setattr(early, "start_venv", lambda venv: calls.append(venv))
    runner = CliRunner()
    spec = str(Path(__file__).resolve().parents[2] / "specs" / "h200-ubuntu2404.yaml")
    runner.invoke(cli, ["plan", spec, "--from-raw", str(RAW)])
    runner.invoke(cli, ["detect", "--from-raw", str(RAW), "--json"])
    assert calls == []
    runner.invoke(cli, ["detect", "--json"])
    runner.invoke(cli, ["plan", spec, "--json"])
    assert calls == ["start", "start", "/opt/torch/.venv"]


def test_the_venv_probes_start_from_the_spec_document_before_the_spec_models_load() -> None:
    # A fresh interpreter, as a command starts: the venv (and the order) as _start_probes sees them.
    spec = Path(__file__).resolve().parents[2] / "specs" / "h200-ubuntu2404.yaml"
    script = f"""
import json, sys
from pathlib import Path
from provision.cli import base as cli
from provision.detect import early
seen = []
early.start = lambda: seen.append(["start", "provision.spec.models" in sys.modules])
early.start_venv = lambda venv: seen.append([venv, "provision.spec.models" in sys.modules])
loaded = cli._start_probes(Path({str(spec)!r}))
print(json.dumps([seen, loaded.python.venv]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    seen, venv = json.loads(done.stdout)
    assert seen == [["start", False], [venv, False]]
    assert venv == "/opt/torch/.venv"


@pytest.mark.parametrize(
    "value",
    [
        "/opt/torch/.venv",
        "/opt//v/",
        "/srv/a/./b",
        "/opt",
        "/usr/v",
        "opt/v",
        "/opt/../etc/v",
        "/opt/v w",
        "/opt/v\x00",
        "",
        5,
        None,
        ["/opt/v"],
        {"a": 1},
    ],
)
def test_the_venv_read_before_validating_is_the_one_validation_keeps_or_none(value: object) -> None:
    from pydantic import TypeAdapter, ValidationError

    from provision.spec.document import declared_venv
    from provision.spec.models import VenvPath

    try:
        expected: str | None = TypeAdapter(VenvPath).validate_python(value, strict=True)
    except ValidationError:
        expected = None
    assert declared_venv({"python": {"venv": value}}) == expected
    assert declared_venv({"python": value}) is None
    assert declared_venv([value]) is None


def test_detection_is_stamped_when_the_early_probes_started(probes_file: Path) -> None:
    from provision.detect.registry import all_probes
    from provision.detect.runner import detect_local

    probes_file.write_text(json.dumps([p.to_json() for p in all_probes(None)]), encoding="utf-8")
    early.start()
    assert early._pending
    started = early._pending[0].started
    facts = detect_local()
    assert facts.collected_at == started


_FAILING_COMMAND = """
import json, sys, time
from pathlib import Path
from provision.detect import early
early.PROBES = Path(sys.argv[1])
from provision.cli import base as cli
def failing() -> None:
    early.start()
    while not Path(sys.argv[2]).exists():  # the hung probe runs
        time.sleep(0.01)
    raise SystemExit(3)  # a command refusing its input before it detects
cli.invoked_only = lambda app, args: failing  # the app main() would run
cli.main()
"""


def test_a_command_failing_before_it_detects_exits_at_once_not_after_its_probes(tmp_path: Path) -> None:
    """The console entry point kills the uncollected probes before the interpreter joins their
    threads (an atexit hook runs after that join: the exit waited for the probe's timeout)."""
    import subprocess
    import sys

    probes = tmp_path / "probes.json"
    running = tmp_path / "running"
    hung = _probe("hung", f"touch {running}; exec sleep 120", 240)
    probes.write_text(json.dumps([hung, _probe("ok", "true")]), "utf-8")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _FAILING_COMMAND, str(probes), str(running)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    # Bounded by the probe's own 120 s sleep, not by how loaded the machine is: waiting for the probe
    # would take all of it.
    assert time.monotonic() - started < 120, "the exit waited for a probe the command never collected"


def test_a_probe_starting_after_the_stop_is_killed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "_STOPPED", [False])
    collector.kill_running()
    started = time.monotonic()
    result = collector.run_probe(["sleep", "120"], 240)
    assert result["rc"] == -9 and time.monotonic() - started < 120  # killed, not left to sleep
