"""Ask the vLLM server what verify's serve checks read: ``/health``, ``/v1/models``, one completion.

The OpenAI-compatible endpoints (vLLM documentation, "OpenAI-Compatible Server",
https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html; OpenAI API reference,
``GET /v1/models`` and ``POST /v1/completions`` with ``usage.completion_tokens``) are read with the
standard library only, each under a deadline; every failure is recorded as text, never raised.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from pydantic import Field

from provision.models import Frozen

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


def base_url(host: str, port: int) -> str:
    """The URL verify uses: a wildcard listen address is asked on loopback."""
    target = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{target}]:{port}" if ":" in target else f"http://{target}:{port}"


def probe_server(
    url: str, model: str, *, timeout: float = 10.0, completion_timeout: float = 120.0
) -> ServeRun:
    """Run the three requests against ``url`` (a server on this machine) for served name ``model``."""
    health = _status(f"{url}/health", timeout)
    models = _models(f"{url}/v1/models", timeout)
    body = {"model": model, "prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
    t0 = time.monotonic()
    answer = _json(f"{url}/v1/completions", completion_timeout, body)
    seconds = time.monotonic() - t0
    if isinstance(answer, str):
        return ServeRun(url=url, health=health, models=models, completion_tokens=answer, seconds=seconds)
    tokens, text = _completion(answer)
    return ServeRun(
        url=url,
        health=health,
        models=models,
        completion_tokens=tokens,
        completion_text=text[:200],
        seconds=seconds,
    )


def _request(url: str, timeout: float, body: dict[str, Any] | None) -> tuple[int, bytes] | str:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read(MAX_BODY)
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code} from {url}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{url}: {reason}"


def _status(url: str, timeout: float) -> int | str:
    got = _request(url, timeout, None)
    return got if isinstance(got, str) else got[0]


def _json(url: str, timeout: float, body: dict[str, Any] | None = None) -> Any:
    got = _request(url, timeout, body)
    if isinstance(got, str):
        return got
    try:
        return json.loads(got[1])
    except (ValueError, RecursionError):
        return f"{url}: the answer is not JSON"


def _models(url: str, timeout: float) -> tuple[str, ...] | str:
    answer = _json(url, timeout)
    if isinstance(answer, str):
        return answer
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
