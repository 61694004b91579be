"""The one place provision runs Ansible: a playbook through ansible-runner, its outcome as data.

Detection, apply and verify all come here, so every run gets the same conventions:

* ``PATH`` starts with this interpreter's ``bin/``, so the ``ansible-playbook`` installed beside
  provision runs, not whichever one is first on the user's PATH.
* ssh's ControlPath sockets go to a short temporary directory (a socket path must stay under
  108 bytes; private data directories can be deep), removed after the run.
* Host keys are checked (ansible-runner turns checking off unless told): a new machine is never
  trusted silently. Inventories that mean otherwise say so in ``ansible_ssh_common_args``.
* Extravars are passed in memory (``suppress_env_files=True``): nothing stale in ``env/`` is
  ever reloaded and no secret lands on disk there.
* A local-connection host that names no interpreter runs the one running provision, as
  Ansible's implicit localhost does (:mod:`provision.connection`), never one that interpreter
  discovery found on the controller's PATH.
* Results are read from ansible-runner's events and stats, never scraped from stdout; a failed
  playbook is a status, not an exception.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from provision import gcpolicy, interrupts
from provision.connection import inventory_source, inventory_sources
from provision.errors import ApplyError, UntrustedError

Event = dict[str, Any]
"""One ansible-runner event (``event``, ``event_data``, ...), as in ``artifacts/<ident>/job_events``."""
EventHandler = Callable[[Event], None]

STAT_KEYS = ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored")
"""The per-host counters of ``playbook_on_stats`` (``dark``: unreachable)."""


@dataclass(frozen=True)
class PlayResult:
    """What one ansible-runner run did.

    Attributes:
        status: ansible-runner's status: ``successful``, ``failed``, ``timeout`` or ``canceled``.
        rc: ansible-playbook's exit code.
        events: Every event of the run, in order.
        stats: ``playbook_on_stats`` counters: counter name -> host -> count (see :data:`STAT_KEYS`);
            empty when the play never reached its end.
        stdout_tail: The last line ansible-playbook printed (``no output`` when it printed none),
            the one line worth showing when the run failed before any host reported.
        left_running: After Ctrl-C, each process of the run still alive when it returned, as
            ``pid <n>: <command line>`` (one it may not signal, e.g. another user's); normally empty.
    """

    status: str
    rc: int
    events: tuple[Event, ...] = ()
    stats: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    stdout_tail: str = "no output"
    left_running: tuple[str, ...] = ()

    @property
    def succeeded(self) -> bool:
        """Whether ansible-playbook finished with status ``successful``."""
        return self.status == "successful"

    @property
    def interrupted(self) -> bool:
        """Whether the run was stopped by Ctrl-C (ansible-runner's status ``canceled``)."""
        return self.status == "canceled"

    def count(self, counter: str, host: str) -> int:
        """How many tasks of ``host`` ended in ``counter`` (``ok``, ``changed``, ``failures``, ``dark``)."""
        return int(self.stats.get(counter, {}).get(host, 0))

    def stat_hosts(self) -> set[str]:
        """Every host named in the final stats."""
        return {host for counts in self.stats.values() for host in counts}


def run_play(
    private_data_dir: Path,
    playbook: str,
    inventory: Path | str,
    *,
    project_dir: Path | None = None,
    extravars: Mapping[str, Any] | None = None,
    limit: str | None = None,
    tags: Iterable[str] = (),
    forks: int | None = None,
    on_event: EventHandler | None = None,
    keep: bool = True,
    pipelining: bool = False,
) -> PlayResult:
    """Run ``playbook`` through ansible-runner with the conventions of the module docstring.

    Args:
        private_data_dir: ansible-runner's directory; its ``artifacts/`` keep the events, stdout,
            rc and status, and ``tmp/`` is Ansible's local temporary directory.
        playbook: The playbook's file name, relative to the project directory.
        inventory: An inventory file or directory, or INI inventory text.
        project_dir: Where the playbook and its roles are; default ``<private_data_dir>/project``.
        extravars: Variables for every host, passed in memory.
        limit: An Ansible host pattern (``gpu:!gpu07``, ``a,b``); None for every host.
        tags: Only tasks with one of these tags run; empty for all.
        forks: Hosts Ansible works on at once; None keeps Ansible's default (5).
        on_event: Called with each event as it arrives (live progress).
        keep: Keep the events (on disk and in :attr:`PlayResult.events`); False when ``on_event``
            consumes them, so that a large fleet's outputs are not held twice (``events`` is then
            empty; ``stats`` are still read).
        pipelining: Send modules over ssh's stdin instead of copying them first (one ssh command
            per task, not three); only for plays without ``become``, where sudo's ``requiretty``
            cannot break it (Ansible's documentation of ``ANSIBLE_PIPELINING``).

    Returns:
        The run's status, rc, events and stats.
    """
    import ansible_runner  # deferred: slow to import, and detect and plan work without Ansible

    check_run_inputs(private_data_dir, inventory, project_dir)
    sources = inventory_sources(private_data_dir, inventory, limit)
    gcpolicy.long_running()
    run_id = secrets.token_hex(16)
    left: list[str] = []  # processes of an interrupted run still alive after it was stopped
    with (
        tempfile.TemporaryDirectory(prefix="provision-cp-", ignore_cleanup_errors=True) as control,
        _interruptible() as interrupted,
    ):
        runner = ansible_runner.run(
            private_data_dir=str(private_data_dir),
            project_dir=str(project_dir) if project_dir is not None else None,
            playbook=playbook,
            inventory=sources,
            extravars=dict(extravars or {}),
            limit=limit,
            tags=",".join(tags) or None,
            forks=forks,
            envvars=ansible_env(private_data_dir, Path(control))
            | {RUN_ID_VAR: run_id}
            | ({"ANSIBLE_PIPELINING": "True"} if pipelining else {}),
            suppress_env_files=True,
            quiet=True,
            event_handler=_keep(on_event, keep),
            cancel_callback=_stop_on(interrupted, run_id, left),
            # How often ansible-runner asks cancel_callback (seconds); the callback then stops every
            # process of the run, so nothing is left running behind an interrupted apply.
            settings={"pexpect_timeout": CANCEL_POLL_S},
        )
        return result_of(runner, tuple(left))


CANCEL_POLL_S = 0.5
"""Seconds between ansible-runner's checks for a Ctrl-C (its default is 5)."""


STOP_GRACE_S = 3.0
"""Seconds the processes of an interrupted run get to end after SIGTERM before SIGKILL."""

GONE_WAIT_S = 5.0
"""Seconds to wait, after SIGKILL, for the processes of an interrupted run to be gone."""

RUN_ID_VAR = "PROVISION_RUN_ID"
"""The environment variable that marks every process of one run (its value is unique per run)."""


def _stop_on(interrupted: threading.Event, run_id: str, left: list[str]) -> Callable[[], bool]:
    """ansible-runner's cancel callback: once ``interrupted`` is set, end every process of this run.

    ansible-runner kills only ansible-playbook's own process group, but ansible-core's workers
    start their own sessions (2.19: ``WorkerProcess`` calls ``setsid``), so they and the commands
    they run (ssh, sleep, apt on a local host) would outlive it; see :func:`_end_run`. What is
    still alive afterwards goes to ``left`` (``pid <n>: <command line>``).
    """

    def cancel() -> bool:
        if not interrupted.is_set():
            return False
        left[:] = _end_run(run_id)
        return True

    return cancel


@dataclass(frozen=True)
class _Proc:
    """The fields of ``/proc/<pid>/stat`` (proc(5)) that tie a process to a run."""

    state: str
    ppid: int
    pgrp: int
    session: int
    start: int
    """Start time after boot, in clock ticks: a pid's reuse by another process changes it."""


def _end_run(run_id: str) -> list[str]:
    """End every process of the run marked ``run_id``; those still alive after all (normally none).

    A process belongs to the run when its environment holds ``RUN_ID_VAR=run_id`` (set for
    ansible-playbook, inherited by all it starts, detached or reparented ones included, unless a
    command clears its environment, as sudo does), or when its parent, session or process group
    is a process of the run (which covers those that cleared it). Each phase first stops the run
    (SIGSTOP, reading /proc again until no new process appears: a stopped process can neither
    fork nor exit, so nothing forked meanwhile is missed or reparented out of reach), then sends
    its signal and SIGCONT: SIGTERM, with :data:`STOP_GRACE_S` to end (processes found then get
    it too), then SIGKILL, waiting up to :data:`GONE_WAIT_S` until all are gone. A pid is only
    signalled while its start time is the one first seen, so a reused pid is never hit.

    Returns:
        ``pid <n>: <command line>`` for each process of the run still alive at the end.
    """
    members: dict[int, int] = {}  # pid -> start time
    try:
        for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, GONE_WAIT_S)):
            _freeze(run_id, members)
            _signal(members, sig)
            _signal(members, signal.SIGCONT)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                _signal(_gather(run_id, members), sig)
                if not any(_alive(pid, start) for pid, start in members.items()):
                    return []
                time.sleep(0.05)
    except BaseException:  # a second Ctrl-C (KeyboardInterrupt): leave nothing stopped behind
        _signal(members, signal.SIGKILL)
        raise
    return [f"pid {pid}: {_cmdline(pid)}" for pid, start in members.items() if _alive(pid, start)]


