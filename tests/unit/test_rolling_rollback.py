"""Rolling rollback as values: the record keeps the action and each host's lock, the wave runner
plans a wave against those locks, resume takes them up, the JSON is the hosts form (issue 31).

What reaches hosts (the lock play, detection, verify's play) is replaced here by the values those
steps return; the same path runs over real sshd targets in tests/fleet/test_rollout.py.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from rich.console import Console
from typer.testing import CliRunner

from provision.apply.workflow import ApplyOptions
from provision.cli import cli
from provision.errors import ProvisionError
from provision.fleet import rolling
from provision.fleet.rollout import Gate, MaxUnavailable, RolloutRecord, new_record
from provision.hosts import HostState
from provision.lock.model import Lock
from provision.lock.store import HostLocks
from provision.rollback import RollbackAction
from tests.unit.factories import fresh_ubuntu, spec
from tests.unit.test_lock import _doc

HOSTS = ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]


def _lock(host: str, number: int) -> Lock:
    """Lock ``number`` of ``host``, its spec named after the number (``lock-1``)."""
    s = spec(name=f"lock-{number}")
    return Lock.model_validate(_doc(host=host, spec=s.model_dump(mode="json")) | {"number": number})


def _locks(host: str, *numbers: int) -> HostLocks:
    history = tuple(_lock(host, n) for n in numbers)
    return HostLocks(host, history[-1], history, {"nvidia-open": ("580.95.05-1",)})  # served


def _record(**over: Any) -> RolloutRecord:
    return new_record(
        "20261203T000000.000000Z",
        inventory="/lab/hosts.ini",
        max_unavailable=MaxUnavailable(2, percent=False),
        pending=HOSTS[:4],
        left_out={"gpu05": "unchanged"},
        action="rollback",
        locks={h: 1 for h in HOSTS},
        **over,
    )


def test_a_rollback_record_keeps_its_action_and_locks_and_an_older_record_reads_as_apply(
    tmp_path: Path,
) -> None:
    record = _record(to=1, replace_held=True)
    path = tmp_path / "rollouts" / "r.json"
    rolling.save(path, record)
    again = rolling.read_record(path)
    assert again == record and again.action == "rollback" and again.to == 1
    assert again.replace_held  # the consent confirmed with the rollout holds for its resume
    assert again.locks == {h: 1 for h in HOSTS} and again.waves == [HOSTS[:2], HOSTS[2:4]]
    older = json.loads(path.read_text())
    for key in ("action", "to", "locks", "replace_held"):  # a record written before rolling rollback
        del older[key]
    path.write_text(json.dumps(older))
    assert rolling.read_record(path).action == "apply"
    path.write_text(json.dumps(older | {"action": "remove"}))
    with pytest.raises(
        ProvisionError, match="not a rollout record: action: Input should be 'apply' or 'rollback'"
    ):
        rolling.read_record(path)


def test_the_json_document_is_the_hosts_form_and_a_rollback_names_each_hosts_lock() -> None:
    doc = rolling.rollout_json(_record(), Path("/r.json"))
    assert doc["format_version"] == rolling.JSON_FORMAT == 2
    assert doc["action"] == "rollback" and doc["outcome"] == "running"
    assert [h["host"] for h in doc["hosts"]] == HOSTS
    assert doc["hosts"][0] == {
        "host": "gpu01",
        "wave": 0,
        "state": "untouched",
        "drained_by": None,
        "reasons": [],
        "lock": 1,
    }
    apply = new_record(
        "x", inventory="/i", max_unavailable=MaxUnavailable(1, False), pending=["a"], left_out={}
    )
    applied = rolling.rollout_json(apply, None)
    assert (
        applied["action"] == "apply" and applied["outcome"] == "dry-run" and "lock" not in applied["hosts"][0]
    )


def _patch_hosts(mocker: MockerFixture, found: dict[str, HostLocks]) -> dict[str, Any]:
    """The lock play and detection return ``found`` and fresh hosts; the mocks, by name."""
    return {
        "read_locks": mocker.patch("provision.rollback.read_locks", return_value=found),
        "served": mocker.patch(
            "provision.rollback.served_versions",
            side_effect=lambda inv, names: {h: found[h] for h in names},
        ),
        "detect": mocker.patch(
            "provision.rollback.detect_by_venv",
            side_effect=lambda hosts: {h: fresh_ubuntu(host=h) for h in hosts.specs},
        ),
    }


def test_a_wave_is_planned_against_each_hosts_recorded_lock_not_the_one_before_its_current(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    # gpu01's rollback to lock 1 converged in a stopped run: its current lock is now 3 (lock 1's
    # state), so "the one before the current" would be 2, the state the rollback left.
    found = {"gpu02": _locks("gpu02", 1, 2), "gpu01": _locks("gpu01", 1, 2, 3)}  # as they answered
    mocks = _patch_hosts(mocker, found)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("gpu01\ngpu02\ngpu03\n")
    action = RollbackAction(inventory, {"gpu01": 1, "gpu02": 2}, forks=4)
    held, planned = action.plan(["gpu01", "gpu02"])
    assert mocks["read_locks"].call_args.args == (inventory, "gpu01,gpu02")
    assert {h: s.spec.name for h, s in held.specs.items()} == {"gpu01": "lock-1", "gpu02": "lock-2"}
    assert held.forks == 4 and list(planned.hosts) == ["gpu01", "gpu02"]  # inventory order
    assert [p.state for p in planned.hosts.values()] == [HostState.CHANGE] * 2  # fresh hosts: to install
    found["gpu02"] = HostLocks("gpu02", found["gpu02"].current, found["gpu02"].history, {})
    refused = action.plan(["gpu02"])[1].hosts["gpu02"]  # lock 2's driver no longer served
    assert refused.state is HostState.REFUSED and refused.plan is not None
    assert refused.plan.blockers[-1].message.endswith("no longer serves: nvidia-open=580.95.05-1")

    verified = mocker.patch("provision.verify.hosts.verify_hosts")
    action.verify(["gpu02"])
    checked = verified.call_args.args[0]
    assert {h: s.spec.name for h, s in checked.specs.items()} == {"gpu02": "lock-2"}  # the lock's spec


def test_resume_of_a_rollback_record_returns_each_host_to_its_recorded_lock(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("\n".join(HOSTS) + "\n")
    record = _record().model_copy(update={"inventory": str(inventory), "locks": {"gpu01": 1, "gpu02": 2}})
    action = rolling._action_of(record, tmp_path / "r.json")
    assert isinstance(action, RollbackAction)
    assert action.locks == {"gpu01": 1, "gpu02": 2} and action.inventory == inventory
    fewer = tmp_path / "fewer.ini"
    fewer.write_text("gpu01\ngpu02\n")
    with pytest.raises(ProvisionError, match=r"gpu03, gpu04 no longer in .*fewer.ini; nothing was changed$"):
        rolling._action_of(record.model_copy(update={"inventory": str(fewer)}), tmp_path / "r.json")


def test_a_rolling_rollback_stops_at_the_first_failing_wave_and_touches_nothing_after(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    record = new_record(
        "r",
        inventory="/lab/hosts.ini",
        max_unavailable=MaxUnavailable(2, percent=False),
        pending=HOSTS,
        left_out={},
        action="rollback",
        locks={h: 1 for h in HOSTS},
    )
    waves: list[list[str]] = []
    broken = {"gpu04"}

    def wave(rollout: rolling.Rollout, rec: RolloutRecord, hosts: list[str]) -> list[Gate]:
        waves.append(hosts)
        gates = []
        for host in hosts:
            passed = host not in broken
            rec.hosts[host].state = "done" if passed else "failed"
            gates.append(Gate(host, passed, () if passed else ("gpu-count: pass -> fail: 0 GPU(s)",)))
        return gates

    mocker.patch.object(rolling, "run_wave", side_effect=wave)
    console = Console(file=io.StringIO(), width=200)
    action = RollbackAction(tmp_path / "hosts.ini", record.locks)
    rollout = rolling.Rollout(action, {}, ApplyOptions(False, True, tmp_path), console, tmp_path / "r.json")
    assert rolling.run_waves(rollout, record, as_json=False) == 1
    assert waves == [["gpu01", "gpu02"], ["gpu03", "gpu04"]]  # nothing of wave 3
    saved = rolling.read_record(rollout.path)
    assert saved.status == "stopped" and saved.next_wave() == 1 and saved.named("failed") == ["gpu04"]
    said = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Rolling rollback stopped at wave 2/3" in said
    assert "done: gpu01, gpu02, gpu03; failed: gpu04; untouched: gpu05" in said

    waves.clear()
    broken.clear()  # repaired: resume takes the failed host again, alone in its wave, then wave 3
    assert rolling.run_waves(rollout, saved, as_json=False) == 0
    assert waves == [["gpu04"], ["gpu05"]]
    assert rolling.read_record(rollout.path).status == "done"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-unavailable", "0%", "-i", "hosts.ini"], "--max-unavailable '0%': give a number of hosts"),
        (["--max-unavailable", "2"], "--max-unavailable rolls back over hosts: give -i"),
        (
            ["--max-unavailable", "2", "-i", "/nonexistent/hosts.ini"],
            "/nonexistent/hosts.ini: no such inventory",
        ),
    ],
)
def test_the_rollback_command_refuses_a_bad_rollout_in_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["rollback", *args])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().startswith(f"error: {message}"), result.stderr
