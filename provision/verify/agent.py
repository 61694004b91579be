#!/usr/bin/env python3
"""Gather one host's verify inputs on the host itself: the verify play's tasks as one program.

Standalone, standard library only, Python 3.8+ (as the collector): the direct transport
(:mod:`provision.verify.direct`) sends this file's text, then a call of :func:`main` on the task (a
Python literal of JSON data), on the stdin of ``PYTHON -c BOOT`` over ssh or on this machine. No
value of the task ever reaches a shell: every program runs as an argv list.

The task is ``{"files": {NAME: TEXT}, "collector": TEXT, "probes": [PROBE], "host_job": JOB | null,
"venv": str | null, "python": str | null, "seconds": str, "timeout": seconds,
"host_job_timeout": seconds, "child_env": {NAME: VALUE}}``. In the play's order, in a private
temporary directory (mode 0700, removed at the end) holding ``files`` (``gpuload.py``,
``hostprobe.py``, ``provision_trust.py``):

1. the collector's ``collect(probes)``, in this process;
2. where ``host_job`` is given, ``python -I hostprobe.py JOB.json`` under ``host_job_timeout``;
3. where ``python`` (the venv's interpreter) is given: the trust rule over the venv
   (``python -I provision_trust.py venv VENV``), then, when the interpreter is executable, the
   host's ``nvidia-smi`` answered and the venv is trusted, ``PYTHON -I gpuload.py gpus --seconds S
   --copy-mib 256`` with ``child_env`` added to the environment, killed with its session at
   ``timeout``.

It prints one JSON object: ``{"collected": {...}, "host_probe": RAN | null, "trust": RAN | null,
"gpu": RAN | null}``, each RAN ``{"ran": bool, "rc": int, "stdout": str, "stderr": str,
"message": str}`` (``message``: why it did not run or did not finish; a deadline's says
``did not complete within N s``), what the play's events give for the same tasks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Any

MAX_OUTPUT = 1 << 20
"""Characters of a program's stdout and stderr kept (the last ones)."""
TRUST_TIMEOUT_S = 60.0
"""Seconds the trust rule has to walk the venv."""


def ran(
    rc: int = 0, stdout: str = "", stderr: str = "", message: str = "", *, did: bool = True
) -> dict[str, Any]:
    """One program's outcome in the shape of the module docstring."""
    return {"ran": did, "rc": rc, "stdout": stdout, "stderr": stderr, "message": message}


def skipped() -> dict[str, Any]:
    """A program that was not run (its condition did not hold), as the play's skipped task."""
    return ran(did=False)


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``argv`` in its own session under ``timeout`` seconds; the session is killed after it."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return ran(-1, message=f"{argv[0]}: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return ran(-1, message=f"{argv[0]}: did not complete within {timeout:g} s and was killed")
    except BaseException:  # Ctrl-C here, or the controller gone (SIGHUP, SIGTERM: see main)
        _kill(proc)
        raise
    text = [b.decode("utf-8", "replace")[-MAX_OUTPUT:] for b in (out, err)]
    return ran(proc.returncode, text[0], text[1])


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc``'s whole session (what it started too) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def collect(source: str, probes: list[dict[str, Any]]) -> dict[str, Any]:
    """The collector's outputs for ``probes``: its text run as a module, then ``collect``."""
    namespace: dict[str, Any] = {"__name__": "provision_collector"}
    exec(compile(source, "provision-collector", "exec"), namespace)
    result: dict[str, Any] = namespace["collect"](probes)
    return result


def answered(collected: dict[str, Any]) -> bool:
    """Whether the host's ``nvidia-smi --query-gpu`` answered (the GPU program's condition)."""
    query = collected.get("query-gpu")
    return isinstance(query, dict) and query.get("rc") == 0


def gpu_steps(task: dict[str, Any], workdir: str, collected: dict[str, Any]) -> dict[str, Any]:
    """The trust rule over the venv, then the GPU program where every condition holds."""
    python, venv = str(task["python"]), str(task["venv"])
    here = sys.executable
    checked = run([here, "-I", os.path.join(workdir, "provision_trust.py"), "venv", venv], TRUST_TIMEOUT_S)
    trusted = checked["stdout"].strip() == "trusted"
    if not (os.access(python, os.X_OK) and answered(collected) and trusted):
        return {"trust": checked, "gpu": skipped()}
    argv = [python, "-I", os.path.join(workdir, "gpuload.py"), "gpus", "--seconds", str(task["seconds"])]
    env = {**os.environ, **{str(k): str(v) for k, v in task["child_env"].items()}}
    gpu = run([*argv, "--copy-mib", "256"], float(task["timeout"]), env)
    return {"trust": checked, "gpu": gpu}


def host_probe(task: dict[str, Any], workdir: str) -> dict[str, Any]:
    """The host probe on its job file, under the job's deadline."""
    job = os.path.join(workdir, "hostprobe.json")
    with open(job, "w", encoding="utf-8") as handle:
        json.dump(task["host_job"], handle)
    program = os.path.join(workdir, "hostprobe.py")
    return run([sys.executable, "-I", program, job], float(task["host_job_timeout"]))


def gather(task: dict[str, Any], workdir: str) -> dict[str, Any]:
    """Every step of the module docstring, in order, in ``workdir``."""
    for name, text in task["files"].items():
        fd = os.open(
            os.path.join(workdir, os.path.basename(name)), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600
        )
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    collected = collect(task["collector"], task["probes"])
    answer: dict[str, Any] = {"collected": collected, "host_probe": None, "trust": None, "gpu": None}
    if task.get("host_job") is not None:
        answer["host_probe"] = host_probe(task, workdir)
    if task.get("python"):
        answer.update(gpu_steps(task, workdir, collected))
    return answer


def main(task: dict[str, Any]) -> None:
    """Gather in a private temporary directory, print the answer, remove the directory; SIGHUP
    and SIGTERM kill the program running and remove it too."""
    # ssh's end closing (the controller stopped) or a kill ends the running program and cleans up.
    for signum in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, _stop)
    workdir = tempfile.mkdtemp(prefix="provision-verify-")
    try:
        answer = gather(task, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    json.dump(answer, sys.stdout)
    sys.stdout.write("\n")