def _freeze(run_id: str, members: dict[int, int]) -> None:
    """SIGSTOP the run's processes, and any found since, until a read of /proc finds no new one.

    Each round waits (briefly) until the processes signalled are stopped: one still in ``fork``
    when signalled would otherwise start a child after the read that looked for it.
    """
    new = dict(members)
    for _ in range(100):  # bounded, should anything fork faster than it is stopped
        stopping = _signal(new, signal.SIGSTOP)
        deadline = time.monotonic() + 1.0  # a process in uninterruptible sleep stops when it leaves it
        while time.monotonic() < deadline and any(_running(pid, stopping[pid]) for pid in stopping):
            time.sleep(0.005)
        new = _gather(run_id, members)
        if not new:
            return


def _gather(run_id: str, members: dict[int, int]) -> dict[int, int]:
    """Add the run's processes not yet in ``members`` to it; returns those (pid -> start time)."""
    procs = _processes()
    marker = f"\0{RUN_ID_VAR}={run_id}\0".encode()

    def ours(pid: int) -> bool:  # a member, and not another process that got its pid since
        return pid in members and (pid not in procs or procs[pid].start == members[pid])

    procs.pop(os.getpid(), None)
    new: dict[int, int] = {}
    for pid, proc in procs.items():
        if pid not in members and marker in b"\0" + _read(pid, "environ"):
            new[pid] = members[pid] = proc.start
    grew = True
    while grew:  # the children of a new member are members too
        grew = False
        for pid, proc in procs.items():
            if pid not in members and any(map(ours, (proc.ppid, proc.session, proc.pgrp))):
                new[pid] = members[pid] = proc.start
                grew = True
    return new


