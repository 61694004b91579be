"""The one ansible-runner call site: its conventions (mocked runner) and one real local play."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture

from provision import ansible
from provision.apply import runner
from provision.plan.planner import make_plan
from tests.unit.factories import CATALOG, fresh_ubuntu, spec

STATS = {"ok": {"a": 3, "b": 1}, "changed": {"a": 1}, "failures": {"b": 1}, "dark": {}, "processed": {"a": 1}}
FAILED = {
    "event": "runner_on_failed",
    "event_data": {"host": "b", "task": "Install the driver.", "res": {"msg": "apt said no\nmore"}},
}


class FakeRunner:
    """What ``ansible_runner.run`` returns, as far as provision reads it."""

    def __init__(self, tmp_path: Path, events: list[dict[str, Any]], stats: dict[str, Any] | None) -> None:
        self.status, self.rc = ("failed", 2) if stats and stats.get("failures") else ("successful", 0)
        self.events = events
        self.stats = stats
        self._stdout = tmp_path / "stdout"
        self._stdout.write_text("PLAY RECAP\nb : ok=1 failed=1\n")

    @property
    def stdout(self) -> Any:
        return self._stdout.open()


@pytest.fixture()
def fake_run(mocker: MockerFixture, tmp_path: Path) -> Any:
    import ansible_runner

    fake = FakeRunner(tmp_path, [FAILED], STATS)
    return mocker.patch.object(ansible_runner, "run", return_value=fake)


def test_run_play_passes_the_conventions(fake_run: Any, tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("a\n")
    ansible.run_play(
        tmp_path, "site.yml", inventory, extravars={"x": 1}, limit="a,b", tags=["driver", "nccl"]
    )
    kwargs = fake_run.call_args.kwargs
    assert kwargs["suppress_env_files"] is True and kwargs["quiet"] is True
    assert kwargs["inventory"] == str(inventory.resolve())
    assert kwargs["tags"] == "driver,nccl" and kwargs["limit"] == "a,b" and kwargs["extravars"] == {"x": 1}
    assert kwargs["project_dir"] is None  # ansible-runner's default: <private_data_dir>/project
    env = kwargs["envvars"]
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert len(env["ANSIBLE_SSH_CONTROL_PATH_DIR"]) < 40  # room for ssh's socket name under 108 bytes
    assert not Path(env["ANSIBLE_SSH_CONTROL_PATH_DIR"]).exists()  # removed after the run
    assert env["ANSIBLE_LOCAL_TEMP"] == str(tmp_path / "tmp")


def test_run_play_returns_typed_data(fake_run: Any, tmp_path: Path) -> None:
    played = ansible.run_play(tmp_path, "site.yml", "a ansible_connection=ssh")
    assert fake_run.call_args.kwargs["inventory"] == "a ansible_connection=ssh"  # INI text as is
    assert (played.status, played.rc, played.succeeded) == ("failed", 2, False)
    assert played.events == (FAILED,)
    assert played.count("ok", "a") == 3 and played.count("dark", "a") == 0
    assert "processed" not in played.stats
    assert played.stat_hosts() == {"a", "b"}
    assert played.stdout_tail == "b : ok=1 failed=1"


def test_a_local_host_gets_provisions_interpreter_in_every_play(fake_run: Any, tmp_path: Path) -> None:
    ansible.run_play(tmp_path, "verify.yml", "here ansible_connection=local\nfar ansible_host=10.0.0.9\n")
    first, layer = fake_run.call_args.kwargs["inventory"]
    assert Path(first).read_text() == "here ansible_connection=local\nfar ansible_host=10.0.0.9\n"
    hosts = json.loads(Path(layer).read_text())["all"]["hosts"]
    assert hosts == {"here": {"ansible_python_interpreter": sys.executable}}  # far: discovery on it


def test_events_reach_the_handler_and_stay_on_disk(fake_run: Any, tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    ansible.run_play(tmp_path, "site.yml", "a", on_event=seen.append)
    keep = fake_run.call_args.kwargs["event_handler"]
    assert keep(FAILED) is True and seen == [FAILED]


def test_apply_reads_hosts_from_the_play_result(fake_run: Any, tmp_path: Path) -> None:
    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    no_keys = plan.model_copy(update={"extravars": {**plan.extravars, "keys": {}}})  # nothing fetched
    result = runner.run_playbook({"a": no_keys}, tmp_path / "inventory.ini", tmp_path, limit="a")
    kwargs = fake_run.call_args.kwargs
    assert kwargs["playbook"] == "site.yml" and kwargs["project_dir"].endswith("playbooks")
    written = Path(kwargs["extravars"]["provision_plans"]["a"])
    assert set(kwargs["extravars"]["provision_plans"]) == {"a"} and written.stat().st_mode & 0o777 == 0o600
    host_vars = json.loads(written.read_text())
    assert host_vars["provision_roles"] == list(plan.extravars["roles"])
    assert host_vars["nvidia_packages_list"] == plan.role_vars("nvidia_packages")["nvidia_packages_list"]
    assert (tmp_path / "plan-a.json").exists()
    assert result.hosts["a"] == runner.HostResult("a", ok=3, changed=1)
    assert result.hosts["b"].failures == ("Install the driver.: apt said no",)
    assert not result.succeeded


# A module that cannot start on the host: Ansible's res for it (msg is a placeholder; the cause is
# in module_stderr), as runner_on_failed carries it.
MODULE_FAILURE = {
    "msg": "MODULE FAILURE\nSee stdout/stderr for the exact error",
    "module_stdout": "",
    "module_stderr": "/bin/sh: 1: /usr/bin/python3: not found\n",
    "rc": 127,
    "changed": False,
}


@pytest.mark.parametrize(
    ("res", "message"),
    [
        (MODULE_FAILURE, "MODULE FAILURE (rc 127): /bin/sh: 1: /usr/bin/python3: not found"),
        (
            {"msg": "non-zero return code", "stderr": "E: Unable to locate package x\n", "rc": 100},
            "non-zero return code (rc 100): E: Unable to locate package x",
        ),
        ({"msg": "apt said no\nmore"}, "apt said no"),
        ({}, "no message"),
    ],
)
def test_a_failure_names_the_modules_own_message(res: dict[str, Any], message: str) -> None:
    assert ansible.failure_message(res) == message


def test_a_host_whose_detection_module_failed_is_failed_not_unreachable() -> None:
    from provision.detect.runner import COLLECTOR_TASK, collector_results, unknown_facts
    from provision.hosts import HostSpec, HostState, one_spec, plan_facts

    event = {
        "event": "runner_on_failed",
        "event_data": {"host": "n1", "task": COLLECTOR_TASK, "res": MODULE_FAILURE},
    }
    reason = str(collector_results([event])["n1"])
    assert reason.endswith("/usr/bin/python3: not found")
    facts = {"n1": unknown_facts("n1", reason)}
    planned = plan_facts(one_spec(None, facts, HostSpec(spec(), "s.yaml")), facts).hosts["n1"]
    assert planned.state is HostState.FAILED and planned.unreachable == reason
