"""verify's serve checks against a small stand-in of vLLM's OpenAI-compatible server, started on
loopback by the test (a thread of http.server answering /health, /v1/models and /v1/completions the
way vLLM's server does: the usage block with completion_tokens, choices[0].text)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from provision.catalog import load_catalog
from provision.detect.facts import Unknown
from provision.spec.loader import load_spec
from provision.verify.checks_serve import OBSERVER
from provision.verify.limits import shipped_limits
from provision.verify.runs import VerifyInputs
from provision.verify.serve_probe import PROMPT, base_url, probe_server
from provision.verify.workflow import evaluate
from tests.unit.factories import fresh_ubuntu

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "specs" / "h200-serve-llama8b.yaml")


class StandIn(BaseHTTPRequestHandler):
    """vLLM's endpoints with canned answers; ``server.mode`` breaks one of them on purpose."""

    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(503 if self.server.mode == "unhealthy" else 200, {})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.server.model, "object": "model"}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        if self.path != "/v1/completions" or body.get("model") != self.server.model:
            self._send(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
            return
        time.sleep(0.05)
        tokens = body["max_tokens"]
        self._send(
            200,
            {
                "object": "text_completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "text": " 2, 3, 5, 7, 11, 13, 17, 19, 23, 29", "finish_reason": "length"}
                ],
                "usage": {"prompt_tokens": 12, "completion_tokens": tokens, "total_tokens": 12 + tokens},
            },
        )


@pytest.fixture
def server() -> Iterator[Any]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    httpd.mode, httpd.model, httpd.requests = "ok", "llama-8b", []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _report(run: Any) -> dict[str, Any]:
    inputs = VerifyInputs(facts=fresh_ubuntu(), gpu_run=fresh_ubuntu().gpus, observed={"serve": run})  # type: ignore[arg-type]
    results = evaluate(SPEC, inputs, load_catalog(), shipped_limits(), OBSERVER.checks)
    return {r.id: r for r in results}


def test_a_healthy_server_passes_and_its_speed_is_reported(server: Any) -> None:
    run = probe_server(f"http://127.0.0.1:{server.server_address[1]}", "llama-8b")
    assert server.requests[0]["prompt"] == PROMPT and server.requests[0]["temperature"] == 0
    found = _report(run)
    assert [found[i].status for i in ("serve-health", "serve-models", "serve-completion")] == ["pass"] * 3
    speed = found["serve-tokens-per-second"]
    assert speed.status == "pass" and speed.measured is not None and speed.measured.unit == "tokens/s"
    assert 0 < float(speed.measured.value or 0) < 32 / 0.05  # 32 tokens, at least 50 ms


def test_an_unhealthy_server_or_another_model_fails(server: Any) -> None:
    server.mode = "unhealthy"
    server.model = "another"
    found = _report(probe_server(f"http://127.0.0.1:{server.server_address[1]}", "llama-8b"))
    assert found["serve-health"].status == "fail" and "503" in str(found["serve-health"].measured)
    assert found["serve-models"].status == "fail" and found["serve-models"].hint
    assert found["serve-completion"].status == "fail" and "HTTP 404" in found["serve-completion"].detail
    assert found["serve-tokens-per-second"].status == "skip"


def test_no_server_listening_fails_with_the_reason() -> None:
    probe = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    port = probe.server_address[1]
    probe.server_close()  # the port is now closed
    found = _report(probe_server(f"http://127.0.0.1:{port}", "llama-8b", timeout=2, completion_timeout=2))
    assert found["serve-health"].status == "fail"
    assert "refused" in found["serve-completion"].detail.lower()


def test_not_probed_is_a_skip_with_the_reason() -> None:
    found = _report(None)
    assert {r.status for r in found.values()} == {"skip"} and len(found) == 4


def test_a_host_probe_without_an_answer_fails_every_serve_check_with_the_reason() -> None:
    found = _report(Unknown(unknown="host probe: Ansible reported nothing for it"))
    assert {(r.status, r.detail) for r in found.values()} == {
        ("fail", "host probe: Ansible reported nothing for it")
    }


def test_wildcard_listen_address_is_asked_on_loopback() -> None:
    assert base_url("0.0.0.0", 8000) == "http://127.0.0.1:8000"
    assert base_url("::", 8000) == "http://[::1]:8000"
    assert base_url("10.0.0.5", 9000) == "http://10.0.0.5:9000"
