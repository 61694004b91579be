"""Remote verify asks vLLM's server and the monitoring from each host: the host probe program (run
alone with a bare interpreter against real loopback servers), its job, the play's tasks, and the
controller's parse of ansible-runner's events into the runs the pure checks read."""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture

from provision.ansible import PlayResult
from provision.catalog import load_catalog
from provision.detect.facts import Unknown
from provision.detect.runner import COLLECTOR_TASK
from provision.fleet.verify import job_for
from provision.spec.models import Spec
from provision.verify import hostprobe, observe
from provision.verify.limits import shipped_limits
from provision.verify.monitoring_probe import MonitoringRun
from provision.verify.remote import (
    HOST_PROBE_TASK,
    GpuOutcome,
    _write_project,
    gpu_outcomes,
    remote_observed,
    verify_play,
    verify_remote,
)
from provision.verify.runs import VerifyInputs
from provision.verify.serve_probe import PROMPT, ServeRun
from provision.verify.workflow import evaluate
from tests.unit.factories import ROOT, fresh_ubuntu, spec_from

EXPORTER_PAGE = (ROOT / "tests" / "fixtures" / "monitoring" / "dcgm-exporter-metrics.txt").read_bytes()
NODE_PAGE = (
    b"# HELP node_textfile_scrape_error 1 if there was an error.\n# TYPE node_textfile_scrape_error gauge\n"
)
MODEL = "llama-8b"
SERVICE_CHECKS = (
    "serve-health",
    "serve-models",
    "serve-completion",
    "serve-tokens-per-second",
    "monitoring-services",
    "dcgm-exporter-metrics",
    "node-exporter-metrics",
    "prometheus-targets",
)


class Host(http.server.BaseHTTPRequestHandler):
    """One service of a monitored, serving host: the exporter pages, Prometheus's targets, vLLM."""

    server: Any

    def log_message(self, *args: object) -> None:
        return

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        pages = {
            "/metrics": self.server.page,
            "/health": b"",
            "/v1/models": json.dumps({"data": [{"id": MODEL}]}).encode(),
            "/api/v1/targets": json.dumps({"data": {"activeTargets": self.server.targets}}).encode(),
        }
        self._send(200 if self.path in pages else 404, pages.get(self.path, b"not found"))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.asked.append(body)
        usage = {"completion_tokens": body["max_tokens"]}
        self._send(200, json.dumps({"choices": [{"text": " 2, 3, 5"}], "usage": usage}).encode())


@pytest.fixture
def host() -> Iterator[dict[str, Any]]:
    """Four loopback servers (dcgm-exporter, node exporter, Prometheus, vLLM) and a spec naming them."""
    servers = {}
    for name in ("exporter", "node", "prometheus", "vllm"):
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Host)
        httpd.page = EXPORTER_PAGE if name == "exporter" else NODE_PAGE  # type: ignore[attr-defined]
        httpd.asked, httpd.targets = [], []  # type: ignore[attr-defined]
        threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        servers[name] = httpd
    port = {name: s.server_address[1] for name, s in servers.items()}
    targets = [
        {"labels": {"job": job, "instance": f"127.0.0.1:{port[name]}"}, "health": "up", "lastError": ""}
        for job, name in (("dcgm", "exporter"), ("node", "node"), ("prometheus", "prometheus"))
    ]
    servers["prometheus"].targets = targets  # type: ignore[attr-defined]
    held = serving_and_monitored(port)
    yield {"spec": held, "servers": servers}
    for httpd in servers.values():
        httpd.shutdown()
        httpd.server_close()


def serving_and_monitored(port: dict[str, int]) -> Spec:
    """The H200 serving spec with a monitoring section, every service on 127.0.0.1 at ``port``."""
    monitoring = {
        "dcgm": "4.5.3",
        "listen": "127.0.0.1",
        "exporter_port": port["exporter"],
        "node_exporter_port": port["node"],
        "prometheus": True,
        "prometheus_port": port["prometheus"],
    }
    return spec_from(
        ROOT / "specs" / "h200-serve-llama8b.yaml",
        serve__host="127.0.0.1",
        serve__port=port["vllm"],
        serve__served_model_name=MODEL,
        monitoring=monitoring,
    )


