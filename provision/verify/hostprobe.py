"""Ask the host it runs on: ``systemctl is-active``, bounded HTTP requests and bounded commands.

Self-contained, standard library only: remote verify copies this file to each host and runs it
there with the host's own ``python3`` (``python3 -I hostprobe.py JOB.json``), because the exporters
and vLLM's server often listen on the host's loopback only; a local verify calls :func:`run` in
process. Either way the controller parses the raw answers with the same functions
(:func:`provision.verify.monitoring_probe.monitoring_from`,
:func:`provision.verify.serve_probe.serve_from`), so the checks read the same models.

The job (a JSON file, never a command line) has one part per component verify reads there
(:mod:`provision.verify.observe`): ``{"parts": {NAME: PART}}``, each part
    ``{"units": ["nvidia-dcgm", ...] | null,
    "requests": {KEY: {"url": str, "timeout": seconds, "max_bytes": int, "body": object | null}},
    "commands": [{"argv": [str, ...], "timeout": seconds, "after": int | null}, ...]}``
    A request with a ``body`` is a POST of that body as JSON, otherwise a GET. Commands run in
    their order, as argv lists (never through a shell), after the part's requests; a command with
    ``after`` runs only when the command at that earlier index exited 0 (a wait for a container
    that never started is not waited out).

The answer (one JSON document on stdout, exit status 0; a job that cannot be read gives
``{"error": str}`` and exit status 2) is ``{"parts": {NAME: ANSWER}}``, each answer
    ``{"units": {"rc": int, "stdout": str, "stderr": str} | {"missing": true} | {"error": str} | null,
    "responses": {KEY: {"url": str, "seconds": float, "status": int, "text": str}
    | {"url": str, "seconds": float, "error": str}},
    "commands": [{"rc": int, "stdout": str, "stderr": str, "seconds": float} | {"missing": true}
    | {"error": str} | {"skipped": str}, ...]}``
    ``status`` and ``text`` are any HTTP answer, 4xx and 5xx included (``text`` decoded as UTF-8
    with replacement); ``error`` says why no answer came (connection refused, timeout, a body over
    ``max_bytes``). ``seconds`` is the request's wall time on the host. A command's output is cut
    to :data:`MAX_OUTPUT` characters; ``missing`` means its program is not on the host.

Sources: systemctl(1) ``is-active`` prints one state a line, in the order the units are named;
Python's ``urllib.request.urlopen`` raises ``HTTPError`` (with the answer) for 4xx/5xx and
``URLError`` (with ``reason``) when no answer came.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

MAX_OUTPUT = 65536
"""Characters of a command's stdout and stderr kept."""
SYSTEMCTL_TIMEOUT_S = 5.0
"""Seconds ``systemctl is-active`` has to answer."""
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Never through a proxy from ``http_proxy``: the services asked are the host's own."""


def is_active(units: list[str]) -> dict[str, Any]:
    """``systemctl is-active UNIT...``'s raw output, ``{"missing": True}`` without systemctl, or the error."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return {"missing": True}
    try:
        done = subprocess.run(
            [systemctl, "is-active", "--", *units],
            capture_output=True,
            text=True,
            timeout=SYSTEMCTL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": str(exc) or type(exc).__name__}
    return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def fetch(url: str, timeout: float, max_bytes: int, body: Any = None) -> dict[str, Any]:
    """One HTTP request (a POST of ``body`` as JSON when given), never raising; shape in the module doc."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    try:
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                status, raw = int(response.status), response.read(max_bytes + 1)
        except urllib.error.HTTPError as exc:
            status, raw = int(exc.code), exc.read(max_bytes + 1)
    except urllib.error.URLError as exc:
        return _failed(url, t0, str(exc.reason) or type(exc.reason).__name__)
    except (OSError, ValueError) as exc:
        return _failed(url, t0, str(exc) or type(exc).__name__)
    if len(raw) > max_bytes:
        return _failed(url, t0, f"more than {max_bytes} bytes")
    text = raw.decode("utf-8", errors="replace")
    return {"url": url, "seconds": time.monotonic() - t0, "status": status, "text": text}


def _failed(url: str, t0: float, reason: str) -> dict[str, Any]:
    return {"url": url, "seconds": time.monotonic() - t0, "error": reason}


def command(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run one argv under ``timeout`` seconds, never raising; shape in the module doc."""
    if not argv or shutil.which(argv[0]) is None:
        return {"missing": True}
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"{argv[0]}: no answer within {timeout:g} s"}
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": str(exc) or type(exc).__name__}
    seconds = time.monotonic() - t0
    out, err = done.stdout[-MAX_OUTPUT:], done.stderr[-MAX_OUTPUT:]
    return {"rc": done.returncode, "stdout": out, "stderr": err, "seconds": seconds}


def run(part: dict[str, Any]) -> dict[str, Any]:
    """Every request of one part, in order, then its commands, then the units' states (shapes in
    the module doc)."""
    responses = {
        key: fetch(str(req["url"]), float(req["timeout"]), int(req["max_bytes"]), req.get("body"))
        for key, req in (part.get("requests") or {}).items()
    }
    commands: list[dict[str, Any]] = []
    for c in part.get("commands") or ():
        after = c.get("after")
        if isinstance(after, int) and not (0 <= after < len(commands) and commands[after].get("rc") == 0):
            commands.append({"skipped": f"command {after} did not succeed"})
            continue
        commands.append(command([str(a) for a in c["argv"]], float(c["timeout"])))
    units = part.get("units")
    return {
        "units": is_active([str(u) for u in units]) if units else None,
        "responses": responses,
        "commands": commands,
    }


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Every part of ``job``, in order."""
    return {"parts": {str(name): run(part) for name, part in job["parts"].items()}}


def main(argv: list[str]) -> int:
    """``hostprobe.py JOB.json``: print the answer as one JSON document."""
    try:
        with open(argv[1], encoding="utf-8") as handle:
            job = json.load(handle)
        answer = run_job(job)
    except (IndexError, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        print(json.dumps({"error": f"hostprobe: {type(exc).__name__}: {exc}"}))
        return 2
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