def _signal(pids: Mapping[int, int], sig: signal.Signals) -> dict[int, int]:
    """Send ``sig`` to each pid still alive with the start time given (pid -> start time); those
    it reached (a process of another user, e.g. under sudo, is not)."""
    sent: dict[int, int] = {}
    for pid, start in pids.items():
        if _alive(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                sent[pid] = start
    return sent


def _processes() -> dict[int, _Proc]:
    """Every process: pid -> its /proc/<pid>/stat fields (proc(5))."""
    found: dict[int, _Proc] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (proc := _stat(int(entry.name))):
            found[int(entry.name)] = proc
    return found


def _stat(pid: int) -> _Proc | None:
    # After the command name in parentheses (which may hold spaces and parentheses): state (3),
    # ppid (4), pgrp (5), session (6), ..., starttime (22), as numbered in proc(5).
    fields = _read(pid, "stat").decode(errors="replace").rpartition(")")[2].split()
    if len(fields) < 20:
        return None
    return _Proc(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def _read(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:  # gone, or another user's
        return b""


def _alive(pid: int, start: int) -> bool:
    """Whether ``pid`` is still the process that started at ``start`` and has not exited."""
    proc = _stat(pid)
    return proc is not None and proc.start == start and proc.state not in ("Z", "X", "x")


def _running(pid: int, start: int) -> bool:
    """Whether ``pid`` (started at ``start``) is alive and not stopped yet."""
    proc = _stat(pid)
    return proc is not None and proc.start == start and proc.state not in ("Z", "X", "x", "T", "t")


def _cmdline(pid: int) -> str:
    return _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip() or "?"


@contextlib.contextmanager
def _interruptible() -> Iterator[threading.Event]:
    """While Ansible runs, Ctrl-C (SIGINT) sets the event instead of raising KeyboardInterrupt.

    ansible-playbook runs in its own session (pexpect's pty), so the terminal's SIGINT reaches only
    this process; a KeyboardInterrupt here would abandon the child, blocked on its pipe (issue 13).
    Through the event ansible-runner kills the child's process group and the run ends ``canceled``.
    A second Ctrl-C raises KeyboardInterrupt as usual. Outside the main thread nothing changes.
    Afterwards SIGINT is Python's default handler where the process was started with it ignored
    (:func:`provision.interrupts.own_sigint`), not the inherited ``SIG_IGN``.
    """
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    interrupts.own_sigint()

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


RUNNER_INPUTS = ("env", "inventory", "project")
"""What ansible-runner reads from a private data directory (``env/`` holds its settings, command
line and passwords): each must be trusted before it runs."""


def check_run_inputs(private_data_dir: Path, inventory: Path | str, project_dir: Path | None = None) -> None:
    """Refuse to start Ansible on anything the trust rule refuses (:mod:`provision.trust`): the private
    data directory and what ansible-runner reads from it (:data:`RUNNER_INPUTS`), the project
    directory and the inventory (:func:`provision.files.check_inventory`) when it is a path.

    Raises:
        UntrustedError: One line naming the part that failed and its owner.
        FactsError: The inventory is missing or cannot be read.
    """
    from provision.files import check_directory, check_inventory, check_tree

    check_directory(private_data_dir, "the run directory", UntrustedError)
    for name in RUNNER_INPUTS:
        if (private_data_dir / name).exists():
            check_tree(private_data_dir / name, f"the run directory's {name}", UntrustedError)
    if project_dir is not None:
        check_directory(project_dir, "the playbooks' directory", UntrustedError)
    source = inventory_source(inventory)
    if Path(source).is_absolute() and Path(source).exists():
        check_inventory(Path(source))


def ansible_env(private_data_dir: Path, control_dir: Path) -> dict[str, str]:
    """The environment of ansible-playbook (see the module docstring for why each is set)."""
    return {
        "PATH": interpreter_path(),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_LOCAL_TEMP": str(private_data_dir / "tmp"),
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "1",
    }


def interpreter_path() -> str:
    """PATH with the running interpreter's bin dir first, so its ansible-playbook is used."""
    return os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


def _keep(on_event: EventHandler | None, keep: bool = True) -> Callable[[Event], bool]:
    def handle(event: Event) -> bool:
        if on_event is not None:
            on_event(event)
        return keep or event.get("event") == "playbook_on_stats"  # on disk: PlayResult reads them back

    return handle


def result_of(runner: Any, left_running: tuple[str, ...] = ()) -> PlayResult:
    """A :class:`PlayResult` from a finished ``ansible_runner.Runner`` (``left_running``: see there)."""
    stats = runner.stats or {}
    return PlayResult(
        status=str(runner.status),
        rc=int(runner.rc) if runner.rc is not None else -1,  # None when ansible-runner could not start
        events=tuple(runner.events),
        stats={key: dict(stats.get(key) or {}) for key in STAT_KEYS if key in stats},
        stdout_tail=_stdout_tail(runner),
        left_running=left_running,
    )


def _stdout_tail(runner: Any) -> str:
    from ansible_runner.exceptions import AnsibleRunnerException

    try:
        with runner.stdout as stdout:
            lines = stdout.read().strip().splitlines()
    except AnsibleRunnerException:  # ansible-playbook never started
        return "no output"
    return lines[-1] if lines else "no output"


_GENERIC = ("MODULE FAILURE", "non-zero return code", "Module result deserialization failed")
"""Ansible's own placeholder messages: the cause is in the module's stderr or stdout instead."""
_NO_RESULT = "Module result deserialization failed"


def failure_message(res: Mapping[str, Any]) -> str:
    """The one line that names why a task failed, from a failed event's ``res``.

    Ansible's ``msg`` when it says something; for a module that crashed (``MODULE FAILURE``,
    e.g. no Python on the host) or a command that failed, the last line of the module's own
    stderr, then stdout, which carries the cause (an exception, ``python3: not found``). A task
    with a loop: its first failed item's line.
    """
    items = res.get("results")
    if isinstance(items, list) and (failed := [i for i in items if isinstance(i, dict) and i.get("failed")]):
        return failure_message(failed[0])
    msg = _lines(res.get("msg"))
    if msg and not msg[0].startswith(_GENERIC):
        return msg[0]
    if msg and msg[0].startswith(_NO_RESULT) and not _lines(res.get("module_stdout")):
        return _interpreter_failed(res)
    for key in ("module_stderr", "stderr", "module_stdout", "stdout"):
        if found := _lines(res.get(key)):
            rc = f" (rc {res['rc']})" if isinstance(res.get("rc"), int) else ""
            return f"{msg[0] if msg else 'failed'}{rc}: {found[-1]}"
    return msg[0] if msg else "no message"


def _interpreter_failed(res: Mapping[str, Any]) -> str:
    """The module printed nothing at all: its interpreter did not run. Name it and the first
    thing it (or the shell) said, which carries the cause (``pyenv: python3.13: command not
    found``); the rest of such output is advice."""
    facts = res.get("ansible_facts")
    python = facts.get("discovered_interpreter_python") if isinstance(facts, Mapping) else None
    which = f"the discovered Python {python}" if python else "the host's Python"
    said = _lines(res.get("module_stderr"))
    rc = f" (rc {res['rc']})" if isinstance(res.get("rc"), int) else ""
    first = said[0] if said else "no output"
    return f"{which} printed no module result{rc}: {first} (set ansible_python_interpreter for the host)"


def _lines(value: Any) -> list[str]:
    return [line.strip() for line in str(value or "").splitlines() if line.strip()]


def local_inventory(run_dir: Path) -> Path:
    """An inventory for this machine in ``run_dir``: connection local, the system python3."""
    from provision.output import write_output

    path = run_dir / "inventory.ini"
    write_output(path, "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n")
    return path


_JINJA_OPENERS = ("{{", "{%", "{#")


def refuse_templates(value: Any, where: str = "plan") -> None:
    """Raise ApplyError if a string in ``value`` holds a Jinja delimiter.

    Ansible templates every variable it reads, extravars included, so a planned value such as
    ``{{ lookup('pipe', 'id') }}`` would run on the controller. The spec already refuses braces;
    this keeps any other path (a hand-edited plan, a new field) from reaching Ansible.
    """
    if isinstance(value, str):
        if any(opener in value for opener in _JINJA_OPENERS):
            raise ApplyError(f"{where} holds Ansible template syntax ({value!r}); refusing to run Ansible")
    elif isinstance(value, dict):
        for key, item in value.items():
            refuse_templates(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for item in value:
            refuse_templates(item, where)


def default_runs_dir() -> Path:
    """``$PROVISION_RUNS_DIR``, else ``/var/lib/provision/runs`` for root, else the XDG state dir.

    Not under ``/var/log``: Ubuntu makes it writable by the ``syslog`` group (``root:syslog``,
    mode 0775), which the trust rule refuses above a directory ansible-runner reads its settings from.
    """
    if env := os.environ.get("PROVISION_RUNS_DIR"):
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/provision/runs")
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "provision" / "runs"


def new_run_dir(runs_dir: Path, label: str) -> Path:
    """Create and return a fresh run directory named by UTC time and ``label``, mode 0700.

    ``runs_dir`` (created 0755 where missing) must pass the trust rule: a directory another user
    could write would let them swap ansible-runner's ``env/`` files between creation and use. A
    sticky ``runs_dir`` (``/tmp``) is allowed: the new directory in it is root's alone.

    Raises:
        UntrustedError: ``runs_dir`` (or the directory it would be created in) is not trusted.
        ApplyError: The directory cannot be created.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    run_dir = runs_dir / f"{stamp}-{label}"
    try:
        if not check_runs_dir(runs_dir):
            runs_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
            check_runs_dir(runs_dir)
        run_dir.mkdir(mode=0o700)
    except OSError as exc:
        raise ApplyError(f"cannot create a run directory in {runs_dir}: {exc.strerror or exc}") from None
    return run_dir


def check_runs_dir(runs_dir: Path, option: str = "") -> bool:
    """Refuse a runs directory the trust rule refuses, whole path (ansible-runner reads its run
    directories by path: unlike an output, no directory above may be another user's); whether it
    exists (a missing one must be creatable where no one else could create it first, or in a
    sticky directory).

    Raises:
        UntrustedError: One line, prefixed with ``option`` (``--runs-dir``) when given.
    """
    from provision.files import untrusted_message
    from provision.trust import Untrusted, check_path

    try:
        return check_path(runs_dir, kind="dir", missing_ok=True, sticky_ok=True)
    except Untrusted as exc:
        said = untrusted_message(runs_dir, exc, "the runs directory")
        raise UntrustedError(f"{option} {said}" if option else said) from None