REASON = Unknown(unknown="host probe: skipped")
HELD = serving_and_monitored({"exporter": 9400, "node": 9100, "prometheus": 9090, "vllm": 8000})


def _checks(spec: Spec, observed: dict[str, Any]) -> dict[str, tuple[str, str]]:
    inputs = VerifyInputs(facts=fresh_ubuntu(), gpu_run=Unknown(unknown="none"), observed=observed)
    results = evaluate(spec, inputs, load_catalog(), shipped_limits())
    return {r.name: (r.status, r.detail) for r in results if r.id in SERVICE_CHECKS}


def _run_alone(job: dict[str, Any], workdir: Path) -> subprocess.CompletedProcess[str]:
    """The program as the play runs it: copied alone, an argv, the job in a file; -I -S: no site-packages."""
    shutil.copy(hostprobe.__file__, workdir / "hostprobe.py")
    (workdir / "hostprobe.json").write_text(json.dumps(job))
    argv = [sys.executable, "-I", "-S", str(workdir / "hostprobe.py"), str(workdir / "hostprobe.json")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=workdir, check=False)


def test_the_program_alone_answers_as_the_local_path_and_every_check_passes(
    host: dict[str, Any], tmp_path: Path
) -> None:
    held: Spec = host["spec"]
    job = observe.host_job(held)
    assert job is not None
    done = _run_alone(job, tmp_path)
    assert done.returncode == 0, done.stderr
    observed = observe.observed_from(held, json.loads(done.stdout))
    serve, monitoring = observed["serve"], observed["monitoring"]
    local = observe.collect(held)
    local_serve, local_monitoring = local["serve"], local["monitoring"]
    assert monitoring == local_monitoring and isinstance(monitoring, MonitoringRun)
    assert isinstance(serve, ServeRun) and isinstance(local_serve, ServeRun)
    assert serve.model_copy(update={"seconds": 0}) == local_serve.model_copy(update={"seconds": 0})
    assert host["servers"]["vllm"].asked[0]["prompt"] == PROMPT
    found = _checks(held, observed)
    # The units' states depend on this machine's systemd (none in CI: a skip with systemctl's words).
    units = [name for name in found if name.startswith("monitoring-services")]
    assert units and all(found.pop(name) for name in units)
    assert {status for status, _ in found.values()} == {"pass"}, found
    assert {name.split("[")[0] for name in found} == set(SERVICE_CHECKS) - {"monitoring-services"}


def test_saved_inputs_replay_the_runs_and_the_reasons(host: dict[str, Any]) -> None:
    held: Spec = host["spec"]
    observed = observe.collect(held)
    for inputs in (
        VerifyInputs(facts=fresh_ubuntu(), gpu_run=Unknown(unknown="x"), observed=observed),
        VerifyInputs(
            facts=fresh_ubuntu(),
            gpu_run=Unknown(unknown="x"),
            observed={"serve": REASON, "monitoring": REASON},
        ),
    ):
        assert VerifyInputs.model_validate_json(inputs.model_dump_json()) == inputs


def test_inputs_saved_with_top_level_serve_and_monitoring_still_load(host: dict[str, Any]) -> None:
    observed = observe.collect(host["spec"])
    inputs = VerifyInputs(facts=fresh_ubuntu(), gpu_run=Unknown(unknown="x"), observed=observed)
    saved = inputs.model_dump(mode="json")
    older = {**{k: v for k, v in saved.items() if k != "observed"}, **saved["observed"]}
    assert "observed" not in older and isinstance(older["serve"], dict)
    assert VerifyInputs.model_validate(older) == inputs
    assert VerifyInputs.model_validate({**older, "serve": None, "monitoring": None}).observed == {}


