"""Remote detection by one ssh command per host, resolved by Ansible; the play for the rest.

The local-connection case runs the real program (the collector on stdin of a real interpreter);
the ssh case runs the real ssh client against a closed port; the argv cases read what Ansible's
own inventory manager and ssh plugin resolved.
"""

from __future__ import annotations

import ast
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture

from provision import ansible
from provision.detect import direct
from provision.detect.fact import Unknown
from provision.detect.registry import all_probes
from provision.detect.runner import collector_source, detect_remote

LOCAL = f"local ansible_connection=local ansible_python_interpreter={sys.executable}\n"
VENV = "/opt/it's {{ x }} $(reboot)/venv"


def test_a_local_host_is_detected_without_ansible_playbook(mocker: MockerFixture) -> None:
    play = mocker.patch.object(ansible, "run_play")
    facts = detect_remote(LOCAL, venv="/opt/provision/venv")
    assert list(facts) == ["local"]
    assert not isinstance(facts["local"].os, Unknown) and facts["local"].host == "local"
    play.assert_not_called()


def test_ssh_failure_is_the_hosts_unreachable_reason() -> None:
    inventory = "down ansible_host=127.0.0.1 ansible_port=1 ansible_python_interpreter=/usr/bin/python3\n"
    facts = detect_remote(inventory)
    assert facts["down"].os == facts["down"].gpus
    reason = facts["down"].os.unknown  # type: ignore[union-attr]
    assert reason.startswith("host unreachable: ") and "port 1" in reason, reason


def test_the_ssh_command_is_what_ansible_resolved(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text("ansible_user: admin\n", encoding="utf-8")
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[gpu]\ngpu07 ansible_host=10.1.2.3 ansible_port=2222 ansible_ssh_private_key_file=/k/id "
        "ansible_python_interpreter=/usr/bin/python3 ansible_ssh_common_args='-o ProxyJump=bastion'\n",
        encoding="utf-8",
    )
    argv = direct.connections(str(inventory), None)["gpu07"]
    assert argv is not None
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-l") + 1] == "admin"
    assert argv[argv.index("-i") + 1] == "/k/id" and "ProxyJump=bastion" in argv
    # ssh keeps an option's first value: no master left running, never a password prompt
    assert argv.index("ControlMaster=no") < argv.index("ControlMaster=auto")
    assert "BatchMode=yes" in argv
    assert argv[-3:-1] == ["--", "10.1.2.3"]
    assert shlex.split(argv[-1]) == ["/usr/bin/python3", "-c", direct.BOOT]


def test_no_spec_value_reaches_a_shell_string() -> None:
    probes = all_probes(VENV)
    options = {"host": "h", "ssh_executable": "ssh"}
    argv = direct.ssh_argv("h", options, "/usr/bin/python3")
    assert not any(VENV in part for part in argv)
    program = ast.parse(direct.payload(collector_source(), probes))  # the venv travels as Python data
    literal = next(
        n.args[0]
        for n in ast.walk(program)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "json.loads"
    )
    sent = json.loads(ast.literal_eval(literal))
    assert any(VENV in part for probe in sent for part in probe["argv"])


def test_the_payload_runs_the_collector_on_its_probes(tmp_path: Path) -> None:
    probe = [p for p in all_probes(None) if p.id == "uname"]
    done = direct.run_one([sys.executable, "-c", direct.BOOT], direct.payload(collector_source(), probe), 30)
    assert isinstance(done, dict) and list(done) == ["uname"] and done["uname"]["rc"] == 0


@pytest.mark.parametrize(
    "line",
    [
        "odd ansible_connection=docker",
        "odd ansible_password=secret",
        'odd ansible_host=\'{{ lookup("env", "H") }}\'',
    ],
)
def test_hosts_ssh_cannot_reach_plainly_go_through_the_play(line: str, mocker: MockerFixture) -> None:
    play = mocker.patch.object(ansible, "run_play", return_value=ansible.PlayResult("successful", 0))
    facts = detect_remote(LOCAL + line + "\n")
    assert list(facts) == ["local"]  # the fake play reported nothing for "odd"
    assert play.call_args.kwargs["limit"] == "odd"


def test_the_switch_sends_every_host_through_the_play(
    mocker: MockerFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(direct.ENV_SWITCH, "ansible")
    play = mocker.patch.object(ansible, "run_play", return_value=ansible.PlayResult("successful", 0))
    assert detect_remote(LOCAL) == {}  # the fake play reported nothing
    assert play.call_args.kwargs["limit"] is None


def test_forks_bound_the_hosts_run_at_once(mocker: MockerFixture) -> None:
    seen: list[int] = []
    real = direct.ThreadPoolExecutor

    def pool(max_workers: int) -> Any:
        seen.append(max_workers)
        return real(max_workers=max_workers)

    mocker.patch.object(direct, "ThreadPoolExecutor", side_effect=pool)
    two = LOCAL + LOCAL.replace("local ", "local2 ", 1)
    assert sorted(detect_remote(two, forks=1)) == ["local", "local2"]
    assert seen == [1]


def test_hosts_come_back_in_inventory_order_whatever_order_they_finish(mocker: MockerFixture) -> None:
    names = [f"h{i}" for i in range(6)]
    inventory = "".join(LOCAL.replace("local ", f"{n} ", 1) for n in names)
    real = direct.run_one
    started: list[str] = []

    def slow_first(argv: list[str], program: bytes, timeout: float, task: str) -> Any:
        started.append(argv[0])
        if len(started) == 1:
            time.sleep(1.0)  # the first host finishes last
        return real(argv, program, timeout, task)

    mocker.patch.object(direct, "run_one", side_effect=slow_first)
    assert list(detect_remote(inventory, forks=6)) == names
