"""What verify reads about the monitoring on this machine: the services' states, each exporter's
metric families on its port, and the targets Prometheus reports.

The reading is a :mod:`provision.verify.hostprobe` job (:func:`monitoring_job`): run in process
here for a local verify, copied to each host and run there by remote verify, whose exporters may
listen on the host's loopback only. :func:`monitoring_from` parses the answer for both, and the
checks in :mod:`provision.verify.checks_monitoring` are pure functions of :class:`MonitoringRun`.
Sources: systemctl(1) ``is-active`` (one state per unit, one a line); Prometheus HTTP API,
``GET /api/v1/targets`` (``data.activeTargets[].labels.job``, ``.labels.instance``, ``.health``,
``.lastError``; https://prometheus.io/docs/prometheus/latest/querying/api/#targets); the
exposition format is parsed by ``prometheus_client.parser``.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import Field

from provision.catalog.monitoring import MonitoringCatalog, load_monitoring
from provision.components.monitoring_files import local_target
from provision.detect.facts import Unknown
from provision.models import Frozen
from provision.spec.models import MonitoringSpec
from provision.verify import hostprobe

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

    # Unknown first: its JSON ({"unknown": why}) is also a dict of strings (a saved file replays it).
    services: Annotated[Unknown | dict[str, str], Field(union_mode="left_to_right")]
    exporter: Scrape
    node_exporter: Scrape
    targets: tuple[Target, ...] | Unknown | None = None


def units(spec: MonitoringSpec, cat: MonitoringCatalog) -> tuple[str, ...]:
    """The units that must run for ``spec``."""
    base = (cat.dcgm.service, cat.exporter.service, cat.node_exporter.service)
    return base + ((cat.prometheus.service,) if spec.prometheus else ())


def monitoring_job(spec: MonitoringSpec) -> dict[str, Any]:
    """The :mod:`provision.verify.hostprobe` job that reads the monitoring of a host held to ``spec``:
    its units' states, both exporters' pages and (with ``prometheus: true``) Prometheus's targets,
    each on the address a scraper on that host uses (:func:`local_target`)."""
    prom = local_target(spec.prometheus_listen, spec.prometheus_port)
    urls = {
        "exporter": f"http://{local_target(spec.listen, spec.exporter_port)}/metrics",
        "node_exporter": f"http://{local_target(spec.listen, spec.node_exporter_port)}/metrics",
    }
    if spec.prometheus:
        urls["targets"] = f"http://{prom}/api/v1/targets"
    return {
        "units": list(units(spec, load_monitoring())),
        "requests": {k: {"url": u, "timeout": TIMEOUT_S, "max_bytes": MAX_BYTES} for k, u in urls.items()},
    }


def monitoring_from(spec: MonitoringSpec, answer: Any) -> MonitoringRun:
    """The :class:`MonitoringRun` in a :mod:`provision.verify.hostprobe` answer to :func:`monitoring_job`
    (pure; never raises: a missing or malformed part is that part's reason)."""
    job = monitoring_job(spec)
    got: dict[str, Any] = answer if isinstance(answer, dict) else {}
    listed = got.get("responses")
    responses: dict[str, Any] = listed if isinstance(listed, dict) else {}

    def response(key: str) -> Any:
        missing = {"url": job["requests"][key]["url"], "error": "no answer in the probe's output"}
        return responses.get(key) or missing

    return MonitoringRun(
        services=states_from(tuple(job["units"]), got.get("units")),
        exporter=scrape_from(response("exporter")),
        node_exporter=scrape_from(response("node_exporter")),
        targets=targets_from(response("targets")) if spec.prometheus else None,
    )


def states_from(names: tuple[str, ...], raw: Any) -> dict[str, str] | Unknown:
    """The units' states from hostprobe's ``units`` answer (``systemctl is-active``'s exit status
    only says whether all are active, so the lines are read)."""
    if not isinstance(raw, dict):
        return Unknown(unknown="systemctl is-active: no answer in the probe's output")
    if raw.get("missing"):
        return Unknown(unknown="systemctl: not found (systemd does not run this system)")
    if "error" in raw:
        return Unknown(unknown=f"systemctl is-active: {raw['error']}")
    return parse_states(names, str(raw.get("stdout", "")), str(raw.get("stderr", "")))


def parse_states(names: tuple[str, ...], stdout: str, stderr: str = "") -> dict[str, str] | Unknown:
    """One state a line, in the order of ``names``; anything else is an Unknown with systemctl's words."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if len(lines) != len(names):
        said = (stderr or stdout).strip().splitlines()
        return Unknown(unknown=f"systemctl is-active: {said[0] if said else 'no output'}")
    return dict(zip(names, lines, strict=True))


def _page(raw: Any) -> tuple[str, str | None, str]:
    """(url, reason nothing usable came, text) of one hostprobe response."""
    if not isinstance(raw, dict):
        return "", "no answer in the probe's output", ""
    url = str(raw.get("url", ""))
    if "error" in raw:
        return url, f"not answering ({raw['error']})", ""
    status = raw.get("status")
    if status != 200:
        return url, f"HTTP {status}", ""
    return url, None, str(raw.get("text", ""))


def scrape_from(raw: Any) -> Scrape:
    """The metric families on one exporter page as hostprobe returned it, or why it was not read."""
    url, error, text = _page(raw)
    if error is not None:
        return Scrape(url=url, error=error)
    names = family_names(text)
    if isinstance(names, str):
        return Scrape(url=url, error=f"not the Prometheus text format: {names}")
    return Scrape(url=url, names=tuple(sorted(names)))


_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
"""A metric name (Prometheus "Data model": ``[a-zA-Z_:][a-zA-Z0-9_:]*``)."""
_SUFFIXES = {"summary": ("_count", "_sum", ""), "histogram": ("_count", "_sum", "_bucket")}
"""The sample names a family of each type has besides its own (the text exposition format)."""


def family_names(text: str) -> set[str] | str:
    """The metric family names of a text-format page, as prometheus_client's parser names them
    (``# TYPE x_total counter`` is the family ``x``; a sample of no declared family is its own),
    or why the page is not one.

    Only each line's first tokens are read, so the time is linear in the page's lines whatever
    they hold: the library parser costs ~1 µs per character (40 s for a 32 MiB page of long
    label values or HELP texts), and only the names are wanted here.
    Source: https://prometheus.io/docs/instrumenting/exposition_formats/ ("Text-based format").
    """
    names: set[str] = set()
    family, kind = "", "untyped"
    allowed: tuple[str, ...] = ("",)

    def close() -> None:  # the library names a family when it ends (a counter without _total)
        if family:
            names.add(family.removesuffix("_total") if kind == "counter" else family)

    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line[:MAX_TOKEN_LINE].split(None, 3)
            if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
                continue
            if not _METRIC_NAME.fullmatch(parts[2]):
                return f"line {number}: {parts[2][:80]!r} is not a metric name"
            if parts[2] != family:
                close()
                family, kind = parts[2], "untyped"
            if parts[1] == "TYPE":
                kind = parts[3].split()[0] if len(parts) > 3 else "untyped"
            allowed = tuple(family + s for s in _SUFFIXES.get(kind, ("",)))
            continue
        sample = _METRIC_NAME.match(line)
        if sample is None:
            return f"line {number}: a sample without a metric name"
        if sample.group(0) not in allowed:
            close()
            names.add(sample.group(0))  # a sample of no declared family is one of its own
            family, kind, allowed = "", "untyped", ("",)
    close()
    return names


MAX_TOKEN_LINE = 4096
"""Characters of a comment line read for its tokens (a HELP text may be longer: it is not read)."""


def scrape(url: str) -> Scrape:
    """The metric families on an exporter's page on this machine, or the reason it could not be read."""
    return scrape_from(hostprobe.fetch(url, TIMEOUT_S, MAX_BYTES))


def targets_from(raw: Any) -> tuple[Target, ...] | Unknown:
    """Prometheus's active targets from hostprobe's ``/api/v1/targets`` response, or why not."""
    url, error, text = _page(raw)
    if error is not None:
        return Unknown(unknown=f"{url}: {error}")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return Unknown(unknown=f"{url}: the answer is not JSON")
    return parse_targets(doc)


def prometheus_targets(url: str) -> tuple[Target, ...] | Unknown:
    """Prometheus's active targets (``/api/v1/targets``) on this machine, or why they could not be read."""
    return targets_from(hostprobe.fetch(url, TIMEOUT_S, MAX_BYTES))


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
