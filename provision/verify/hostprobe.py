"""Ask the services of the host it runs on: ``systemctl is-active`` and bounded HTTP requests.

Self-contained, standard library only: remote verify copies this file to each host and runs it
there with the host's own ``python3`` (``python3 -I hostprobe.py JOB.json``), because the exporters
and vLLM's server often listen on the host's loopback only; a local verify calls :func:`run` in
process. Either way the controller parses the raw answers with the same functions
(:func:`provision.verify.monitoring_probe.monitoring_from`,
:func:`provision.verify.serve_probe.serve_from`), so the checks read the same models.

The job (a JSON file, never a command line):
    ``{"units": ["nvidia-dcgm", ...] | null,
    "requests": {KEY: {"url": str, "timeout": seconds, "max_bytes": int, "body": object | null}}}``
    A request with a ``body`` is a POST of that body as JSON, otherwise a GET.

The answer (one JSON document on stdout, exit status 0; a job that cannot be read gives
``{"error": str}`` and exit status 2):
    ``{"units": {"rc": int, "stdout": str, "stderr": str} | {"missing": true} | {"error": str} | null,
    "responses": {KEY: {"url": str, "seconds": float, "status": int, "text": str}
    | {"url": str, "seconds": float, "error": str}}}``
    ``status`` and ``text`` are any HTTP answer, 4xx and 5xx included (``text`` decoded as UTF-8
    with replacement); ``error`` says why no answer came (connection refused, timeout, a body over
    ``max_bytes``). ``seconds`` is the request's wall time on the host.

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


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Every request of ``job``, in order, then the units' states (shapes in the module doc)."""
    responses = {
        key: fetch(str(req["url"]), float(req["timeout"]), int(req["max_bytes"]), req.get("body"))
        for key, req in job.get("requests", {}).items()
    }
    units = job.get("units")
    return {"units": is_active([str(u) for u in units]) if units else None, "responses": responses}


def main(argv: list[str]) -> int:
    """``hostprobe.py JOB.json``: print the answer as one JSON document."""
    try:
        with open(argv[1], encoding="utf-8") as handle:
            job = json.load(handle)
        answer = run(job)
    except (IndexError, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        print(json.dumps({"error": f"hostprobe: {type(exc).__name__}: {exc}"}))
        return 2
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