def test_a_proxy_in_the_environment_is_not_used(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("no_proxy", "")
    url = f"http://127.0.0.1:{host['servers']['exporter'].server_address[1]}/metrics"
    assert hostprobe.fetch(url, 5, 1 << 20)["status"] == 200


def test_the_program_caps_bodies_and_says_why_nothing_came(host: dict[str, Any]) -> None:
    url = f"http://127.0.0.1:{host['servers']['exporter'].server_address[1]}"
    big = hostprobe.fetch(f"{url}/metrics", 5, 100)
    assert big["error"] == "more than 100 bytes" and "text" not in big
    assert hostprobe.fetch(f"{url}/nothing", 5, 1000)["status"] == 404
    closed = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Host)
    port = closed.server_address[1]
    closed.server_close()
    refused = hostprobe.fetch(f"http://127.0.0.1:{port}/metrics", 2, 1000)
    assert "refused" in refused["error"].lower() and refused["seconds"] >= 0


def test_an_unreadable_job_is_one_json_error_and_exit_2(tmp_path: Path) -> None:
    done = _run_alone({"parts": {"a": {}}}, tmp_path)
    answer = {"parts": {"a": {"units": None, "responses": {}, "commands": []}}}
    assert done.returncode == 0 and json.loads(done.stdout) == answer
    (tmp_path / "hostprobe.json").write_text("{}")
    argv = [sys.executable, "-I", "-S", str(tmp_path / "hostprobe.py"), str(tmp_path / "hostprobe.json")]
    empty = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert empty.returncode == 2 and json.loads(empty.stdout)["error"] == "hostprobe: KeyError: 'parts'"
    (tmp_path / "hostprobe.json").write_text("{not json")
    argv = [sys.executable, "-I", "-S", str(tmp_path / "hostprobe.py"), str(tmp_path / "hostprobe.json")]
    bad = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"].startswith("hostprobe: JSONDecodeError")


def test_the_job_asks_only_the_sections_the_spec_has() -> None:
    held = HELD
    job = observe.host_job(held)
    assert job is not None
    parts = job["parts"]
    assert list(parts) == ["serve", "monitoring"]  # registry order
    assert sorted(parts["monitoring"]["requests"]) == ["exporter", "node_exporter", "targets"]
    assert sorted(parts["serve"]["requests"]) == ["completion", "health", "models"]
    units = ["nvidia-dcgm", "nvidia-dcgm-exporter", "prometheus-node-exporter", "prometheus"]
    assert parts["monitoring"]["units"] == units and parts["serve"]["units"] is None
    assert observe.deadline_s(job) == int(3 * 5.0 + 2 * 10.0 + 120.0 + 5.0) + 30
    only_serve = held.model_copy(update={"monitoring": None})
    only = observe.host_job(only_serve)
    assert only is not None and list(only["parts"]) == ["serve"]
    assert observe.host_job(only_serve.model_copy(update={"serve": None})) is None
    assert list(observe.observed_from(only_serve, {"parts": {}})) == ["serve"]


REASONS = [
    (None, "host probe: Ansible reported nothing for it"),
    (GpuOutcome(False), "host probe: skipped"),
    (
        GpuOutcome(True, -1, message="The command action failed to execute in the expected time frame (180)"),
        "host probe: The command action failed to execute in the expected time frame (180)",
    ),
    (
        GpuOutcome(True, 1, "", "Traceback (most recent call last):\nSyntaxError: invalid syntax\n"),
        "host probe exited 1: SyntaxError: invalid syntax",
    ),
    (
        GpuOutcome(True, 2, '{"error": "hostprobe: FileNotFoundError: hostprobe.json"}'),
        "hostprobe: FileNotFoundError: hostprobe.json",
    ),
    (GpuOutcome(True, 0, "[]"), "the host probe's output is not a JSON object"),
]


@pytest.mark.parametrize(("asked", "reason"), REASONS)
def test_a_probe_without_an_answer_fails_every_service_check_with_the_reason(
    asked: GpuOutcome | None, reason: str
) -> None:
    held = HELD
    observed = remote_observed(job_for(held), asked)
    assert observed == {"serve": Unknown(unknown=reason), "monitoring": Unknown(unknown=reason)}
    found = _checks(held, observed)
    assert len(found) == 8 and set(found.values()) == {("fail", reason)}


def test_a_spec_without_the_sections_asks_nothing() -> None:
    plain = job_for(spec_from(ROOT / "specs" / "dual-a100x.yaml"))
    assert plain.host_job() is None
    assert remote_observed(plain, None) == {}


