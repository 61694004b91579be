"""Run ``playbooks/lock.yml`` (the ``provision_lock`` module) on hosts: write, update, read locks.

One module for this machine and for an inventory. Writes always run the play (this machine is the
inventory ``localhost ansible_connection=local``, as apply's). Reads, and verify's record, do not
where they need not: this machine's locks are read by the module's own functions in this process
(:func:`read_local`, as the same user either way), and an inventory host that
:func:`provision.detect.direct.route` reaches by one command runs the module's text there, as
root (:mod:`provision.lock.transport`); only the other hosts go through the play, which costs
~2 s of ansible-playbook start-up around reading two files. Each host's arguments travel as
data: in the play's extravar ``provision_lock_args``, or a JSON literal on the direct
transport's stdin (never inside a template or a shell string).
"""

from __future__ import annotations

import functools
import importlib.util
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from provision import ansible, trust
from provision.ansible import local_inventory, refuse_templates
from provision.errors import FactsError, Interrupted, ProvisionError, first_error
from provision.files import check_inventory
from provision.lock.model import Lock
from provision.resources import data_dir

LOCK_TASK = "Write, update or read the lock under /var/lib/provision"
TRUST_TASK = "Refuse to read locks that a user other than root or the invoking user could have written"
"""The play's check of what it reads by the trust rule (:mod:`provision.trust`); its failure is the host's."""
LOCK_DIRECTORY = Path("/var/lib/provision")
"""Where the module keeps a host's locks (its ``directory`` default)."""
LOCAL = "localhost"
"""This machine's name in the results, as in the local inventory the play would use."""


class LockReadError(ProvisionError):
    """A host's locks could not be read (unreachable, failed, or not a lock document)."""


@dataclass(frozen=True)
class HostLocks:
    """What one host holds: its current lock, every numbered lock, and versions apt serves.

    Attributes:
        host: The inventory hostname.
        current: ``/var/lib/provision/lock.json``; None when no apply converged there yet.
        history: Every lock by number, oldest first.
        served: Package name -> versions apt can install (only for the names asked).
    """

    host: str
    current: Lock | None
    history: tuple[Lock, ...]
    served: Mapping[str, tuple[str, ...]]

    def number(self, n: int) -> Lock | None:
        """The lock numbered ``n``, or None."""
        return next((lock for lock in self.history if lock.number == n), None)


def run_lock_play(
    inventory: Path | None,
    args: Mapping[str, dict[str, Any]],
    data_dir_: Path,
    *,
    default: dict[str, Any] | None = None,
    limit: str | None = None,
    become: bool = True,
) -> dict[str, dict[str, Any] | str]:
    """Run the lock play; host -> the module's result, or why it failed (one line).

    Args:
        inventory: The Ansible inventory; None for this machine.
        args: Per host, the module's arguments; the run is limited to these hosts unless
            ``default`` is given.
        data_dir_: ansible-runner's private data directory (an apply's run directory).
        default: The arguments for every host without its own (with ``limit``).
        limit: An Ansible host pattern, with ``default``.
        become: Run the module as root (writing needs it; reading a 0644 lock does not).

    Raises:
        LockReadError: ansible-playbook failed before any host reported.
        Interrupted: Ctrl-C stopped the play (ansible-runner's status ``canceled``).
    """
    refuse_templates({"args": dict(args), "default": default}, "lock")
    if inventory is not None:
        check_inventory(inventory)
    inv = inventory if inventory is not None else local_inventory(data_dir_)
    played = ansible.run_play(
        data_dir_,
        "lock.yml",
        inv,
        project_dir=data_dir("playbooks"),
        extravars={
            "provision_lock_args": dict(args),
            "provision_lock_default": default,
            "provision_lock_become": become,
        },
        limit=limit if default is not None else ",".join(args),
    )
    if played.interrupted:
        raise Interrupted(left_running=played.left_running)
    results = _results(played.events)
    if not results and played.rc != 0:
        raise LockReadError(
            f"ansible-playbook failed (rc {played.rc}) before any host reported: {played.stdout_tail}"
        )
    for host in args:
        results.setdefault(host, f"no result from Ansible ({played.stdout_tail})")
    return results


