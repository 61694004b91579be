"""Running host commands for the harness: argv lists only, never a shell string."""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

Argv = Sequence[str | os.PathLike[str]]


class HarnessError(RuntimeError):
    """A harness step failed; the message carries the command and its output."""


def run(
    argv: Argv,
    *,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` and capture its output as text.

    Raises:
        HarnessError: when ``check`` is true and the command exits non-zero; the message
            holds the argv, the exit status and the tail of stderr and stdout.
    """
    proc = subprocess.run(
        [os.fspath(a) for a in argv],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else None,
        input=input_text,
        cwd=cwd,
        check=False,
    )
    if check and proc.returncode != 0:
        raise HarnessError(
            f"{[os.fspath(a) for a in argv]} exited {proc.returncode}\n"
            f"stderr: {proc.stderr[-3000:]}\nstdout: {proc.stdout[-3000:]}"
        )
    return proc


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` so concurrent pytest sessions build a cache once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
