"""Driving Ansible against a target through ansible-runner, with the pitfalls handled.

- ``suppress_env_files=True``: otherwise envvars/extravars land in ``env/`` and a later run
  loads the stale file over its arguments (ansible-runner's ``dump_artifacts`` writes
  ``env/<name>`` only where none exists yet: ``src/ansible_runner/utils/__init__.py`` in
  https://github.com/ansible/ansible-runner).
- A fresh ``private_data_dir`` per run, and a fresh ``ANSIBLE_SSH_CONTROL_PATH_DIR``: ssh's
  ControlPersist sockets otherwise go to ``~/.ansible/cp`` whatever ``ANSIBLE_HOME`` says. It is
  a short ``/tmp/pcp-*`` directory, not one under the private data dir, because a socket path
  must fit in 108 bytes and pytest's tmp paths do not ("unix_listener: path ... too long").
- ``PATH`` starts with this interpreter's scripts dir, where ``ansible-playbook`` lives.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import ansible_runner  # type: ignore[import-untyped]


def runner_env(private_data_dir: Path, control_dir: Path) -> dict[str, str]:
    """Environment variables for one ansible-runner run rooted at ``private_data_dir``."""
    bins = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    return {
        "PATH": os.pathsep.join([*bins, os.environ.get("PATH", "/usr/bin:/bin")]),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
        "ANSIBLE_HOME": str(private_data_dir / "ansible-home"),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_NOCOLOR": "1",
    }


def run_playbook(inventory: Path, playbook: Path, workdir: Path, **kwargs: Any) -> ansible_runner.Runner:
    """Run ``playbook`` against ``inventory`` in a fresh private data dir under ``workdir``.

    Extra keyword arguments (``extravars``, ``tags``, ``event_handler``...) go to
    :func:`ansible_runner.run`. Returns the Runner; read ``status``, ``rc`` and ``events``.
    """
    return _run(workdir, inventory=str(inventory), playbook=str(playbook), **kwargs)


def run_module(inventory: Path, module: str, args: str, workdir: Path) -> ansible_runner.Runner:
    """Run one ad-hoc ``module`` with ``args`` against every host of ``inventory``."""
    return _run(workdir, inventory=str(inventory), host_pattern="all", module=module, module_args=args)


def _run(workdir: Path, **kwargs: Any) -> ansible_runner.Runner:
    private = Path(tempfile.mkdtemp(prefix="runner-", dir=workdir))
    control = Path(tempfile.mkdtemp(prefix="pcp-", dir="/tmp"))
    try:
        return ansible_runner.run(
            private_data_dir=str(private),
            envvars=runner_env(private, control),
            suppress_env_files=True,
            quiet=True,
            # Without a callback ansible-runner installs its own SIGINT/SIGTERM handlers for good
            # (utils.signal_handler), replacing the conftest's clean-up handler in this process.
            cancel_callback=lambda: False,
            **kwargs,
        )
    finally:
        shutil.rmtree(control, ignore_errors=True)


def task_results(runner: ansible_runner.Runner) -> dict[str, dict[str, Any]]:
    """Per task name, the final ``res`` of its ``runner_on_ok``/``_failed``/``_unreachable`` event."""
    final = {"runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped"}
    return {
        e["event_data"]["task"]: {"event": e["event"], **e["event_data"].get("res", {})}
        for e in runner.events
        if e.get("event") in final
    }


def task_durations(runner: ansible_runner.Runner) -> dict[str, float]:
    """Per task name, seconds spent on its final event (``event_data.duration``)."""
    return {
        e["event_data"]["task"]: float(e["event_data"].get("duration", 0.0))
        for e in runner.events
        if e.get("event") in {"runner_on_ok", "runner_on_failed"}
    }
