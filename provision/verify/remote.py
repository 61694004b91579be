"""Collect verify inputs on remote hosts through one ansible-runner play, results from its events:
the hosts without a direct route (:mod:`provision.verify.direct` reads the others with the verify
agent, which does on the host what this play does).

The play copies the detection collector (with the verify probe ``nv-fabricmanager --version``
added to the host's probe list) and the GPU load program to a temporary directory on each host,
runs the collector, then runs ``<venv>/bin/python -I gpuload.py gpus ...`` as an argv under
:data:`provision.verify.launch.CHILD_ENV` and an Ansible ``async`` deadline (the async wrapper kills
the program's process group when it passes), when the host's ``nvidia-smi`` answered and the
venv's interpreter exists. Where a component's observer asks something of the host's spec
(``serve:``, ``monitoring:``, ``containers:``), the play also copies :mod:`provision.verify.hostprobe`
and its job (a JSON file written here, :func:`provision.verify.observe.host_job`) and runs
``python3 -I hostprobe.py JOB.json`` on the host, before the GPU program: vLLM's server, the
exporters and the container runtime are asked from the host's own view (they often listen on its
loopback only; a container must run where the GPUs are), never from the controller. The controller parses
everything with the same parsers as a local run; a probe that did not run or gave no answer fails
those checks with the reason.

Not run remotely in this pass: the multi-process NCCL all-reduce. On a host with two or more
GPUs its check is a skip with :data:`REMOTE_ALLREDUCE` as the reason.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from provision import ansible, trust
from provision.detect.domains.driver import FabricManagerVersionFact
from provision.detect.fact import Probe
from provision.detect.facts import Facts, Unknown
from provision.detect.raw import ProbeOutput, write_raw
from provision.detect.registry import all_probes
from provision.detect.runner import (
    COLLECTOR_TASK,
    collector_results,
    collector_source,
    facts_from_outputs,
    host_dir_name,
    outputs_from_json,
    probes_json,
)
from provision.errors import FactsError, Interrupted
from provision.spec.models import Spec
from provision.verify import hostprobe, launch, observe
from provision.verify.probes import FM_PROBE
from provision.verify.runs import GpuRun, VerifyInputs

GPU_TASK = "Run the GPU load program in the spec's venv."
TRUST_TASK = "Check the venv by provision's trust rule before root runs its interpreter."
HOST_PROBE_TASK = "Ask the host, from the host itself, what the components' observers read."
TRUST_PROGRAM = Path(trust.__file__)
"""The trust rule (standard library only): the play runs it on the host before the GPU program."""
HOST_PROBE = Path(hostprobe.__file__)
"""The host-probe program the play copies (standard library only: it runs with the host's python3)."""
REMOTE_ALLREDUCE = (
    "not run on remote hosts: the multi-process NCCL all-reduce runs only with `provision verify SPEC` "
    "on the machine itself"
)
ASYNC_POLL_S = 2
"""How often Ansible polls the GPU program (seconds); the deadline is the async value."""


@dataclass(frozen=True)
class HostJob:
    """What verify runs on one host, from its spec.

    Attributes:
        venv: The spec's ``python.venv``; None runs no GPU work.
        load_seconds: bf16 load per GPU (``verify.load_seconds``), seconds.
        gpu_count: GPUs the spec expects; sizes the GPU program's deadline as launch.py does.
        spec: The host's spec: each component's observer asks the host probe what it reads.
    """

    venv: str | None
    load_seconds: float
    gpu_count: int
    spec: Spec | None = None

    def host_job(self) -> dict[str, Any] | None:
        """The host-probe job for this host; None when no observer asks its spec anything."""
        return observe.host_job(self.spec) if self.spec is not None else None

    @property
    def timeout_s(self) -> int:
        """The GPU program's deadline in whole seconds (:func:`launch.gpu_timeout`, rounded up)."""
        return int(launch.gpu_timeout(self.gpu_count, self.load_seconds)) + 1

    def probes(self) -> list[Probe]:
        """Detection's probes for the venv, and the fabric manager's version."""
        return [*all_probes(self.venv), FM_PROBE]


@dataclass(frozen=True)
class GpuOutcome:
    """What a task that runs a program did on one host (the GPU program, the host probe): ran
    (rc, output), was skipped, or failed before or while running (``message``)."""

    ran: bool
    rc: int = 0
    stdout: str = ""
    stderr: str = ""
    message: str = ""


def verify_remote(
    inventory: str, jobs: Mapping[str, HostJob], forks: int | None = None, keep: Path | None = None
) -> dict[str, VerifyInputs | str]:
    """Verify inputs of every host in ``jobs``, gathered in one ansible-runner run (the hosts
    without a direct route: :func:`provision.verify.direct.verify_routed` decides).

    Args:
        inventory: The inventory file (or INI text) the hosts come from.
        jobs: Inventory hostname -> what to run there; the play is limited to these hosts.
        forks: Hosts Ansible works on at once; None keeps Ansible's default (5).
        keep: Keep the run for a support bundle: ansible-runner's directory (its events) in
            ``keep/ansible``, each read host's raw probe outputs in ``keep/raw/<host>/``; None
            keeps nothing.

    Returns:
        Per host its :class:`VerifyInputs`, or the reason nothing could be read
        (``host unreachable: ...``, ``host failed at ...``).

    Raises:
        FactsError: ansible-playbook failed before any host reported.
        Interrupted: Ctrl-C stopped the play (ansible-runner's status ``canceled``).
    """
    started = datetime.now(UTC)
    if keep is not None:
        played = _run_play(keep / "ansible", inventory, jobs, forks)
    else:
        with tempfile.TemporaryDirectory(prefix="provision-verify-") as tmp:
            played = _run_play(Path(tmp), inventory, jobs, forks)
    if played.interrupted:
        raise Interrupted(left_running=played.left_running)
    collected = collector_results(played.events)
    if not collected and played.rc != 0:
        raise FactsError(
            f"ansible-playbook failed (rc {played.rc}) before any host reported: {played.stdout_tail}"
        )
    gpu = gpu_outcomes(played.events)
    asked = gpu_outcomes(played.events, HOST_PROBE_TASK)
    checked = gpu_outcomes(played.events, TRUST_TASK)
    raw = keep / "raw" if keep is not None else None
    return {
        host: host_inputs(
            host, result, (gpu.get(host), asked.get(host), checked.get(host)), jobs[host], started, raw
        )
        for host, result in collected.items()
        if host in jobs
    }


def agent_answer_path(keep: Path, host: str) -> Path:
    """Where the direct transport keeps a host's verify agent steps (trust, host probe, GPU
    program: their exit status and output) under ``keep``."""
    return keep / "agent" / f"{host_dir_name(host)}.json"


def host_inputs(
    host: str,
    result: str | dict[str, Any],
    ran: tuple[GpuOutcome | None, GpuOutcome | None, GpuOutcome | None],
    job: HostJob,
    started: datetime,
    raw: Path | None,
) -> VerifyInputs | str:
    """One host's inputs from its collector result (or why there is none); ``ran``: its GPU
    program, host probe and trust check outcomes; ``raw``: where its raw outputs are kept."""
    if isinstance(result, str):
        return result
    outputs = outputs_from_json(result)
    if raw is not None:
        write_raw(raw / host_dir_name(host), outputs)
    gpu, asked, checked = ran
    return inputs_from(host, outputs, gpu, job, started, asked, checked)


def trust_problem(checked: GpuOutcome | None) -> str | None:
    """Why the trust rule refused the venv on the host (the :data:`TRUST_TASK`'s answer), or None
    when it said ``trusted`` or did not run (no venv: nothing is run then either)."""
    if checked is None or not checked.ran:
        return None
    line = next(iter(checked.stdout.strip().splitlines()), "")
    if line == "trusted":
        return None
    if line.startswith("untrusted: "):
        return line.removeprefix("untrusted: ")
    said = (checked.stderr or checked.message).strip().splitlines()
    return f"the trust check gave no answer (exit {checked.rc}: {said[-1] if said else 'no output'})"


def inputs_from(
    host: str,
    outputs: Mapping[str, ProbeOutput],
    gpu: GpuOutcome | None,
    job: HostJob,
    started: datetime | None = None,
    asked: GpuOutcome | None = None,
    checked: GpuOutcome | None = None,
) -> VerifyInputs:
    """One host's verify inputs from its collector outputs, its GPU task's, its host probe's and
    its trust check's outcomes (pure)."""
    facts = facts_from_outputs(outputs, host=host, collected_at=started)
    untrusted = trust_problem(checked)
    gpu_run = remote_gpu_run(facts, gpu, job)
    if untrusted is not None and not isinstance(facts.gpus, Unknown):
        gpu_run = launch.untrusted_venv(str(job.venv), untrusted)
    many = isinstance(gpu_run, GpuRun) and gpu_run.device_count >= 2
    return VerifyInputs(
        facts=facts,
        fm_version=FabricManagerVersionFact.parse(*_text(outputs, FM_PROBE.id)),
        gpu_run=gpu_run,
        allreduce=Unknown(unknown=REMOTE_ALLREDUCE) if many else None,
        observed=remote_observed(job, asked),
    )


def remote_observed(job: HostJob, asked: GpuOutcome | None) -> observe.Observed:
    """The host probe's answer as the runs the observers' checks read, or, for every part the
    spec asks, why there is none (the task was not reported, skipped, timed out, or the program
    failed: its exit status and last words)."""
    if job.spec is None or job.host_job() is None:
        return {}
    reason = _probe_failure(asked)
    if reason is not None:
        return observe.observed_failed(job.spec, reason)
    assert asked is not None
    try:
        answer = json.loads(asked.stdout)
    except (ValueError, RecursionError):
        answer = None
    if asked.rc != 0 and not (isinstance(answer, dict) and "error" in answer):
        said = (asked.stderr or asked.stdout).strip().splitlines()
        why = f"host probe exited {asked.rc}: {said[-1] if said else 'no output'}"
        return observe.observed_failed(job.spec, why)
    return observe.observed_from(job.spec, answer)


def _probe_failure(asked: GpuOutcome | None) -> str | None:
    if asked is None:
        return "host probe: Ansible reported nothing for it"
    if not asked.ran:
        return "host probe: skipped"
    if asked.message:
        return f"host probe: {asked.message}"
    return None


def _text(outputs: Mapping[str, ProbeOutput], probe_id: str) -> tuple[str, int]:
    out = outputs.get(probe_id) or ProbeOutput.missing(probe_id)
    return out.output, out.rc


def remote_gpu_run(facts: Facts, gpu: GpuOutcome | None, job: HostJob) -> GpuRun | Unknown:
    """The GPU program's result, or why it did not run, with the reasons a local run gives."""
    if isinstance(facts.gpus, Unknown):
        return Unknown(unknown=f"no GPU work: {facts.gpus.unknown}")
    if job.venv is None:
        no_venv = launch.python_of(None)
        assert isinstance(no_venv, Unknown)  # without a venv it is always the reason
        return no_venv
    if gpu is None or not gpu.ran:
        why = gpu.message if gpu else "Ansible reported nothing for the GPU task"
        return Unknown(unknown=why or f"{job.venv}/bin/python: no such interpreter (create the venv)")
    timed_out = "did not complete within" in gpu.message
    return launch.gpu_run_from(gpu.rc, gpu.stdout, gpu.stderr, timed_out, job.timeout_s)


def gpu_outcomes(events: Iterable[Mapping[str, Any]], task: str = GPU_TASK) -> dict[str, GpuOutcome]:
    """Per host, what ``task``'s ``runner_on_ok|failed|skipped`` event says (the GPU task by default)."""
    outcomes: dict[str, GpuOutcome] = {}
    for event in events:
        data = event.get("event_data", {})
        host, res = data.get("host"), data.get("res") or {}
        if not isinstance(host, str) or data.get("task") != task:
            continue
        kind = event.get("event")
        if kind in ("runner_on_ok", "runner_on_failed") and "rc" in res:
            outcomes[host] = GpuOutcome(
                True, int(res["rc"]), str(res.get("stdout", "")), str(res.get("stderr", ""))
            )
        elif kind in ("runner_on_ok", "runner_on_failed"):
            outcomes[host] = GpuOutcome(True, -1, message=str(res.get("msg", "no result")))
        elif kind == "runner_on_skipped":
            outcomes[host] = GpuOutcome(False)
    return outcomes


def _run_play(
    data_dir: Path, inventory: str, jobs: Mapping[str, HostJob], forks: int | None
) -> ansible.PlayResult:
    extravars = _write_project(data_dir / "project", jobs)
    return ansible.run_play(
        data_dir, "verify.yml", inventory, extravars=extravars, limit=",".join(jobs), forks=forks
    )


def _write_project(project: Path, jobs: Mapping[str, HostJob]) -> dict[str, Any]:
    """Write the scripts, one probe list per distinct venv, one host-probe job per distinct job,
    and the play; return the extravars."""
    project.mkdir(parents=True, exist_ok=True)
    (project / "collector.py").write_text(collector_source(), encoding="utf-8")
    (project / "gpuload.py").write_text(launch.SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    (project / "hostprobe.py").write_text(HOST_PROBE.read_text(encoding="utf-8"), encoding="utf-8")
    (project / "provision_trust.py").write_text(TRUST_PROGRAM.read_text(encoding="utf-8"), encoding="utf-8")
    files: dict[str | None, str] = {}
    asks: dict[str, str] = {}
    for job in jobs.values():
        if job.venv not in files:
            files[job.venv] = f"probes-{len(files)}.json"
            (project / files[job.venv]).write_text(probes_json(job.probes()), encoding="utf-8")
        asked = job.host_job()
        text = json.dumps(asked, sort_keys=True) if asked is not None else ""
        if text and text not in asks:
            asks[text] = f"hostprobe-{len(asks)}.json"
            (project / asks[text]).write_text(text, encoding="utf-8")
    (project / "verify.yml").write_text(json.dumps(verify_play(), indent=1), encoding="utf-8")
    return {
        "provision_verify_hosts": {
            h: host_vars(j, files[j.venv], asks.get(json.dumps(j.host_job(), sort_keys=True), ""))
            for h, j in jobs.items()
        }
    }


def host_vars(job: HostJob, probes_file: str, services_file: str = "") -> dict[str, Any]:
    """The play's per-host variables: the probe list's file, the venv's python, load and deadline,
    and the host-probe job's file with its deadline (``""`` and 0: nothing to ask)."""
    asked = job.host_job()
    return {
        "probes": probes_file,
        "venv": job.venv or "",
        "python": f"{job.venv}/bin/python" if job.venv else "",
        "seconds": str(job.load_seconds),
        "timeout": job.timeout_s,
        "services": services_file,
        "services_timeout": observe.deadline_s(asked) if asked is not None else 0,
    }


def verify_play() -> list[dict[str, Any]]:
    """The verify playbook as data (JSON is YAML): copy, collect, run the GPU program, clean up."""
    job = "provision_verify_hosts[inventory_hostname]"
    workdir = "{{ provision_verify_dir.path }}"
    copies = [_copy(src, name, workdir) for src, name in _copied(job)]
    return [
        {
            "name": "Gather provision verify inputs.",
            "hosts": "all",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Create a temporary directory for the verify programs.",
                    "ansible.builtin.tempfile": {"state": "directory", "prefix": "provision-verify-"},
                    "register": "provision_verify_dir",
                },
                {
                    "name": "Collect the verify inputs and run the GPU program, then clean up.",
                    "block": [
                        *copies,
                        _collect(workdir),
                        *_host_probe(job, workdir),
                        _stat(job),
                        _trust(job, workdir),
                        _gpu(job, workdir),
                    ],
                    "always": [_clean()],
                },
            ],
        }
    ]