def record_verified(
    inventory: Path | None,
    results: Mapping[str, Mapping[str, Any]],
    data_dir_: Path,
    directory: Path = LOCK_DIRECTORY,
) -> dict[str, dict[str, Any] | str]:
    """Each host's verify result recorded in its current lock (the module's ``state: verified``):
    this machine in this process, inventory hosts over the direct transport as root
    (:func:`provision.detect.direct.route`, ``as_root``) where they have a command, by the lock
    play otherwise; host -> the module's result, or why it failed (one line).

    ``directory``: where the locks are on each host reached without the play (the play's module
    keeps its default, the same directory).

    Raises:
        LockReadError: The lock play failed before any host reported.
        Interrupted: Ctrl-C stopped the play.
    """
    from provision.detect import direct
    from provision.lock import transport

    refuse_templates({"args": dict(results)}, "lock")
    if inventory is None:
        return {h: _verified_here(dict(r), directory) for h, r in results.items()}
    check_inventory(inventory)
    commands = direct.root_commands(str(inventory), results)
    programs = {h: transport.verified_program(results[h], directory) for h in commands}
    found = transport.run(commands, programs, LOCK_TASK)
    rest = {h: {"state": "verified", "verify": dict(r)} for h, r in results.items() if h not in commands}
    return found | (run_lock_play(inventory, rest, data_dir_) if rest else {})


def _verified_here(result: dict[str, Any], directory: Path) -> dict[str, Any] | str:
    module = _lock_module()
    try:
        changed, found = module.verified(directory, result)
    except (module.LockError, OSError) as exc:
        return f"failed: provision lock: {exc}"
    return {"changed": changed, "lock": found}


def _results(events: Iterable[ansible.Event]) -> dict[str, dict[str, Any] | str]:
    results: dict[str, dict[str, Any] | str] = {}
    for event in events:
        data = event.get("event_data", {})
        host, kind = data.get("host"), event.get("event")
        ours = data.get("task") in (LOCK_TASK, TRUST_TASK)
        if host is None or (not ours and kind != "runner_on_unreachable"):
            continue
        if kind == "runner_on_ok" and data.get("task") == LOCK_TASK:
            results[host] = dict(data.get("res") or {})
        elif kind in ("runner_on_failed", "runner_on_unreachable"):
            word = "unreachable" if kind == "runner_on_unreachable" else "failed"
            results[host] = f"{word}: {ansible.failure_message(data.get('res') or {})}"
    return results


def read_locks(
    inventory: Path | None, limit: str | None = None, *, directory: Path | None = None
) -> dict[str, HostLocks]:
    """Every host's locks (the inventory's hosts matching ``limit``, in inventory order, or this
    machine): each host over the direct transport where :func:`provision.detect.direct.route`
    gives it a command, through the lock play otherwise.

    ``directory``: where the locks are on the hosts reached without the play (default
    :data:`LOCK_DIRECTORY`; the play's module keeps that default).

    Raises:
        LockReadError: A host could not be read, or holds a lock this version cannot read.
        FactsError: The inventory is missing, or ``limit`` names a host or group it does not have.
    """
    if inventory is not None and limit is not None:
        from provision.inventory import check_limit

        check_limit(inventory, limit, error=FactsError)  # Ansible would only warn and read the others
    if inventory is None and limit in (None, LOCAL):
        return {LOCAL: _host_locks(LOCAL, read_local())}
    if inventory is not None:
        results = _read_hosts(inventory, limit, None, directory or LOCK_DIRECTORY)
    else:
        results = _played(None, {}, default={"state": "read"}, limit=limit)
    if not results:
        raise LockReadError("no host to read the lock from (check the inventory and --limit)")
    return {h: _host_locks(h, r) for h, r in results.items()}


