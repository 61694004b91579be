"""Monitoring checks: the services run, dcgm-exporter and node exporter answer on their ports with
the metric families the alert rules read, and Prometheus reports every target up.

They give no result when the spec has no ``monitoring:`` section (an opt-in section adds rows
only where it is used); they read the monitoring observer's run in ``VerifyInputs.observed``
(:mod:`provision.verify.monitoring_probe`), read on the machine itself or, by remote verify, on
each host. A probe that gave no answer fails every monitoring check with its reason.
"""

from __future__ import annotations

from typing import Any

from provision.catalog.monitoring import load_monitoring
from provision.components.monitoring_files import scrape_targets
from provision.detect.facts import Unknown
from provision.spec.models import Spec
from provision.verify.context import Context, result, unknown
from provision.verify.models import CheckResult, Measured, Status, Threshold
from provision.verify.monitoring_probe import (
    MonitoringRun,
    Scrape,
    Target,
    monitoring_from,
    monitoring_job,
    units,
)
from provision.verify.observe import Observer

RULE_FAMILIES: tuple[str, ...] = (
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_MEM_MAX_OP_TEMP",
    "DCGM_FI_DEV_SLOWDOWN_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_ROW_REMAP_PENDING",
)
"""dcgm-exporter families provision's alert rules read (all in its counters file; a test keeps
the three lists in line). A GPU that does not support a field (row remapping before Ampere, memory
temperature on GDDR boards) leaves its family out: a warning, not a failure."""

NODE_FAMILIES: tuple[str, ...] = ("node_textfile_scrape_error",)
"""node exporter's textfile collector answers (node_exporter README, Textfile Collector)."""

SOURCE = "spec monitoring (NVIDIA/dcgm-exporter README; Prometheus HTTP API /api/v1/targets)"


def _run(ctx: Context, check_id: str, title: str) -> MonitoringRun | CheckResult:
    run = OBSERVER.run(ctx.inputs.observed)
    if run is None:
        return unknown(check_id, title, "monitoring not read (inputs saved without it)", status="skip")
    if isinstance(run, Unknown):
        return unknown(check_id, title, run, hint="provision verify SPEC on the host shows it from there")
    return run


def services(ctx: Context) -> list[CheckResult]:
    """Each monitoring unit is active."""
    title = "monitoring service running"
    if ctx.spec.monitoring is None:
        return []
    run = _run(ctx, "monitoring-services", title)
    if isinstance(run, CheckResult):
        return [run]
    mon = ctx.spec.monitoring
    assert mon is not None
    if isinstance(run.services, Unknown):
        return [unknown("monitoring-services", title, run.services, status="skip")]
    return [
        result(
            "monitoring-services",
            title,
            "pass" if run.services.get(unit) == "active" else "fail",
            subject=unit,
            measured=Measured(value=run.services.get(unit, "not reported")),
            threshold=Threshold(op="==", value="active", source="spec monitoring"),
            hint=f"systemctl status {unit}; journalctl -u {unit}; provision apply starts it",
        )
        for unit in units(mon, load_monitoring())
    ]


def exporter(ctx: Context) -> list[CheckResult]:
    """dcgm-exporter answers on its port with the families the alert rules read."""
    return _families(ctx, "dcgm-exporter-metrics", "dcgm-exporter metric families", "exporter", RULE_FAMILIES)


def node_exporter(ctx: Context) -> list[CheckResult]:
    """node exporter answers on its port with its textfile collector on."""
    return _families(
        ctx, "node-exporter-metrics", "node exporter metric families", "node_exporter", NODE_FAMILIES
    )


def _families(
    ctx: Context, check_id: str, title: str, which: str, wanted: tuple[str, ...]
) -> list[CheckResult]:
    if ctx.spec.monitoring is None:
        return []
    run = _run(ctx, check_id, title)
    if isinstance(run, CheckResult):
        return [run]
    page: Scrape = getattr(run, which)
    if page.error is not None:
        return [
            unknown(
                check_id, title, f"{page.url}: {page.error}", hint=f"provision apply; then curl {page.url}"
            )
        ]
    missing = [f for f in wanted if f not in page.names]
    status: Status = "pass" if not missing else ("fail" if len(missing) == len(wanted) else "warn")
    return [
        result(
            check_id,
            title,
            status,
            measured=Measured(value=float(len(wanted) - len(missing)), unit="families"),
            threshold=Threshold(op="==", value=float(len(wanted)), unit="families", source=SOURCE),
            detail=f"{page.url}: {len(page.names)} metric families"
            + (f"; missing {', '.join(missing)}" if missing else ""),
            hint="the counters file names them (provision apply writes it); a GPU without the field "
            "leaves its family out",
        )
    ]


def prometheus_targets(ctx: Context) -> list[CheckResult]:
    """Prometheus scrapes every target the spec names, and each is up."""
    title = "Prometheus target up"
    mon = ctx.spec.monitoring
    if mon is None:
        return []
    if not mon.prometheus:
        return [unknown("prometheus-targets", title, "monitoring.prometheus is false", status="skip")]
    run = _run(ctx, "prometheus-targets", title)
    if isinstance(run, CheckResult):
        return [run]
    targets = run.targets
    if targets is None or isinstance(targets, Unknown):
        why = targets if targets is not None else "Prometheus not read"
        return [unknown("prometheus-targets", title, why, hint="systemctl status prometheus")]
    seen = {(t.job, t.instance): t for t in targets}
    wanted = [(job, inst) for job, insts in scrape_targets(mon).items() for inst in insts]
    return [_target(job, inst, seen.get((job, inst))) for job, inst in wanted]


def _target(job: str, instance: str, target: Target | None) -> CheckResult:
    title = "Prometheus target up"
    subject = f"{job}/{instance}"
    if target is None:
        return unknown(
            "prometheus-targets",
            title,
            "Prometheus does not scrape it",
            subject=subject,
            hint="provision apply writes the scrape configuration; systemctl restart prometheus",
        )
    health, last_error = target.health, target.last_error
    return result(
        "prometheus-targets",
        title,
        "pass" if health == "up" else "fail",
        subject=subject,
        measured=Measured(value=health),
        threshold=Threshold(op="==", value="up", source=SOURCE),
        detail=last_error,
        hint=f"Prometheus's last error: {last_error or 'none yet (first scrape pending)'}",
    )


def _job(spec: Spec) -> dict[str, Any] | None:
    return monitoring_job(spec.monitoring) if spec.monitoring is not None else None


def _parse(spec: Spec, answer: Any) -> MonitoringRun:
    assert spec.monitoring is not None  # parsed only for a spec whose job asked it
    return monitoring_from(spec.monitoring, answer)


OBSERVER = Observer(
    key="monitoring",
    model=MonitoringRun,
    job=_job,
    parse=_parse,
    checks=(services, exporter, node_exporter, prometheus_targets),
)
"""The monitoring component's reading (units, exporters, Prometheus, asked on the host) and its checks."""