def _copied(job: str) -> list[tuple[str, str]]:
    return [
        ("collector.py", "collector.py"),
        (f"{{{{ {job}.probes }}}}", "probes.json"),
        ("gpuload.py", "gpuload.py"),
        ("provision_trust.py", "provision_trust.py"),
    ]


def _copy(src: str, name: str, workdir: str) -> dict[str, Any]:
    return {
        "name": f"Copy {name} to the host.",
        "ansible.builtin.copy": {
            "src": f"{{{{ playbook_dir }}}}/{src}",
            "dest": f"{workdir}/{name}",
            "mode": "0600",
        },
    }


_HOST_PYTHON = (
    "{{ ansible_facts.discovered_interpreter_python"
    " | default(ansible_python_interpreter | default('python3')) }}"
)
"""The host's own interpreter, the one Ansible runs its modules with (root's, not a venv)."""


def _collect(workdir: str) -> dict[str, Any]:
    python = _HOST_PYTHON
    return {
        "name": COLLECTOR_TASK,
        "changed_when": False,
        "ansible.builtin.command": {"argv": [python, f"{workdir}/collector.py", f"{workdir}/probes.json"]},
        "register": "provision_verify_collected",
    }


def _host_probe(job: str, workdir: str) -> list[dict[str, Any]]:
    """Copy the host probe and its job, then run it as an argv with the host's interpreter under
    the job's deadline; only where the host's spec asks something."""
    asks = f"{job}.services | length > 0"
    copy = _copy(f"{{{{ {job}.services }}}}", "hostprobe.json", workdir)
    program = _copy("hostprobe.py", "hostprobe.py", workdir)
    return [
        {**program, "when": asks},
        {**copy, "when": asks},
        {
            "name": HOST_PROBE_TASK,
            "ansible.builtin.command": {
                "argv": [_HOST_PYTHON, "-I", f"{workdir}/hostprobe.py", f"{workdir}/hostprobe.json"]
            },
            "timeout": f"{{{{ {job}.services_timeout }}}}",
            "changed_when": False,
            "failed_when": False,
            "when": asks,
        },
    ]


