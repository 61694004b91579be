"""Fleet verify and checklist pieces without hosts: the play as data, events to inputs, the report."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from provision.catalog import load_catalog
from provision.detect.facts import Unknown
from provision.detect.raw import read_raw
from provision.detect.runner import COLLECTOR_TASK
from provision.fleet.checklist import IndexRow, host_facts, index_html, index_markdown, observation_counts
from provision.fleet.verify import FleetVerify, HostVerify, check_host, skip_remote_allreduce
from provision.fleet.verify_report import fleet_junit_xml, fleet_verify_json, render_fleet_verify
from provision.spec.loader import load_spec
from provision.verify.command import read_inputs
from provision.verify.launch import CHILD_ENV
from provision.verify.limits import shipped_limits
from provision.verify.models import CheckResult, Report
from provision.verify.remote import (
    GPU_TASK,
    REMOTE_ALLREDUCE,
    GpuOutcome,
    HostJob,
    gpu_outcomes,
    inputs_from,
    verify_play,
)
from provision.verify.runs import GpuRun
from tests.unit.factories import by_host

ROOT = Path(__file__).parents[2]
SPEC = load_spec(ROOT / "specs" / "h200-ubuntu2404.yaml")
RAW = ROOT / "tests" / "fixtures" / "detect" / "h200-ubuntu2404"
SAVED = read_inputs(ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json")
JOB = HostJob(venv="/opt/venv", load_seconds=5.0, gpu_count=1)
UNREACHABLE = "host unreachable: Failed to connect to the host via ssh"


def _saved_run() -> GpuRun:
    assert isinstance(SAVED.gpu_run, GpuRun)
    return SAVED.gpu_run


def _event(kind: str, host: str, task: str, **res: Any) -> dict[str, Any]:
    return {"event": kind, "event_data": {"host": host, "task": task, "res": res}}


def test_the_gpu_program_runs_as_an_argv_with_launch_environment_and_a_deadline() -> None:
    tasks = verify_play()[0]["tasks"][1]["block"]
    gpu = next(t for t in tasks if t["name"] == GPU_TASK)
    argv = gpu["ansible.builtin.command"]["argv"]
    assert argv[1:4] == ["-I", "{{ provision_verify_dir.path }}/gpuload.py", "gpus"]
    assert gpu["environment"] == CHILD_ENV
    assert gpu["async"] == "{{ provision_verify_hosts[inventory_hostname].timeout }}" and gpu["poll"] > 0
    assert not any("shell" in key for task in tasks for key in task)
    assert JOB.timeout_s == 58  # launch.gpu_timeout(1, 5.0) = 30 + 1 x (7.5 + 20), rounded up


def test_gpu_events_give_each_host_its_outcome() -> None:
    events = [
        _event("runner_on_ok", "a", COLLECTOR_TASK, stdout="{}"),
        _event("runner_on_ok", "a", GPU_TASK, rc=0, stdout='{"mode": "gpus"}', stderr=""),
        _event("runner_on_skipped", "b", GPU_TASK),
        _event(
            "runner_on_failed", "c", GPU_TASK, msg="async task did not complete within the requested time"
        ),
    ]
    out = gpu_outcomes(events)
    assert out["a"] == GpuOutcome(True, 0, '{"mode": "gpus"}', "")
    assert out["b"] == GpuOutcome(False)
    assert out["c"].ran and "did not complete within" in out["c"].message


def test_inputs_parse_the_collector_and_gpu_outputs_as_a_local_run_does() -> None:
    doc = _saved_run().model_dump_json()
    inputs = inputs_from("h200", read_raw(RAW), GpuOutcome(True, 0, "torch warning\n" + doc), JOB)
    assert inputs.facts.host == "h200"
    assert inputs.gpu_run == _saved_run()
    assert inputs.allreduce is None  # one GPU
    assert isinstance(inputs.fm_version, Unknown)  # the capture has no fm-version probe


def test_a_timed_out_or_missing_gpu_program_is_the_reason() -> None:
    outputs = read_raw(RAW)
    late = inputs_from(
        "h", outputs, GpuOutcome(True, -1, message="async task did not complete within 58 s"), JOB
    )
    assert isinstance(late.gpu_run, Unknown) and "did not finish within 58 s" in late.gpu_run.unknown
    skipped = inputs_from("h", outputs, GpuOutcome(False), JOB)
    assert skipped.gpu_run == Unknown(unknown="/opt/venv/bin/python: no such interpreter (create the venv)")
    no_venv = inputs_from("h", outputs, None, HostJob(None, 5.0, 1))
    assert isinstance(no_venv.gpu_run, Unknown) and "no python.venv" in no_venv.gpu_run.unknown


def test_two_gpus_mark_the_all_reduce_as_not_run_remotely_and_its_check_skips() -> None:
    two = _saved_run().model_copy(update={"device_count": 2})
    inputs = inputs_from("h", read_raw(RAW), GpuOutcome(True, 0, two.model_dump_json()), JOB)
    assert inputs.allreduce == Unknown(unknown=REMOTE_ALLREDUCE)
    failed = CheckResult(id="nccl-allreduce", title="t", status="fail", detail=REMOTE_ALLREDUCE, hint="h")
    other = CheckResult(id="nccl-allreduce", title="t", status="fail", detail="rank 1 hung")
    assert [r.status for r in skip_remote_allreduce((failed, other))] == ["skip", "fail"]


def test_an_unreachable_host_fails_every_check_with_the_reason() -> None:
    results = check_host("gpu9", SPEC, UNREACHABLE, load_catalog(), shipped_limits())
    assert len(results) > 10
    assert {(r.status, r.detail, r.measured) for r in results} == {("fail", UNREACHABLE, None)}


@pytest.fixture()
def fleet() -> FleetVerify:
    lim, cat = shipped_limits(), load_catalog()

    def host(name: str, got: Any) -> HostVerify:
        results = check_host(name, SPEC, got, cat, lim)
        report = Report(host=name, spec="h200.yaml", results=results)
        return HostVerify(name, Path("h200.yaml"), report, got if isinstance(got, str) else None)

    return FleetVerify({"h200": host("h200", SAVED), "gone": host("gone", UNREACHABLE)})


def test_fleet_json_has_every_host_and_the_failed_ones(fleet: FleetVerify) -> None:
    doc = json.loads(json.dumps(fleet_verify_json(fleet)))
    assert doc["summary"]["failed"] == ["gone"]
    assert doc["summary"]["hosts"]["h200"] == {"pass": 29, "warn": 0, "fail": 0, "skip": 13}
    assert doc["format_version"] == 2 and [h["host"] for h in doc["hosts"]] == ["h200", "gone"]
    hosts = by_host(doc)
    assert hosts["gone"]["unreachable"] == UNREACHABLE and hosts["gone"]["failed"]
    assert hosts["h200"]["report"]["host"] == "h200"
    assert fleet.exit_code() == 1


def test_fleet_junit_has_one_suite_per_host(fleet: FleetVerify) -> None:
    suites = ET.fromstring(fleet_junit_xml(fleet)).findall("testsuite")
    assert [(s.get("name"), s.get("hostname")) for s in suites] == [
        ("provision verify h200", "h200"),
        ("provision verify gone", "gone"),
    ]
    assert suites[0].get("failures") == "0"
    assert int(suites[1].get("failures", "0")) == len(suites[1].findall("testcase"))
    from tests.unit.junit_strict import problems

    assert problems(fleet_junit_xml(fleet)) == []


def test_fleet_text_has_host_tables_then_the_summary(fleet: FleetVerify) -> None:
    console = Console(width=200, record=True, color_system=None)
    render_fleet_verify(fleet, console)
    text = console.export_text()
    assert text.index("on h200") < text.index("on gone") < text.index("Fleet verify: 2 host(s)")
    assert f"gone: {UNREACHABLE}" in text


def test_checklist_counts_and_index_rows() -> None:
    facts, reason = host_facts("gone", None)
    assert reason == "host unreachable: Ansible reported nothing for it"
    counts = observation_counts(SPEC, facts)
    assert counts["not-observable"] == sum(counts.values()) > 0
    row = IndexRow("gone", Path("h200.yaml"), "gone.md", counts, reason)
    assert f"| gone | h200.yaml | 0 | 0 | 0 | {counts['not-observable']} | unreachable: " in index_markdown(
        [row], Path("hosts.ini")
    )
    assert '<a href="gone.md">gone.md</a>' in index_html([row], Path("hosts.ini"), "a4")
