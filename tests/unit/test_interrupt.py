"""Ctrl-C around an Ansible run, without running Ansible (``tests/system/test_interrupt_real.py``
runs a real ansible-playbook for it): what outlived the stop is named in the result, the error and
apply's exit 130; SIGINT ignored at start is Python's handler again."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_mock import MockerFixture

from provision import ansible
from provision.errors import Interrupted
from provision.reboot.remote import INTERRUPTED
from provision.reboot.remote import outcomes as reboot_outcomes
from tests.unit.factories import by_host, mock_detection, two_host_inventory


def _wait_for(what: str, ready: float, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + ready
    while not check():
        assert time.monotonic() < deadline, f"no {what} after {ready} s"
        time.sleep(0.01)


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
    assert by_host(doc)["a"]["outcome"].startswith("interrupted (Ctrl-C)")
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