def _stat(job: str) -> dict[str, Any]:
    return {
        "name": "Look for the venv's interpreter.",
        "ansible.builtin.stat": {"path": f"{{{{ {job}.python }}}}"},
        "register": "provision_verify_python",
        "when": f"{job}.python | length > 0",
    }


def _trust(job: str, workdir: str) -> dict[str, Any]:
    """The trust rule over the venv, on the host, as root, just before the GPU program: it prints
    ``trusted`` or ``untrusted: <reason>`` and always exits 0 (:func:`provision.trust.cli`)."""
    return {
        "name": TRUST_TASK,
        "ansible.builtin.command": {
            "argv": [_HOST_PYTHON, "-I", f"{workdir}/provision_trust.py", "venv", f"{{{{ {job}.venv }}}}"]
        },
        "register": "provision_verify_trust",
        "changed_when": False,
        "failed_when": False,
        "when": f"{job}.python | length > 0",
    }


def _gpu(job: str, workdir: str) -> dict[str, Any]:
    argv = [f"{{{{ {job}.python }}}}", "-I", f"{workdir}/gpuload.py", "gpus"]
    argv += ["--seconds", f"{{{{ {job}.seconds }}}}", "--copy-mib", "256"]
    collected = "(provision_verify_collected.stdout | from_json)"
    answered = f"{collected}['query-gpu']['rc'] == 0"
    trusted = "(provision_verify_trust.stdout | default('')) == 'trusted'"
    return {
        "name": GPU_TASK,
        "ansible.builtin.command": {"argv": argv},
        "environment": dict(launch.CHILD_ENV),
        "async": f"{{{{ {job}.timeout }}}}",
        "poll": ASYNC_POLL_S,
        "changed_when": False,
        "failed_when": False,
        "when": [
            f"{job}.python | length > 0",
            "provision_verify_python.stat.executable | default(false)",
            answered,
            trusted,
        ],
    }


def _clean() -> dict[str, Any]:
    return {
        "name": "Remove the verify programs' temporary directory.",
        "ansible.builtin.file": {"path": "{{ provision_verify_dir.path }}", "state": "absent"},
    }
