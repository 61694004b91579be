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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from provision.detect import direct
from provision.detect.runner import collector_source
from provision.verify import agent, launch, observe
from provision.verify.remote import HOST_PROBE, TRUST_PROGRAM, GpuOutcome, HostJob

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


def verify_direct(
    commands: Mapping[str, list[str]],
    jobs: Mapping[str, HostJob],
    forks: int | None,
    on_answer: Callable[[str, Answer], None],
) -> None:
    """Run the agent on every host of ``commands`` (:func:`provision.detect.direct.route`'s argv),
    ``forks`` at a time; ``on_answer(host, answer)`` gets each host's answer as it finishes."""
    each = {h: (argv, payload(jobs[h]), deadline_s(jobs[h])) for h, argv in commands.items()}
    direct.run_each(each, forks, on_answer, AGENT_TASK)
