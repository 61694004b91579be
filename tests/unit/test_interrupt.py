"""Ctrl-C during an Ansible run (issue 13, item 6): the run ends ``canceled`` and no process of it
is left behind. Real ansible-playbook, local connection, a real SIGINT, sent once the task's own
child process is running (it writes its pid, then becomes ``sleep``). The task also leaves two
orphans (their parent gone, reparented): one detached in its own session, the kind a daemonising
command makes, and one with an empty environment, as sudo's children have, in its own group."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_mock import MockerFixture

from provision import ansible
from provision.errors import Interrupted
from provision.reboot.remote import INTERRUPTED
from provision.reboot.remote import outcomes as reboot_outcomes
from tests.unit.factories import mock_detection, two_host_inventory

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


ROOT = Path(__file__).resolve().parents[2]
LEFT = ("pid 4242: /usr/bin/dpkg --configure -a",)


class _CanceledRunner:
    """What ``ansible_runner.run`` returns for a canceled run, as far as provision reads it."""

    status, rc, events, stats = "canceled", 254, (), None

    def __init__(self, stdout: Path) -> None:
        stdout.write_text("")
        self._stdout = stdout

    @property
    def stdout(self) -> Any:
        return self._stdout.open()


def test_processes_that_outlive_the_stop_are_named_in_the_result_and_the_error(
    mocker: MockerFixture, tmp_path: Path
) -> None:
    import ansible_runner

    stopped_with: list[str] = []

    def end_run(run_id: str) -> list[str]:
        stopped_with.append(run_id)
        return list(LEFT)

    def run(**kwargs: Any) -> _CanceledRunner:  # ansible-runner's loop: Ctrl-C, then its next poll
        os.kill(os.getpid(), signal.SIGINT)
        _wait_for("the Ctrl-C seen by the cancel callback", 10, kwargs["cancel_callback"])
        assert stopped_with == [kwargs["envvars"][ansible.RUN_ID_VAR]]  # this run's processes only
        return _CanceledRunner(tmp_path / "stdout")

    mocker.patch.object(ansible, "_end_run", side_effect=end_run)
    mocker.patch.object(ansible_runner, "run", side_effect=run)
    played = ansible.run_play(tmp_path, "site.yml", "localhost")
    assert played.interrupted and played.left_running == LEFT
    assert ansible.RUN_ID_VAR not in os.environ  # the mark is the run's, not this process's
    error = Interrupted(left_running=played.left_running)
    assert error.exit_code == 130 and LEFT[0] in str(error) and "could not be ended" in str(error)
    assert str(Interrupted()) == "Ctrl-C stopped the run; nothing of it is left running"
    assert (
        reboot_outcomes(played, ["a"])["a"] == f"{INTERRUPTED}; still running, could not be ended: {LEFT[0]}"
    )


def test_apply_names_what_outlived_ctrl_c_and_exits_130(mocker: MockerFixture, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from provision.apply import runner
    from provision.cli import cli

    inventory = two_host_inventory(
        tmp_path, str(Path(__file__).resolve().parents[2] / "specs" / "dual-a100x.yaml")
    )
    mock_detection(mocker, "host unreachable")
    ran = runner.ApplyResult(run_dir=tmp_path / "run", status="canceled", rc=254, hosts={}, left_running=LEFT)
    mocker.patch.object(runner, "run_playbook", return_value=ran)
    args = ["apply", "-i", str(inventory), "--yes", "--runs-dir", str(tmp_path)]
    shown = CliRunner().invoke(cli, args)
    assert shown.exit_code == 130, shown.output
    assert "Interrupted" in shown.output and LEFT[0] in shown.output.replace("\n", "")
    assert "nothing of it is left running" not in shown.output
    doc = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    assert doc["hosts"]["a"]["outcome"].startswith("interrupted (Ctrl-C)")
    assert doc["left_running"] == list(LEFT)


def test_sigint_ignored_at_start_becomes_pythons_handler_and_a_handler_of_its_own_is_kept(
    mocker: MockerFixture,
) -> None:
    """A background job of a shell without job control starts with SIGINT ignored; the console entry
    point (and every Ansible run) puts Python's KeyboardInterrupt back, and keeps a real handler."""
    from provision import interrupts
    from provision.cli import start_up

    mocker.patch("provision.gcpolicy.start_up")  # the entry point's gc policy is not this test's
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        start_up()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

        def own(signum: int, frame: object) -> None: ...

        signal.signal(signal.SIGINT, own)
        interrupts.own_sigint()
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, before)
