"""``provision verify --prometheus FILE``: the verify results as a node exporter textfile.

Metric names carry their base unit (Prometheus "Metric and label naming": ``_celsius``,
``_bytes``, ``_bytes_per_second``, ``_seconds``, ``_ratio``); measured values are converted to it
(GB/s x 1e9, GiB x 2^30, TFLOP/s x 1e12). Each check's status is a state set (one series per
status, 1 on the result's), so an alert reads ``provision_verify_check_status{status="fail"} == 1``.
The text is Prometheus's exposition format as the client library writes it
(``prometheus_client.generate_latest``); the file is written to a temporary file in the same
directory, made world-readable, synced and renamed over ``FILE`` (node_exporter README,
Textfile Collector: "atomically"), so node exporter never reads half a file.

Families::

    provision_verify_check_status{host, check, subject, status}        1 / 0
    provision_verify_checks{host, status}                              count per status
    provision_verify_measured_<unit>{host, check, subject}             the measured value
    provision_verify_threshold_<unit>{host, check, subject, op}        the threshold it was held to
    provision_verify_duration_seconds{host}                            wall time of the verify
    provision_verify_last_run_timestamp_seconds{host}                  when it started (Unix time)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from provision.errors import ProvisionError
from provision.output import check_output_file, write_atomic
from provision.verify.models import CheckResult, Report

UNITS: dict[str, tuple[str, float]] = {
    "C": ("celsius", 1.0),
    "GB/s": ("bytes_per_second", 1e9),
    "GB/s busbw": ("bus_bytes_per_second", 1e9),
    "GiB": ("bytes", float(2**30)),
    "TFLOP/s": ("flop_per_second", 1e12),
    "rel. error": ("ratio", 1.0),
    "GPUs": ("gpus", 1.0),
}
"""verify's unit -> (metric name suffix, factor to that base unit). A value in another unit is
left out (its status is still written)."""

STATUSES = ("pass", "warn", "fail", "skip")
PREFIX = "provision_verify"


class VerifyCollector(Collector):
    """The metric families of one or more hosts' reports (host label = the report's host)."""

    def __init__(self, reports: Mapping[str, Report]) -> None:
        self._reports = reports

    def collect(self) -> Iterator[Metric]:
        reports = self._reports
        yield _status_family(reports)
        yield _counts_family(reports)
        yield from _value_families(reports, "measured", "The measured value of a check")
        yield from _value_families(reports, "threshold", "The threshold a check was held to")
        duration = GaugeMetricFamily(
            f"{PREFIX}_duration_seconds", "Wall time of the verify run", labels=["host"]
        )
        started = GaugeMetricFamily(
            f"{PREFIX}_last_run_timestamp_seconds", "When the verify run started (Unix time)", labels=["host"]
        )
        for host, report in reports.items():
            duration.add_metric([host], report.seconds)
            if report.started_at is not None:
                started.add_metric([host], report.started_at.timestamp())
        yield duration
        yield started


def _status_family(reports: Mapping[str, Report]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        f"{PREFIX}_check_status",
        "State of each check: 1 for the status it ended in, 0 for the others",
        labels=["host", "check", "subject", "status"],
    )
    for host, report in reports.items():
        for r in report.results:
            for status in STATUSES:
                family.add_metric([host, r.id, r.subject, status], 1.0 if r.status == status else 0.0)
    return family


def _counts_family(reports: Mapping[str, Report]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        f"{PREFIX}_checks", "Number of check results per status", labels=["host", "status"]
    )
    for host, report in reports.items():
        for status, count in report.counts().items():
            family.add_metric([host, status], float(count))
    return family


def _value_families(reports: Mapping[str, Report], kind: str, help_text: str) -> Iterator[GaugeMetricFamily]:
    """One family per unit: ``provision_verify_<kind>_<unit>``."""
    labels = ["host", "check", "subject"] + (["op"] if kind == "threshold" else [])
    families: dict[str, GaugeMetricFamily] = {}
    for host, report in reports.items():
        for r, suffix, value, op in _numbers(report.results, kind):
            family = families.setdefault(
                suffix,
                GaugeMetricFamily(f"{PREFIX}_{kind}_{suffix}", f"{help_text} ({suffix})", labels=labels),
            )
            family.add_metric([host, r.id, r.subject] + ([op] if kind == "threshold" else []), value)
    yield from families.values()


def _numbers(results: Iterable[CheckResult], kind: str) -> Iterator[tuple[CheckResult, str, float, str]]:
    for r in results:
        item = r.measured if kind == "measured" else r.threshold
        if item is None or not isinstance(item.value, float | int) or item.unit not in UNITS:
            continue
        suffix, factor = UNITS[item.unit]
        op = r.threshold.op if r.threshold is not None else ""
        yield r, suffix, float(item.value) * factor, op


def render(reports: Mapping[str, Report]) -> bytes:
    """The exposition-format text of ``reports`` (host -> report)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VerifyCollector(reports))
    return generate_latest(registry)


def check_path(path: Path) -> None:
    """Refuse a textfile path node exporter would not read, before verify runs.

    Raises:
        ProvisionError: ``path`` does not end in ``.prom``, or its directory does not exist.
    """
    if path.suffix != ".prom":
        raise ProvisionError(
            f"--prometheus {path}: node exporter's textfile collector reads only *.prom files"
        )
    check_output_file(path, "--prometheus")


def write_textfile(path: Path, reports: Mapping[str, Report]) -> None:
    """Write ``reports`` to ``path`` atomically, mode 0644 (:func:`provision.output.write_output`:
    a temporary file beside it, fsync, rename; never through a planted link).

    Raises:
        ProvisionError: :func:`check_path` refuses ``path``, or its directory cannot be written
            (the reason from the OS).
    """
    check_path(path)
    write_atomic(path, render(reports), option="--prometheus")