def served_versions(
    inventory: Path | None, names: Mapping[str, list[str]], *, directory: Path | None = None
) -> dict[str, HostLocks]:
    """Per host, its locks and the versions apt can install of the package ``names[host]``, over
    the transport of :func:`read_locks` (``directory`` as there).

    Raises:
        LockReadError: A host could not be read.
    """
    if inventory is None and set(names) <= {LOCAL}:
        return {h: _host_locks(h, read_local(list(n))) for h, n in names.items()}
    if not names:
        return {}
    if inventory is not None:
        results = _read_hosts(inventory, ",".join(names), names, directory or LOCK_DIRECTORY)
    else:
        results = _played(None, {h: {"state": "read", "served": list(n)} for h, n in names.items()})
    return {h: _host_locks(h, results[h]) for h in names}


def _read_hosts(
    inventory: Path, pattern: str | None, served: Mapping[str, list[str]] | None, directory: Path
) -> dict[str, dict[str, Any] | str]:
    """``state: read`` on the hosts of ``pattern``: host -> the module's result or why it failed,
    in inventory order. ``served``: host -> package names (only those hosts); None: every host
    of ``pattern``, no names.

    The hosts without a command go through one lock play; so does every host when Ansible cannot
    resolve the inventory here (the play then says why, in Ansible's words).
    """
    from provision.detect import direct
    from provision.lock import transport

    check_inventory(inventory)
    found = direct.routes(str(inventory), pattern, as_root=True) if direct.enabled() else {}
    if not found and served is None:
        return _played(inventory, {}, default={"state": "read"}, limit=pattern)
    wanted = dict(served) if served is not None else {h: [] for h in found}
    commands = {h: r.argv for h, r in found.items() if r.argv is not None and h in wanted}
    programs = {h: transport.read_program(wanted[h], directory) for h in commands}
    results = transport.run(commands, programs, LOCK_TASK)
    rest = {h: {"state": "read", "served": list(n)} for h, n in wanted.items() if h not in commands}
    if rest:
        results |= _played(inventory, rest)
    return {h: results[h] for h in found if h in results} | results


def _played(
    inventory: Path | None,
    args: Mapping[str, dict[str, Any]],
    *,
    default: dict[str, Any] | None = None,
    limit: str | None = None,
) -> dict[str, dict[str, Any] | str]:
    """:func:`run_lock_play` in a scratch run directory, as root on an inventory's hosts (the
    locks are root's), as this user on this machine."""
    with tempfile.TemporaryDirectory(prefix="provision-lock-") as tmp:
        return run_lock_play(
            inventory, args, Path(tmp), default=default, limit=limit, become=inventory is not None
        )


def read_local(names: list[str] | None = None) -> dict[str, Any] | str:
    """This machine's locks as the module's ``state: read`` returns them (``{current, history,
    served}``, ``served`` for the package ``names``), read by the module's own functions in this
    process; or why they could not be read (one line, as from the play)."""
    module = _lock_module()
    for check, path in (("file", LOCK_DIRECTORY / "lock.json"), ("tree", LOCK_DIRECTORY / "locks")):
        if (why := trust.problem(check, str(path), missing_ok=True)) is not None:
            return f"failed: not trusted: {why} ({trust.DOC})"
    try:
        return {
            "current": module.read_json(LOCK_DIRECTORY / "lock.json"),
            "history": module.history(LOCK_DIRECTORY),
            "served": module.served(names or []),
        }
    except OSError as exc:
        return f"failed: provision lock: {exc}"


@functools.cache
def _lock_module() -> ModuleType:
    """``playbooks/library/provision_lock.py`` (standard library only until its ``main``)."""
    path = data_dir("playbooks") / "library" / "provision_lock.py"
    spec = importlib.util.spec_from_file_location("provision_lock_module", path)
    if spec is None or spec.loader is None:  # pragma: no cover - a file path always has a loader
        raise LockReadError(f"{path}: cannot load the lock module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _host_locks(host: str, result: dict[str, Any] | str) -> HostLocks:
    if isinstance(result, str):
        raise LockReadError(f"{host}: cannot read the lock: {result}")
    try:
        current = Lock.model_validate(result["current"]) if result.get("current") else None
        history = tuple(Lock.model_validate(doc) for doc in result.get("history") or ())
    except ValidationError as exc:
        raise LockReadError(f"{host}: the lock is not one this version reads ({first_error(exc)})") from None
    served = {name: tuple(versions) for name, versions in (result.get("served") or {}).items()}
    return HostLocks(host, current, history, served)
