"""Start the GPU load program in the spec's venv, under deadlines, and read its JSON.

Every child runs as ``<venv>/bin/python -I gpuload.py MODE ...`` (argv list, no shell) in a new
session, so a timeout kills it with everything it started. The environment keeps NVLink
multicast off (``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``,
``NVSHMEM_DISABLE_NVLS=1``: the shared machines require it) and numbers CUDA devices in PCI bus
order so that torch's index is nvidia-smi's index.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from provision import trust
from provision.detect.facts import Unknown
from provision.detect.unknown import NotRun
from provision.verify.runs import AllReduceRun, GpuRun, RankResult

SCRIPT = Path(__file__).with_name("gpuload.py")
CHILD_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    "PYTHONUNBUFFERED": "1",
}
IMPORT_TORCH_S = 30.0
"""Allowance for interpreter start and ``import torch``.

4 s measured on the H200: docs/device-runs/h200-measurements.md#probes.
"""


def child_env() -> dict[str, str]:
    """This process's environment with :data:`CHILD_ENV` forced."""
    return {**os.environ, **CHILD_ENV}


def python_of(venv: str | None) -> Path | NotRun:
    """``<venv>/bin/python``, or why it is not run (missing, or refused by the trust rule)."""
    if venv is None:
        return NotRun(
            unknown="the spec has no python.venv, so there is no torch to run GPU work with",
            fix="Name the venv in the spec's python section (provision apply creates it) to measure GPUs.",
        )
    python = Path(venv) / "bin" / "python"
    if not os.access(python, os.X_OK):
        return NotRun(
            unknown=f"{python}: no such interpreter (create the venv with provision apply)",
            fix="Create the venv with provision apply, then run verify again.",
        )
    if (why := trust.problem("venv", venv)) is not None:
        return untrusted_venv(venv, why)
    return python


def untrusted_venv(venv: str, why: str) -> NotRun:
    """The GPU program not run because the trust rule refused ``venv`` for the reason ``why``."""
    return NotRun(
        unknown=f"{venv}/bin/python is not run: the venv is not trusted: {why} ({trust.DOC})",
        fix=(
            f"Nothing on the GPUs was measured: make {venv} root's or yours and writable by no one else "
            "(chown, chmod -R go-w), or let provision apply recreate it; then run verify again."
        ),
    )


def gpu_timeout(gpu_count: int, seconds: float) -> float:
    """Deadline of the ``gpus`` mode: torch import, then per GPU the load, copies and margin (s)."""
    return IMPORT_TORCH_S + max(gpu_count, 1) * (1.5 * seconds + 20.0)


def run_gpus(
    python: Path,
    seconds: float,
    timeout: float,
    copy_mib: int = 256,
    on_progress: Callable[[str], None] | None = None,
) -> GpuRun | Unknown:
    """Run the ``gpus`` mode; an Unknown names a timeout, a crash or unreadable output.

    ``on_progress`` gets each progress line of the program (``GPU 0: bf16 load for 5 s``) while
    it runs, about five times a second at most.
    """
    argv = [str(python), "-I", str(SCRIPT), "gpus", "--seconds", str(seconds), "--copy-mib", str(copy_mib)]
    with tempfile.TemporaryDirectory(prefix="provision-verify-") as tmp:
        proc, out, err = _start(argv, Path(tmp), "gpus")
        timed_out = not wait_watching(proc, timeout, err, on_progress or (lambda _text: None))
        return gpu_run_from(proc.returncode, _read(out), _read(err), timed_out, timeout)


POLL_S = 0.2
"""How often a running GPU program's stderr is read for progress lines."""


def wait_watching(
    proc: subprocess.Popen[bytes], timeout: float, err: Path, on_progress: Callable[[str], None]
) -> bool:
    """Wait for ``proc`` until ``timeout`` (then kill it), passing each progress line that appears
    in its stderr file ``err`` to ``on_progress`` as it comes. True if it ended in time."""
    deadline = time.monotonic() + timeout
    offset = 0
    while True:
        try:
            proc.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            ended = True
        except subprocess.TimeoutExpired:
            ended = False
        offset = _new_progress(err, offset, on_progress)
        if ended:
            return True
        if time.monotonic() >= deadline:
            _kill(proc)
            return False


def _new_progress(err: Path, offset: int, on_progress: Callable[[str], None]) -> int:
    """Report the complete lines of ``err`` after byte ``offset``; returns the new offset."""
    try:
        with err.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except OSError:
        return offset
    complete = chunk[: chunk.rfind(b"\n") + 1]
    for text in progress_lines(complete.decode("utf-8", errors="replace")):
        on_progress(text)
    return offset + len(complete)


