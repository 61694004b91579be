"""Ctrl-C during an Ansible run (issue 13, item 6): the run ends ``canceled`` and no process of
ansible-playbook is left behind. Real ansible-playbook, local connection, a real SIGINT."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from provision import ansible

PLAYBOOK = """\
- name: Wait long enough to be interrupted
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Sleep in a child process, as apt or pip would run
      ansible.builtin.command:
        argv: [sleep, "61.2345"]  # a duration no other process uses: found by it below
"""


def _alive_under(marker: str) -> list[int]:
    """Pids whose command line names ``marker`` (this test's private data dir)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_ctrl_c_cancels_the_run_and_leaves_no_process(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "run").mkdir()
    (project / "wait.yml").write_text(PLAYBOOK)
    inventory = "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
    started = threading.Event()

    def on_event(event: ansible.Event) -> None:
        if event.get("event") == "runner_on_start":
            started.set()

    def interrupt() -> None:
        started.wait(60)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    threading.Thread(target=interrupt, daemon=True).start()
    began = time.monotonic()
    played = ansible.run_play(tmp_path / "run", "wait.yml", inventory, project_dir=project, on_event=on_event)
    assert played.interrupted, played.status
    assert time.monotonic() - began < 45, "the run must stop at Ctrl-C, not after the 61 s task"
    left = {
        pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:300] for pid in _alive_under(str(tmp_path / "run"))
    }
    assert left == {}
    assert _alive_under("sleep\x0061.2345") == []  # the task's command, in ansible's worker session
    assert signal.getsignal(signal.SIGINT) is before  # the handler in place before the run is back
