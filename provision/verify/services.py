"""The services verify asks on a host (vLLM's server, the monitoring): one host-probe job, one parse.

A spec's ``serve:`` and ``monitoring:`` sections become one :mod:`provision.verify.hostprobe` job
(:func:`services_job`). A local verify runs it in process; remote verify copies the job (a JSON
file) and the program to each host and runs it there, because these services often listen on
the host's loopback only. :func:`services_from` turns the answer into the runs the checks read,
the same way for both; :func:`services_failed` gives every asked section the reason when the
probe gave no answer, so those checks fail with it instead of passing or skipping.

Request keys are prefixed (``serve/health``, ``monitoring/exporter``) so that the two sections
share one job without clashing.
"""

from __future__ import annotations

from typing import Any

from provision.detect.facts import Unknown
from provision.spec.models import MonitoringSpec, ServeSpec
from provision.verify import hostprobe
from provision.verify.monitoring_probe import MonitoringRun, monitoring_from, monitoring_job
from provision.verify.serve_probe import ServeRun, base_url, serve_from, serve_job

SERVE = "serve/"
MONITORING = "monitoring/"

Services = tuple[ServeRun | Unknown | None, MonitoringRun | Unknown | None]
"""(serve, monitoring) as ``VerifyInputs`` holds them; None where the spec has no such section."""


def serve_url(serve: ServeSpec) -> str:
    """Where a client on the server's own host asks it (a wildcard address: on loopback)."""
    return base_url(serve.host, serve.port)


def services_job(serve: ServeSpec | None, monitoring: MonitoringSpec | None) -> dict[str, Any] | None:
    """The host-probe job for the sections a spec has; None when it has neither (nothing to ask)."""
    if serve is None and monitoring is None:
        return None
    requests: dict[str, Any] = {}
    units: list[str] | None = None
    if serve is not None:
        asked = serve_job(serve_url(serve), serve.served_model_name or serve.model)
        requests.update({SERVE + k: v for k, v in asked["requests"].items()})
    if monitoring is not None:
        watched = monitoring_job(monitoring)
        requests.update({MONITORING + k: v for k, v in watched["requests"].items()})
        units = watched["units"]
    return {"units": units, "requests": requests}


def deadline_s(job: dict[str, Any]) -> int:
    """Seconds the whole job may take: every request's own timeout, systemctl's, and 30 s for
    starting the interpreter (the remote task's ``timeout``)."""
    asked = sum(float(r["timeout"]) for r in job["requests"].values())
    return int(asked + hostprobe.SYSTEMCTL_TIMEOUT_S) + 30


def _part(answer: dict[str, Any], prefix: str, units: bool) -> dict[str, Any]:
    got = answer.get("responses")
    responses = got if isinstance(got, dict) else {}
    mine = {k.removeprefix(prefix): v for k, v in responses.items() if k.startswith(prefix)}
    return {"units": answer.get("units") if units else None, "responses": mine}


def services_from(serve: ServeSpec | None, monitoring: MonitoringSpec | None, answer: Any) -> Services:
    """The runs in a host-probe answer to :func:`services_job` (pure; never raises).

    An answer that is not a JSON object, or the program's own ``{"error": ...}``, is every asked
    section's reason (:func:`services_failed`).
    """
    if not isinstance(answer, dict) or "error" in answer:
        said = answer.get("error") if isinstance(answer, dict) else None
        return services_failed(serve, monitoring, str(said or "the host probe's output is not a JSON object"))
    return (
        serve_from(serve_url(serve), _part(answer, SERVE, False)) if serve is not None else None,
        monitoring_from(monitoring, _part(answer, MONITORING, True)) if monitoring is not None else None,
    )


def services_failed(serve: ServeSpec | None, monitoring: MonitoringSpec | None, reason: str) -> Services:
    """``reason`` for every section the spec has (the probe did not run or gave no answer)."""
    why = Unknown(unknown=reason)
    return (why if serve is not None else None, why if monitoring is not None else None)


def collect(serve: ServeSpec | None, monitoring: MonitoringSpec | None) -> Services:
    """Ask this machine's services (the host probe in process)."""
    job = services_job(serve, monitoring)
    if job is None:
        return None, None
    return services_from(serve, monitoring, hostprobe.run(job))