def progress_lines(stderr: str) -> list[str]:
    """The progress texts in the GPU program's stderr (lines ``provision-progress: <text>``)."""
    prefix = "provision-progress:"  # gpuload.PROGRESS; gpuload runs standalone, so it is not imported
    return [line[len(prefix) :].strip() for line in stderr.splitlines() if line.startswith(prefix)]


def gpu_run_from(rc: int, stdout: str, stderr: str, timed_out: bool, timeout: float) -> GpuRun | Unknown:
    """The ``gpus`` mode's result from its exit status and output, wherever it ran (here or over Ansible)."""
    if timed_out:
        return Unknown(unknown=f"GPU load program did not finish within {timeout:.0f} s and was killed")
    doc = last_json(stdout)
    if doc is None:
        return Unknown(unknown=f"GPU load program exited {rc} without a result: {tail(stderr)}")
    try:
        return GpuRun.model_validate(doc)
    except ValidationError as exc:
        return Unknown(unknown=f"GPU load program output not understood: {str(exc).splitlines()[0]}")


def run_allreduce(
    python: Path,
    world: int,
    *,
    backend: str = "nccl",
    timeout: float = 60.0,
    mib: int = 256,
    iters: int = 20,
    hang: bool = False,
) -> AllReduceRun:
    """All-reduce across ``world`` processes (one per GPU), all killed at ``timeout`` seconds.

    A rank that never returns makes the others block inside the collective; the deadline turns
    that hang into ``timed_out`` instead of a stuck verify (FF-14). ``hang`` is a test hook.
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="provision-allreduce-") as tmp:
        base = [str(python), "-I", str(SCRIPT), "allreduce", "--world", str(world)]
        base += ["--init-file", str(Path(tmp) / "store"), "--backend", backend, "--mib", str(mib)]
        base += ["--iters", str(iters), "--timeout", str(timeout), *(["--hang"] if hang else [])]
        started_ranks = [_start([*base, "--rank", str(r)], Path(tmp), f"rank{r}") for r in range(world)]
        finished = _wait_all([p for p, _, _ in started_ranks], timeout)
        ranks, failures = _collect(started_ranks)
    return AllReduceRun(
        world=world,
        backend=backend,
        timeout_s=timeout,
        seconds=time.monotonic() - started,
        timed_out=not finished,
        ranks=tuple(ranks),
        failures=tuple(failures),
    )


def _collect(
    started: Sequence[tuple[subprocess.Popen[bytes], Path, Path]],
) -> tuple[list[RankResult], list[str]]:
    ranks: list[RankResult] = []
    failures: list[str] = []
    for rank, (proc, out, err) in enumerate(started):
        doc = last_json(_read(out))
        if doc is None:
            failures.append(f"rank {rank}: exit {proc.returncode}, no result: {tail(_read(err))}")
            continue
        try:
            ranks.append(RankResult.model_validate({"rank": rank, **doc}))
        except ValidationError as exc:
            failures.append(f"rank {rank}: output not understood: {str(exc).splitlines()[0]}")
    return ranks, failures


def _start(argv: list[str], tmp: Path, name: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out, err = tmp / f"{name}.out", tmp / f"{name}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = _popen(argv, stdout, stderr)
    return proc, out, err


def _popen(argv: list[str], stdout: IO[bytes], stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=child_env(), start_new_session=True
    )


def _wait_all(procs: Sequence[subprocess.Popen[bytes]], timeout: float) -> bool:
    """Wait for every process until one shared deadline; on expiry kill them all. True if all ended."""
    deadline = time.monotonic() + timeout
    try:
        for proc in procs:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for proc in procs:
            _kill(proc)
        return False
    return True


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):  # it may have ended since poll()
            os.killpg(proc.pid, signal.SIGKILL)  # the child's own session: it and what it started
    proc.wait()


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def last_json(stdout: str) -> dict[str, Any] | None:
    """The last line of ``stdout`` that is a JSON object (libraries may print before it)."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):  # the venv's program may print anything
            continue
        if isinstance(doc, dict):
            return doc
    return None


def tail(text: str, limit: int = 300) -> str:
    """The last non-blank line of ``text`` (a traceback's message), cut to ``limit`` characters."""
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    return (lines[-1] if lines else "no output")[-limit:]