def test_the_play_runs_the_probe_as_an_argv_with_a_deadline_only_where_asked() -> None:
    tasks = verify_play()[0]["tasks"][1]["block"]
    names = [t["name"] for t in tasks]
    probe = tasks[names.index(HOST_PROBE_TASK)]
    assert (
        names.index(COLLECTOR_TASK)
        < names.index(HOST_PROBE_TASK)
        < names.index("Run the GPU load program in the spec's venv.")
    )  # before the GPU program, whose deadline may end the host's block
    argv = probe["ansible.builtin.command"]["argv"]
    assert argv[1:] == [
        "-I",
        "{{ provision_verify_dir.path }}/hostprobe.py",
        "{{ provision_verify_dir.path }}/hostprobe.json",
    ]
    assert "discovered_interpreter_python" in argv[0]  # the host's python3, never the venv's
    assert probe["timeout"] == "{{ provision_verify_hosts[inventory_hostname].services_timeout }}"
    asks = "provision_verify_hosts[inventory_hostname].services | length > 0"
    copies = [
        t
        for t in tasks
        if t["name"] in ("Copy hostprobe.py to the host.", "Copy hostprobe.json to the host.")
    ]
    assert len(copies) == 2 and all(t["when"] == asks for t in [*copies, probe])
    assert not any("shell" in key for task in tasks for key in task)


def test_the_project_holds_each_distinct_job_once_and_no_spec_value_in_the_play(tmp_path: Path) -> None:
    asked, plain = job_for(HELD), job_for(spec_from(ROOT / "specs" / "dual-a100x.yaml"))
    extravars = _write_project(tmp_path, {"a": asked, "b": asked, "c": plain})
    per_host = extravars["provision_verify_hosts"]
    assert [per_host[h]["services"] for h in "abc"] == ["hostprobe-0.json", "hostprobe-0.json", ""]
    assert per_host["a"]["services_timeout"] == observe.deadline_s(asked.host_job() or {"parts": {}}) > 0
    assert json.loads((tmp_path / "hostprobe-0.json").read_text()) == asked.host_job()
    assert (tmp_path / "hostprobe.py").read_text() == Path(hostprobe.__file__).read_text()
    assert sorted(p.name for p in tmp_path.glob("hostprobe-*.json")) == ["hostprobe-0.json"]
    assert MODEL not in (tmp_path / "verify.yml").read_text() and MODEL not in json.dumps(extravars)


def test_runner_events_become_the_runs_the_checks_read(
    host: dict[str, Any], tmp_path: Path, mocker: MockerFixture
) -> None:
    held: Spec = host["spec"]
    job = observe.host_job(held)
    assert job is not None
    answer = _run_alone(job, tmp_path).stdout

    def event(kind: str, name: str, task: str, **res: Any) -> dict[str, Any]:
        return {"event": kind, "event_data": {"host": name, "task": task, "res": res}}

    events = (
        event("runner_on_ok", "gpu1", COLLECTOR_TASK, stdout="{}"),
        event("runner_on_ok", "gpu1", HOST_PROBE_TASK, rc=0, stdout=answer, stderr=""),
        event("runner_on_ok", "gpu2", COLLECTOR_TASK, stdout="{}"),
        event("runner_on_failed", "gpu2", HOST_PROBE_TASK, msg="The command action failed to execute"),
    )
    play = mocker.patch(
        "provision.verify.remote.ansible.run_play", return_value=PlayResult("successful", 0, events)
    )
    got = verify_remote("hosts.ini", {"gpu1": job_for(held), "gpu2": job_for(held)})
    assert play.call_args.kwargs["limit"] == "gpu1,gpu2"
    one, two = got["gpu1"], got["gpu2"]
    assert isinstance(one, VerifyInputs) and isinstance(two, VerifyInputs)
    serve, monitoring = one.observed["serve"], one.observed["monitoring"]
    assert isinstance(serve, ServeRun) and serve.completion_tokens == 32
    assert isinstance(monitoring, MonitoringRun) and monitoring.exporter.error is None
    failed = Unknown(unknown="host probe: The command action failed to execute")
    assert two.observed == {"serve": failed, "monitoring": failed}
    assert gpu_outcomes(events, HOST_PROBE_TASK)["gpu1"].stdout == answer
