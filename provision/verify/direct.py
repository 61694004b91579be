"""Remote verify as a transport of detection's kind: one command per host, the play for the rest.

A host detection reaches by one command (:func:`provision.detect.direct.route`: ``ssh`` with the
options Ansible resolved, or ``local`` on this machine, each under sudo where the inventory asks
for become) gets the verify agent (:mod:`provision.verify.agent`) on the stdin of ``PYTHON -c
BOOT``. The agent runs the verify play's tasks in the play's order on the host and prints one
JSON object, parsed here into the :class:`~provision.verify.remote.GpuOutcome` values that the
play's events give, so both paths end in the same :func:`~provision.verify.remote.inputs_from`.
The remote shell string is the fixed text of :func:`provision.detect.direct.remote_command`; the
spec's values (venv, load seconds, the host probe's URLs) travel as JSON data on stdin.

Starting ``ansible-playbook`` costs seconds per run before any host is reached (issue 13); a
command per host costs one ssh connection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from provision.detect import direct
from provision.detect.direct import Route
from provision.detect.runner import collector_source
from provision.errors import FactsError
from provision.verify import agent, launch, observe
from provision.verify.remote import (
    HOST_PROBE,
    TRUST_PROGRAM,
    GpuOutcome,
    HostJob,
    agent_answer_path,
    host_inputs,
    verify_remote,
)
from provision.verify.runs import VerifyInputs

AGENT_TASK = "Run the verify agent."
"""What a host that printed no answer failed at (its cause: ``host failed at 'Run the verify agent.'``)."""
MARGIN_S = 60.0
"""Seconds added to a host's deadline for ssh, the interpreter's start and the trust rule."""


def task(job: HostJob) -> dict[str, Any]:
    """The agent's task for ``job`` (shape in :mod:`provision.verify.agent`): JSON data only."""
    asked = job.host_job()
    return {
        "files": {
            "gpuload.py": launch.SCRIPT.read_text(encoding="utf-8"),
            "hostprobe.py": HOST_PROBE.read_text(encoding="utf-8"),
            "provision_trust.py": TRUST_PROGRAM.read_text(encoding="utf-8"),
        },
        "collector": collector_source(),
        "probes": [p.to_json() for p in job.probes()],
        "host_job": asked,
        "host_job_timeout": observe.deadline_s(asked) if asked is not None else 0,
        "venv": job.venv,
        "python": f"{job.venv}/bin/python" if job.venv else None,
        "seconds": str(job.load_seconds),
        "timeout": job.timeout_s,
        "child_env": dict(launch.CHILD_ENV),
    }


def payload(job: HostJob) -> bytes:
    """The program on the agent's stdin: its text, then ``main(TASK)`` with the task as a literal."""
    source = Path(agent.__file__).read_text(encoding="utf-8")
    call = f"\nmain(json.loads({json.dumps(task(job))!r}))\n"
    return (source + call).encode("utf-8")


def deadline_s(job: HostJob) -> float:
    """Seconds before a host's command is killed: its probes, host probe and GPU program, and
    :data:`MARGIN_S`."""
    probes = sum(p.timeout for p in job.probes())  # the collector runs them at once: an upper bound
    asked = job.host_job()
    services = observe.deadline_s(asked) if asked is not None else 0
    return probes + services + (job.timeout_s if job.venv else 0) + MARGIN_S


def outcome(answer: Mapping[str, Any], key: str) -> GpuOutcome | None:
    """One step of the agent's answer as the play's events would give it; None when not asked."""
    ran = answer.get(key)
    if not isinstance(ran, Mapping):
        return None
    return GpuOutcome(
        bool(ran.get("ran")),
        int(ran.get("rc") or 0),
        str(ran.get("stdout") or ""),
        str(ran.get("stderr") or ""),
        str(ran.get("message") or ""),
    )


Answer = str | dict[str, Any]
"""A host's agent answer (the JSON object), or why there is none."""


def verify_routed(
    inventory: str,
    jobs: Mapping[str, HostJob],
    routes: Mapping[str, Route],
    forks: int | None = None,
    keep: Path | None = None,
) -> dict[str, VerifyInputs | str]:
    """Verify inputs of every host in ``jobs``: the verify agent where its route has a command,
    one ansible-runner play (:func:`provision.verify.remote.verify_remote`) for the others.

    Args:
        inventory: The inventory file (or INI text) the hosts come from.
        jobs: Inventory hostname -> what to run there.
        routes: How each host is reached (:func:`provision.detect.direct.routes`); a host without
            one, or a route without a command, goes through the play.
        forks: Hosts worked on at once, on each transport; None keeps Ansible's default (5).
        keep: Keep what a support bundle needs: raw outputs in ``keep/raw/<host>/``, the agent's
            steps in ``keep/agent/<host>.json``, the play's directory in ``keep/ansible``.

    Returns:
        Per host, in ``jobs``' order, its :class:`VerifyInputs` or the cause nothing was read.

    Raises:
        FactsError: The play failed before any host reported, and no host was read directly.
        Interrupted: Ctrl-C stopped the play.
    """
    started = datetime.now(UTC)
    raw = keep / "raw" if keep is not None else None
    commands = {h: r.argv for h, r in routes.items() if h in jobs and r.argv is not None}
    found: dict[str, VerifyInputs | str] = {}

    def take(host: str, answer: Answer) -> None:
        found[host] = answer_inputs(host, answer, jobs[host], started, raw)

    each = {h: (argv, payload(jobs[h]), deadline_s(jobs[h])) for h, argv in commands.items()}
    direct.run_each(each, forks, take, AGENT_TASK)
    rest = {h: j for h, j in jobs.items() if h not in commands}
    if rest:
        try:
            found |= verify_remote(inventory, rest, forks, keep)
        except FactsError as exc:
            if not found:
                raise
            found |= {h: f"host unreachable: {exc}" for h in rest}  # the direct hosts' results stand
    return {h: found[h] for h in jobs if h in found}


def answer_inputs(
    host: str, answer: Answer, job: HostJob, started: datetime, raw: Path | None
) -> VerifyInputs | str:
    """One host's inputs from the verify agent's answer (:mod:`provision.verify.agent`), or its
    cause; ``raw``: where its raw outputs go, and its steps beside them (``agent/``)."""
    if isinstance(answer, str):
        return answer
    collected = answer.get("collected")
    if not isinstance(collected, dict):
        return f"host failed at '{AGENT_TASK}': its answer holds no collector outputs"
    ran = (outcome(answer, "gpu"), outcome(answer, "host_probe"), outcome(answer, "trust"))
    if raw is not None:  # the agent's own steps, what a play's events hold, for a support bundle
        kept = agent_answer_path(raw.parent, host)
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps({k: v for k, v in answer.items() if k != "collected"}, indent=2), "utf-8")
    return host_inputs(host, collected, ran, job, started, raw)
