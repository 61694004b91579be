#!/usr/bin/env python3
"""Run detection probes concurrently and print their outputs as JSON.

This file is a standalone, stdlib-only script for Python 3.8+: Ansible copies it
to each remote host and runs it there, and :mod:`provision.detect.runner` imports
it to run the same probes in-process. Keep it free of project imports.

Input (stdin, or a file named as the first argument): a JSON list of probes,
``[{"id": "uname", "argv": ["uname", "-a"], "timeout": 10}, ...]`` (timeout in
seconds); an OS family's probe also carries ``"os_ids"``, the ``/etc/os-release`` IDs
of that family, and runs only on a host of it (:func:`for_this_os`). Output (stdout):
``{"uname": {"command": "uname -a", "output": "...", "rc": 0}, ...}``.
Output is stdout and stderr interleaved, as a terminal shows it.
Annotations use ``list[...]``; ``from __future__ import annotations`` keeps that 3.8-safe.
A missing executable gives rc 127 and ``X: not found``; a timeout gives rc 124.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from typing import Any

NOT_FOUND_RC = 127
"""Exit status of a command that does not exist (POSIX shells use the same)."""
TIMEOUT_RC = 124
"""Exit status for a probe that ran past its timeout (as coreutils ``timeout``)."""
NOT_EXECUTABLE_RC = 126

OS_RELEASE = "/etc/os-release"
"""Where the host names its OS (os-release(5)): ``ID`` and ``ID_LIKE`` choose the family probes."""

# C locale so that tools print the untranslated text the parsers expect.
_ENV_OVERRIDES = {"LC_ALL": "C", "LANG": "C"}


def _result(argv: list[str], output: str, rc: int) -> dict[str, Any]:
    return {"command": shlex.join(argv), "output": output, "rc": rc}


_RUNNING: set[subprocess.Popen[bytes]] = set()
"""Probes running now (their sessions), for :func:`kill_running`."""
_STOPPED = [False]
"""Set by :func:`kill_running`: a probe started afterwards is killed at once."""


def kill_running() -> None:
    """Kill every probe still running (each one's whole session), and any started from now on:
    for a process exiting before it collected them (its probe threads are joined before it exits,
    so a probe left running would hold the exit up to its timeout)."""
    _STOPPED[0] = True
    for proc in list(_RUNNING):
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # Kill the whole session: `sh -c` pipelines leave children holding the pipe open.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_probe(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run one command and capture its output.

    Args:
        argv: The command as a list; never passed through a shell by this function.
        timeout: Seconds before the command (and its children) is killed.

    Returns:
        ``{"command": str, "output": str, "rc": int}``.
    """
    env = dict(os.environ, **_ENV_OVERRIDES)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError:
        return _result(argv, f"{argv[0]}: not found\n", NOT_FOUND_RC)
    except PermissionError:
        return _result(argv, f"{argv[0]}: permission denied\n", NOT_EXECUTABLE_RC)
    _RUNNING.add(proc)
    if _STOPPED[0]:  # kill_running ran while this probe was starting: it may have missed it
        _kill_group(proc)
    try:
        return _wait(proc, argv, timeout)
    finally:
        _RUNNING.discard(proc)


def _wait(proc: subprocess.Popen[bytes], argv: list[str], timeout: float) -> dict[str, Any]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, _ = proc.communicate()
        text = out.decode("utf-8", "replace") + f"{argv[0]}: timed out after {timeout:g} s\n"
        return _result(argv, text, TIMEOUT_RC)
    return _result(argv, out.decode("utf-8", "replace"), proc.returncode)


def os_ids(path: str = "") -> list[str]:
    """``ID`` then ``ID_LIKE``'s entries of the os-release file at ``path`` (default
    :data:`OS_RELEASE`); ``[]`` when it is unreadable or names no ID. Never raises."""
    try:
        with open(path or OS_RELEASE, encoding="utf-8", errors="replace") as handle:
            text = handle.read(65536)
    except (OSError, ValueError):
        return []
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip("\"'")
    first = fields.get("ID", "").split()
    return first[:1] + fields.get("ID_LIKE", "").split() if first else []


def for_this_os(probes: list[dict[str, Any]], ids: list[str]) -> list[dict[str, Any]]:
    """The probes a host whose os-release names ``ids`` runs: each probe without ``os_ids``, and the
    family probes of its family, the first of ``ids`` that any probe's ``os_ids`` holds (as
    ``provision.os.family_of`` reads it). A host of no known family (or no readable os-release)
    runs no family probe: detection says why (``packages``: no OS family)."""
    named = {i for p in probes for i in p.get("os_ids", ())}
    family = next((i for i in ids if i in named), None)
    return [p for p in probes if not p.get("os_ids") or family in p["os_ids"]]


def collect(
    probes: list[dict[str, Any]], workers: int = 0, os_release: str = ""
) -> dict[str, dict[str, Any]]:
    """Run every probe of this host's OS concurrently (:func:`for_this_os`).

    Args:
        probes: ``[{"id": str, "argv": [str, ...], "timeout": float, "os_ids"?: [str, ...]}, ...]``.
        workers: Thread count; 0 means one per probe (probes mostly wait on I/O).
        os_release: The os-release file to read the host's family from (default :data:`OS_RELEASE`).

    Returns:
        ``{id: {"command": str, "output": str, "rc": int}}`` in the input order; another OS family's
        probes are left out (never run).
    """
    if any(p.get("os_ids") for p in probes):
        probes = for_this_os(probes, os_ids(os_release))
    if not probes:
        return {}
    # Here, not at the top: parsers import this module's exit codes, and concurrent.futures (with
    # logging) is 3-6 ms of an offline `plan --from-raw` that runs no probe.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers or len(probes)) as pool:
        futures = [pool.submit(run_probe, list(p["argv"]), float(p["timeout"])) for p in probes]
        # zip(strict=) needs 3.10 and this script runs on 3.8 hosts; the lengths match by construction.
        return {p["id"]: f.result() for p, f in zip(probes, futures)}  # noqa: B905


def main(args: list[str]) -> int:
    """Read probes from ``args[0]`` (a file) or stdin and print the JSON results."""
    if args:
        with open(args[0], encoding="utf-8") as handle:
            probes = json.load(handle)
    else:
        probes = json.load(sys.stdin)
    json.dump(collect(probes), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
