"""Ctrl-C during a real Ansible run (issue 13, item 6): the run ends ``canceled`` and no process of
it is left behind. Real ansible-playbook, local connection, a real SIGINT, sent once the task's own
child process is running (it writes its pid, then becomes ``sleep``). The task also leaves two
orphans (their parent gone, reparented): one detached in its own session, the kind a daemonising
command makes, and one with an empty environment, as sudo's children have, in its own group. The
process starts the run with SIGINT ignored, as a background job of a shell would be."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from provision import ansible

SCRIPT = (
    # A grandchild in its own session whose parent (the subshell) exits: reparented, detached.
    '(setsid sleep 61.2346 & echo $! > "$0.detached"); '
    # One with an empty environment, as sudo's children have, in a process group of its own (so not
    # ended with its parent's group), its parent gone too.
    "(env -i /usr/bin/python3 -c "
    "\"import os; os.setpgid(0, 0); os.execv('/bin/sleep', ['sleep', '61.2347'])\" "
    '& echo $! > "$0.bare"); '
    # Then this process's pid, written whole (rename), and this process becomes the task's sleep.
    'echo $$ > "$0.part" && mv "$0.part" "$0" && exec sleep 61.2345'
)
PLAYBOOK = """\
- name: Wait long enough to be interrupted
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Sleep in a child process, as apt or pip would run
      ansible.builtin.command:
        argv: [sh, -c, {script}, {pidfile}]
"""


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process; None when gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] in "ZX" else (int(fields[1]), int(fields[19]))


def _descendants(root: int) -> dict[int, int]:
    """Every live descendant of ``root``: pid -> start time (which tells a reused pid apart)."""
    pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    procs = {pid: stat for pid in pids if (stat := _stat(pid))}
    found: dict[int, int] = {}
    queue = [root]
    while queue:
        parent = queue.pop()
        for pid, (ppid, start) in procs.items():
            if ppid == parent and pid not in found:
                found[pid] = start
                queue.append(pid)
    return found


def _wait_for(what: str, ready: float, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + ready
    while not check():
        assert time.monotonic() < deadline, f"no {what} after {ready} s"
        time.sleep(0.01)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_ctrl_c_once_the_task_child_runs_leaves_no_process_of_the_run(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "run").mkdir()
    pidfile = tmp_path / "task.pid"
    playbook = PLAYBOOK.format(script=json.dumps(SCRIPT), pidfile=json.dumps(str(pidfile)))
    (project / "wait.yml").write_text(playbook)
    inventory = "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
    seen: dict[int, int] = {}  # every process of the run when Ctrl-C is sent: pid -> start time
    failures: list[str] = []
    sent: list[float] = []  # when Ctrl-C was sent

    def interrupt() -> None:
        try:
            _wait_for("pid file from the task", 60, pidfile.exists)
            task = int(pidfile.read_text())
            _wait_for("sleep in the task's process", 10, lambda: _cmdline(task) == b"sleep\x0061.2345\x00")
            detached = int(Path(f"{pidfile}.detached").read_text())
            _wait_for("detached sleep", 10, lambda: _cmdline(detached) == b"sleep\x0061.2346\x00")
            bare = int(Path(f"{pidfile}.bare").read_text())
            _wait_for("sleep without environment", 10, lambda: _cmdline(bare) == b"sleep\x0061.2347\x00")
            # this process's children that the run started (not other tests' servers started before it)
            started = _descendants(os.getpid()).items()
            seen.update({pid: start for pid, start in started if pid not in earlier})
            for pid in (task, detached, bare):
                if stat := _stat(pid):
                    seen[pid] = stat[1]
        except AssertionError as exc:
            failures.append(str(exc))
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # started as a background job of sh would be
    earlier = _descendants(os.getpid())  # e.g. a session fixture's http.server, alive for the whole run
    watcher = threading.Thread(target=interrupt, daemon=True)
    watcher.start()
    try:
        played = ansible.run_play(tmp_path / "run", "wait.yml", inventory, project_dir=project)
        after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, before)
    returned = time.monotonic()
    watcher.join(5)
    assert failures == []
    assert played.interrupted, played.status  # a SIGINT ignored at start still stops the run
    # Stopped at Ctrl-C, not when the task's 61 s sleep would have ended: a bound set by the task,
    # not by how loaded the machine is.
    assert returned - sent[0] < 61.2345, "the run must stop at Ctrl-C, not after the task's sleep"
    assert len(seen) >= 5, seen  # ansible-playbook, its worker, the task's sleep, the two orphans
    left = {pid: _cmdline(pid)[:200] for pid, start in seen.items() if (s := _stat(pid)) and s[1] == start}
    assert left == {}, "processes of the interrupted run still alive after run_play returned"
    assert played.left_running == ()
    assert after is signal.default_int_handler  # Python's KeyboardInterrupt, not the inherited SIG_IGN
