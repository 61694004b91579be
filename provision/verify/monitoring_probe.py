"""What verify reads about the monitoring on this machine: the services' states, each exporter's
metric families on its port, and the targets Prometheus reports.

I/O lives here (``systemctl is-active``, HTTP GETs on the spec's ports); the checks in
:mod:`provision.verify.checks_monitoring` are pure functions of :class:`MonitoringRun`.
Sources: systemctl(1) ``is-active`` (one state per unit, one a line); Prometheus HTTP API,
``GET /api/v1/targets`` (``data.activeTargets[].labels.job``, ``.labels.instance``, ``.health``,
``.lastError``; https://prometheus.io/docs/prometheus/latest/querying/api/#targets); the
exposition format is parsed by ``prometheus_client.parser``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from typing import Any

from provision.catalog.monitoring import MonitoringCatalog, load_monitoring
from provision.components.monitoring_files import local_target
from provision.detect.facts import Unknown
from provision.models import Frozen
from provision.spec.models import MonitoringSpec

TIMEOUT_S = 5.0
"""Seconds an exporter or Prometheus has to answer (an exporter answers in well under one)."""
MAX_BYTES = 32 * 2**20
"""Most of a /metrics page read (dcgm-exporter on 8 GPUs serves well under 1 MB)."""


class Scrape(Frozen):
    """One ``/metrics`` page read: the sample names it held, or why it could not be read.

    Attributes:
        url: What was read.
        names: Metric family names (``DCGM_FI_DEV_GPU_TEMP``), sorted.
        error: Why nothing was read or parsed; None on success.
    """

    url: str
    names: tuple[str, ...] = ()
    error: str | None = None


class Target(Frozen):
    """One target as Prometheus reports it."""

    job: str
    instance: str
    health: str
    last_error: str = ""


class MonitoringRun(Frozen):
    """Everything the monitoring checks read.

    Attributes:
        services: Unit -> ``systemctl is-active`` state, or why they could not be read.
        exporter: dcgm-exporter's page.
        node_exporter: node exporter's page.
        targets: Prometheus's active targets, its error, or None when the spec has no Prometheus.
    """

    services: dict[str, str] | Unknown
    exporter: Scrape
    node_exporter: Scrape
    targets: tuple[Target, ...] | Unknown | None = None


def units(spec: MonitoringSpec, cat: MonitoringCatalog) -> tuple[str, ...]:
    """The units that must run for ``spec``."""
    base = (cat.dcgm.service, cat.exporter.service, cat.node_exporter.service)
    return base + ((cat.prometheus.service,) if spec.prometheus else ())


def collect(spec: MonitoringSpec) -> MonitoringRun:
    """Read the services, both exporters and Prometheus on this machine."""
    cat = load_monitoring()
    prom = local_target(spec.prometheus_listen, spec.prometheus_port)
    return MonitoringRun(
        services=service_states(units(spec, cat)),
        exporter=scrape(f"http://{local_target(spec.listen, spec.exporter_port)}/metrics"),
        node_exporter=scrape(f"http://{local_target(spec.listen, spec.node_exporter_port)}/metrics"),
        targets=prometheus_targets(f"http://{prom}/api/v1/targets") if spec.prometheus else None,
    )


def service_states(names: tuple[str, ...]) -> dict[str, str] | Unknown:
    """``systemctl is-active`` of each unit (its exit status only says whether all are active)."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return Unknown(unknown="systemctl: not found (systemd does not run this system)")
    try:
        done = subprocess.run(
            [systemctl, "is-active", *names], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Unknown(unknown=f"systemctl is-active: {exc}")
    return parse_states(names, done.stdout, done.stderr)


def parse_states(names: tuple[str, ...], stdout: str, stderr: str = "") -> dict[str, str] | Unknown:
    """One state a line, in the order of ``names``; anything else is an Unknown with systemctl's words."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if len(lines) != len(names):
        said = (stderr or stdout).strip().splitlines()
        return Unknown(unknown=f"systemctl is-active: {said[0] if said else 'no output'}")
    return dict(zip(names, lines, strict=True))


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        data: bytes = response.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"more than {MAX_BYTES} bytes")
    return data


def scrape(url: str) -> Scrape:
    """The metric families on an exporter's page, or the reason it could not be read."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = _get(url).decode("utf-8", errors="replace")
        # Family names, as the page's TYPE lines give them (the parser renames counter samples X_total).
        names = {family.name for family in text_string_to_metric_families(text)}
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return Scrape(url=url, error=_reason(exc))
    return Scrape(url=url, names=tuple(sorted(names)))


def prometheus_targets(url: str) -> tuple[Target, ...] | Unknown:
    """Prometheus's active targets (``/api/v1/targets``), or why they could not be read."""
    try:
        doc = json.loads(_get(url))
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return Unknown(unknown=f"{url}: {_reason(exc)}")
    return parse_targets(doc)


def parse_targets(doc: Any) -> tuple[Target, ...] | Unknown:
    """The ``activeTargets`` of a ``/api/v1/targets`` answer; an Unknown for any other document."""
    try:
        active = doc["data"]["activeTargets"]
        return tuple(
            Target(
                job=str(t["labels"]["job"]),
                instance=str(t["labels"]["instance"]),
                health=str(t["health"]),
                last_error=str(t.get("lastError", "")),
            )
            for t in active
        )
    except (KeyError, TypeError):
        return Unknown(unknown="Prometheus answered without data.activeTargets")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        return f"not answering ({exc.reason})"
    return str(exc) or type(exc).__name__
