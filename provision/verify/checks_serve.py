"""Serve checks: vLLM's server answers ``/health`` and ``/v1/models`` with the served name, one short
completion succeeds, and the decoding speed of a fixed prompt is reported (pure, over the serve
observer's run in ``inputs.observed``)."""

from __future__ import annotations

from typing import Any

from provision.detect.facts import Unknown
from provision.spec.models import Spec
from provision.verify.context import Context, result
from provision.verify.models import CheckResult, Measured, Threshold
from provision.verify.observe import Observer
from provision.verify.serve_probe import MAX_TOKENS, ServeRun, serve_from, serve_job, serve_url

_HINT = (
    "journalctl -u provision-vllm shows why the server is not answering (it takes minutes to load a model)."
)


def serve_checks(ctx: Context) -> list[CheckResult]:
    """The four serve checks; none when the spec serves nothing (reports of other specs are unchanged)."""
    serve = ctx.spec.serve
    if serve is None:
        return []
    run = OBSERVER.run(ctx.inputs.observed)
    if run is None:
        why = "the server was not probed (inputs saved without it)"
        return [result(i, t, "skip", detail=why) for i, t in _TITLES]
    if isinstance(run, Unknown):  # the host probe did not answer: nothing shows the server works
        return [result(i, t, "fail", detail=run.unknown, hint=_HINT) for i, t in _TITLES]
    name = serve.served_model_name or serve.model
    return [_health(run), _models(run, name), _completion(run), _speed(run)]


_TITLES = (
    ("serve-health", "vLLM server health"),
    ("serve-models", "vLLM serves the spec's model"),
    ("serve-completion", "one short completion"),
    ("serve-tokens-per-second", "decoding speed of a fixed prompt"),
)


def _health(run: ServeRun) -> CheckResult:
    ok = run.health == 200
    return result(
        "serve-health",
        _TITLES[0][1],
        "pass" if ok else "fail",
        measured=Measured(value=str(run.health)),
        threshold=Threshold(op="==", value="200", source="vLLM GET /health"),
        detail=f"GET {run.url}/health",
        hint=_HINT,
    )


def _models(run: ServeRun, name: str) -> CheckResult:
    if isinstance(run.models, str):
        return result("serve-models", _TITLES[1][1], "fail", detail=run.models, hint=_HINT)
    ok = name in run.models
    return result(
        "serve-models",
        _TITLES[1][1],
        "pass" if ok else "fail",
        measured=Measured(value=", ".join(run.models) or "none"),
        threshold=Threshold(op="in", value=name, source="spec serve.served_model_name or serve.model"),
        detail=f"GET {run.url}/v1/models",
        hint="The server runs another model: run provision apply to rewrite its unit.",
    )


def _completion(run: ServeRun) -> CheckResult:
    if isinstance(run.completion_tokens, str):
        return result("serve-completion", _TITLES[2][1], "fail", detail=run.completion_tokens, hint=_HINT)
    ok = run.completion_tokens > 0
    return result(
        "serve-completion",
        _TITLES[2][1],
        "pass" if ok else "fail",
        measured=Measured(value=float(run.completion_tokens), unit="tokens"),
        detail=f"POST {run.url}/v1/completions: {run.completion_text[:60]!r}",
        hint="The server answered without tokens: see its log.",
    )


def _speed(run: ServeRun) -> CheckResult:
    if isinstance(run.completion_tokens, str) or run.seconds <= 0 or run.completion_tokens <= 0:
        return result("serve-tokens-per-second", _TITLES[3][1], "skip", detail="no completion to time")
    rate = run.completion_tokens / run.seconds
    return result(
        "serve-tokens-per-second",
        _TITLES[3][1],
        "pass",
        measured=Measured(value=rate, unit="tokens/s"),
        detail=f"{run.completion_tokens} tokens (max {MAX_TOKENS}, greedy) in {run.seconds:.2f} s, "
        "one request, prefill included; reported, not held to a threshold",
    )


def _job(spec: Spec) -> dict[str, Any] | None:
    serve = spec.serve
    return serve_job(serve_url(serve), serve.served_model_name or serve.model) if serve else None


def _parse(spec: Spec, answer: Any) -> ServeRun:
    assert spec.serve is not None  # parsed only for a spec whose job asked it
    return serve_from(serve_url(spec.serve), answer)


OBSERVER = Observer(key="serve", model=ServeRun, job=_job, parse=_parse, checks=(serve_checks,))
"""The serve component's reading (its server's answers, asked on the host) and its checks."""
