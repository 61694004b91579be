"""``provision lock show``: each host's current lock and its numbered history, as text or JSON."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from provision.jsonout import HOSTS_FORMAT
from provision.lock.model import LOCK_FILE, Lock
from provision.lock.store import HostLocks


def lock_json(found: dict[str, HostLocks]) -> dict[str, Any]:
    """``{format_version: 2, hosts: [{host, current: Lock | null, history: [{number, created_at,
    spec, spec_digest, verify_passed}]}]}`` (:data:`provision.jsonout.HOSTS_FORMAT`): the current
    lock whole, the history as one line each. Format 1 keyed the hosts by name
    (:func:`provision.jsonout.host_rows` reads both)."""
    return {
        "format_version": HOSTS_FORMAT,
        "hosts": [
            {
                "host": host,
                "current": locks.current.model_dump(mode="json") if locks.current else None,
                "history": [_entry(lock) for lock in locks.history],
            }
            for host, locks in found.items()
        ],
    }


def _entry(lock: Lock) -> dict[str, Any]:
    return {
        "number": lock.number,
        "created_at": lock.created_at,
        "spec": lock.spec.name,
        "spec_digest": lock.spec_digest,
        "verify_passed": lock.verify.passed if lock.verify else None,
    }


def render_locks(found: dict[str, HostLocks], console: Console) -> None:
    """Per host: the current lock's versions, then one line per numbered lock."""
    for host, locks in found.items():
        if locks.current is None:
            console.print(f"{host}: no lock in {LOCK_FILE} (no apply has converged there yet)")
            continue
        _render_current(host, locks.current, console)
        console.print("  history (`provision rollback --to N` returns to one):")
        for lock in locks.history:
            mark = " (current)" if lock.number == locks.current.number else ""
            console.print(
                f"    {lock.number}: {lock.created_at} spec {lock.spec.name} "
                f"{lock.spec_digest[:19]} {len(lock.packages)} packages{mark}"
            )


def _render_current(host: str, lock: Lock, console: Console) -> None:
    console.print(
        f"[bold]{host}[/]: lock {lock.number}, {lock.created_at}, spec {lock.spec.name} "
        f"({escape(lock.spec_path or 'no file')}, {lock.spec_digest})"
    )
    if lock.repository:
        console.print(f"  repository {escape(lock.repository.url)} key {lock.repository.fingerprint}")
    for p in lock.packages:
        console.print(f"  {p.name} {p.version}{' (held)' if p.hold else ''}")
    if lock.venv:
        wheels = ", ".join(f"{w.name} {w.version}" for w in lock.venv.wheels)
        console.print(f"  venv {escape(lock.venv.path)}: {escape(wheels) or 'no wheels'}")
    verify = lock.verify
    said = "not run" if verify is None else f"{'passed' if verify.passed else 'failed'} at {verify.at}"
    console.print(f"  verify: {said}")
