"""Ask the vLLM server what verify's serve checks read: ``/health``, ``/v1/models``, one completion.

The OpenAI-compatible endpoints (vLLM documentation, "OpenAI-Compatible Server",
https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html; OpenAI API reference,
``GET /v1/models`` and ``POST /v1/completions`` with ``usage.completion_tokens``) are read with the
standard library only (:mod:`provision.verify.hostprobe`, in process for a local verify, on each
host for remote verify), each under a deadline; every failure is recorded as text, never raised.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from provision.models import Frozen
from provision.spec.models import ServeSpec
from provision.verify import hostprobe

PROMPT = "List the first ten prime numbers, separated by commas:"
"""The fixed short prompt whose decoding speed verify reports (greedy, so runs are comparable)."""
MAX_TOKENS = 32
"""Tokens asked for; with ``ignore_eos`` the server decodes exactly this many (vLLM sampling params)."""
MAX_BODY = 1 << 20
"""Largest response body read."""


class ServeRun(Frozen):
    """What the server answered.

    Attributes:
        url: The base URL asked (``http://127.0.0.1:8000``).
        health: HTTP status of ``GET /health``, or the error text.
        models: Model ids ``GET /v1/models`` lists, or the error text.
        completion_tokens: ``usage.completion_tokens`` of the completion, or the error text.
        completion_text: The completion's text (cut to 200 characters).
        seconds: Wall time of the completion request, s.
    """

    url: str
    health: int | str
    models: tuple[str, ...] | str
    completion_tokens: int | str
    completion_text: str = Field("", max_length=200)
    seconds: float = 0.0


def serve_url(serve: ServeSpec) -> str:
    """Where a client on the server's own host asks it (a wildcard address: on loopback)."""
    return base_url(serve.host, serve.port)


def base_url(host: str, port: int) -> str:
    """The URL verify uses: a wildcard listen address is asked on loopback."""
    target = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{target}]:{port}" if ":" in target else f"http://{target}:{port}"


def serve_job(
    url: str, model: str, *, timeout: float = 10.0, completion_timeout: float = 120.0
) -> dict[str, Any]:
    """The :mod:`provision.verify.hostprobe` job asking the server at ``url`` for served name ``model``:
    ``/health``, ``/v1/models`` and one greedy completion of :data:`PROMPT`, in that order."""
    body = {"model": model, "prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
    requests = {
        "health": {"url": f"{url}/health", "timeout": timeout, "max_bytes": MAX_BODY},
        "models": {"url": f"{url}/v1/models", "timeout": timeout, "max_bytes": MAX_BODY},
        "completion": {
            "url": f"{url}/v1/completions",
            "timeout": completion_timeout,
            "max_bytes": MAX_BODY,
            "body": body,
        },
    }
    return {"units": None, "requests": requests}


def serve_from(url: str, answer: Any) -> ServeRun:
    """The :class:`ServeRun` in a :mod:`provision.verify.hostprobe` answer to :func:`serve_job` (pure;
    never raises: a missing or failed request is its reason as text)."""
    got = answer.get("responses") if isinstance(answer, dict) else None
    responses: dict[str, Any] = got if isinstance(got, dict) else {}
    completion = responses.get("completion")
    seconds = completion.get("seconds", 0.0) if isinstance(completion, dict) else 0.0
    health = _status(responses.get("health"), f"{url}/health")
    models = _models(responses.get("models"), f"{url}/v1/models")
    answered = _json(completion, f"{url}/v1/completions")
    run = {"url": url, "health": health, "models": models, "seconds": _seconds(seconds)}
    if isinstance(answered, _Failed):
        return ServeRun(**run, completion_tokens=answered.reason)
    tokens, text = _completion(answered)
    return ServeRun(**run, completion_tokens=tokens, completion_text=text[:200])


def probe_server(
    url: str, model: str, *, timeout: float = 10.0, completion_timeout: float = 120.0
) -> ServeRun:
    """Run the three requests against ``url`` (a server on this machine) for served name ``model``."""
    job = serve_job(url, model, timeout=timeout, completion_timeout=completion_timeout)
    return serve_from(url, hostprobe.run(job))


class _Failed:
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _answer(raw: Any, url: str) -> tuple[int, str] | _Failed:
    """(status, text) of one hostprobe response, or why no answer came."""
    if not isinstance(raw, dict):
        return _Failed(f"{url}: no answer in the probe's output")
    if "error" in raw:
        return _Failed(f"{raw.get('url', url)}: {raw['error']}")
    status = raw.get("status")
    if not isinstance(status, int) or isinstance(status, bool):
        return _Failed(f"{url}: no HTTP status in the probe's output")
    return status, str(raw.get("text", ""))


def _status(raw: Any, url: str) -> int | str:
    got = _answer(raw, url)
    return got.reason if isinstance(got, _Failed) else got[0]


def _json(raw: Any, url: str) -> Any:
    got = _answer(raw, url)
    if isinstance(got, _Failed):
        return got
    status, text = got
    if status >= 400:
        return _Failed(f"HTTP {status} from {url}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _Failed(f"{url}: the answer is not JSON")


def _models(raw: Any, url: str) -> tuple[str, ...] | str:
    answer = _json(raw, url)
    if isinstance(answer, _Failed):
        return answer.reason
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return f"{url}: no data list in the answer"
    return tuple(str(m["id"]) for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))


def _completion(answer: Any) -> tuple[int | str, str]:
    try:
        tokens = answer["usage"]["completion_tokens"]
        text = answer["choices"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return "the completion has no usage.completion_tokens or choices[0].text", ""
    if not isinstance(tokens, int) or isinstance(tokens, bool) or not isinstance(text, str):
        return "the completion's usage.completion_tokens is not a number", ""
    return tokens, text
