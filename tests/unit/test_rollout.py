"""Rolling apply as values: waves for N and P%, the gate's verdicts, hooks, and the record (issue 31)."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from pytest_mock import MockerFixture

from provision.errors import ProvisionError
from provision.fleet import rolling
from provision.fleet.mapping import FleetError, read_fleet_file
from provision.fleet.rollout import (
    Hooks,
    HookSet,
    MaxUnavailable,
    RolloutRecord,
    gate,
    hook_argv,
    new_record,
    parse_max_unavailable,
    waves,
)

HOSTS = [f"gpu{n:02d}" for n in range(1, 8)]


@pytest.mark.parametrize(
    ("text", "sizes"),
    [
        ("1", [1] * 7),
        ("3", [3, 3, 1]),
        ("7", [7]),
        ("50", [7]),  # more than the hosts: one wave
        ("25%", [1] * 7),  # 7 * 25 / 100 = 1.75, rounded down
        ("30%", [2, 2, 2, 1]),  # 2.1
        ("50%", [3, 3, 1]),  # 3.5
        ("100%", [7]),
        ("1%", [1] * 7),  # 0.07: at least one
    ],
)
def test_waves_follow_ansibles_serial_rule(text: str, sizes: list[int]) -> None:
    cut = waves(HOSTS, parse_max_unavailable(text))
    assert [len(w) for w in cut] == sizes
    assert [h for w in cut for h in w] == HOSTS  # inventory order, each host once


def test_no_hosts_no_waves() -> None:
    assert waves([], MaxUnavailable(2, percent=False)) == []


@pytest.mark.parametrize("text", ["0", "-1", "0%", "101%", "2.5", "", "x%", "1e3", "%", "1000000"])
def test_a_bad_max_unavailable_is_one_line(text: str) -> None:
    accepted = r"from 1 to 999999 \(e\.g\. 2\) or a percentage of them from 1% to 100% \(e\.g\. 25%\)$"
    with pytest.raises(ProvisionError, match=r"^--max-unavailable .*: give a number of hosts " + accepted):
        parse_max_unavailable(text)


BEFORE = {"gpu-count": "pass", "bf16-tflops": "pass", "nvcc": "fail", "topology": "skip"}


def test_the_gate_passes_what_did_not_regress_and_names_what_still_fails() -> None:
    after = {
        "gpu-count": ("pass", ""),
        "bf16-tflops": ("pass", ""),
        "nvcc": ("fail", "no nvcc"),
        "topology": ("skip", ""),
    }
    verdict = gate("g", True, "converged", BEFORE, after)
    assert verdict.passed and verdict.reasons == () and verdict.still_failing == ("nvcc",)


def test_the_gate_stops_on_a_check_that_got_worse() -> None:
    after = {
        "gpu-count": ("fail", "1 GPU(s), the spec has 2"),
        "bf16-tflops": ("pass", ""),
        "topology": ("fail", "PIX expected"),
        "new-check": ("fail", "new"),
    }
    verdict = gate("g", True, "converged", BEFORE, after)
    assert not verdict.passed
    assert verdict.reasons == (
        "gpu-count: pass -> fail: 1 GPU(s), the spec has 2",
        "topology: skip -> fail: PIX expected",
        "new-check: absent -> fail: new",
    )


def test_the_gate_fails_a_failed_apply_and_an_unread_host() -> None:
    assert gate("g", False, "failed at 'Install'", BEFORE, {}).reasons == ("apply: failed at 'Install'",)
    lost = gate("g", True, "converged", BEFORE, None, "host unreachable: ssh: timeout")
    assert not lost.passed and lost.reasons == ("verify: host unreachable: ssh: timeout",)


def test_hooks_are_argv_lists_and_undrain_needs_drained() -> None:
    hooks = Hooks(drain=["scontrol", "update", "nodename={host}"], drained=["lab-drained", "{host}"])
    assert hook_argv(hooks.drain or [], "gpu07; reboot") == ["scontrol", "update", "nodename=gpu07; reboot"]
    with pytest.raises(ValidationError, match="undrain needs drained too"):
        Hooks(undrain=["x", "{host}"])
    with pytest.raises(ValidationError, match="may not hold"):
        Hooks(drain=["{host}"])
    with pytest.raises(ValidationError):
        Hooks(drain="scontrol update nodename={host}")  # type: ignore[arg-type]  # a shell string


def test_the_fleet_file_carries_the_hooks_and_refuses_a_shell_string(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text('rollout:\n  drain: [/usr/bin/true, "{host}"]\n  timeout_s: 5\n')
    assert read_fleet_file(path).rollout == Hooks(drain=["/usr/bin/true", "{host}"], timeout_s=5)
    path.write_text("rollout:\n  drain: scontrol update nodename={host}\n")
    with pytest.raises(FleetError, match=r"fleet.yaml:2:3: rollout.drain: Input should be a valid list"):
        read_fleet_file(path)
    path.write_text("rollout:\n  undrian: [x]\n")
    with pytest.raises(FleetError, match="did you mean 'undrain'"):
        read_fleet_file(path)


def test_a_hook_runs_as_an_argv_and_reports_its_words(tmp_path: Path) -> None:
    assert rolling.run_hook(["true", "{host}"], "g", 5)[0] == 0
    rc, said = rolling.run_hook(
        [
            sys.executable,
            "-c",
            "import sys; print('busy', file=sys.stderr); sys.exit(int(sys.argv[1]))",
            "{host}",
        ],
        "3",
        5,
    )
    assert rc == 3 and said.endswith("exited 3: busy")
    assert rolling.run_hook(["no-such-program-here"], "g", 5) == (-1, "no-such-program-here: not found")
    slow = rolling.run_hook(["sleep", "5"], "g", 0.2)
    assert slow == (-1, "sleep: no end within 0.2 s")


def test_a_hook_program_the_trust_rule_refuses_is_not_run(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the trust rule's owners are root and the invoking user: needs another owner")
    program = tmp_path / "drain"
    program.write_text("#!/bin/sh\ntouch ran\n")
    program.chmod(0o777)  # writable by anyone
    rc, said = rolling.run_hook([str(program)], "g", 5)
    assert rc == -1 and "refused, the hook's program is not trusted" in said


def _record() -> RolloutRecord:
    return new_record(
        "20261203T000000.000000Z",
        inventory="/lab/hosts.ini",
        max_unavailable=MaxUnavailable(2, percent=False),
        pending=["a", "b", "c", "d", "e"],
        left_out={"f": "unchanged", "g": "host unreachable: timeout"},
    )


def test_a_new_record_names_every_host_and_round_trips(tmp_path: Path) -> None:
    record = _record()
    assert record.waves == [["a", "b"], ["c", "d"], ["e"]]
    assert record.named("untouched") == ["a", "b", "c", "d", "e"]
    assert record.named("left out") == ["f", "g"]
    assert record.next_wave() == 0
    path = tmp_path / "rollouts" / "r.json"
    rolling.save(path, record)
    assert path.stat().st_mode & 0o777 == 0o600
    assert rolling.read_record(path) == record
    assert rolling.is_rollout_record(path)


def test_a_stopped_record_resumes_at_its_first_wave_not_done() -> None:
    record = _record()
    for host in ("a", "b", "c"):
        record.hosts[host].state = "done"
    record.hosts["d"].state = "failed"
    record.hosts["d"].drained_by = "provision"
    assert record.next_wave() == 1
    assert record.summary() == "done: a, b, c; failed: d; untouched: e"
    for host in ("d", "e"):
        record.hosts[host].state = "done"
    assert record.next_wave() is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "a rollout record of format_version 1 was expected"),
        ('{"format_version": 2}', "a rollout record of format_version 1 was expected"),
        ('{"format_version": 1, "kind": "rollout"}', "not a rollout record: id: Field required"),
        ("{", "not a rollout record (not JSON"),
    ],
)
def test_a_bad_record_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ProvisionError, match=message.replace("(", r"\(")):
        rolling.read_record(path)
    assert not rolling.is_rollout_record(path) or "kind" in text


def test_the_json_document_lists_hosts_in_order() -> None:
    doc = rolling.rollout_json(_record(), Path("/r.json"))
    assert doc["format_version"] == rolling.JSON_FORMAT and doc["outcome"] == "running"
    assert [h["host"] for h in doc["hosts"]] == list("abcdefg")
    assert doc["hosts"][6] == {
        "host": "g",
        "wave": None,
        "state": "left out",
        "drained_by": None,
        "reasons": ["host unreachable: timeout"],
    }
    json.dumps(doc)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-unavailable", "0%", "-i", "hosts.ini"], "--max-unavailable '0%': give a number of hosts"),
        (["spec.yaml", "--max-unavailable", "2"], "--max-unavailable rolls out over hosts: give -i"),
        (["plan.json", "-i", "h.ini", "--max-unavailable", "2"], "plan.json is a saved plan of one host"),
    ],
)
def test_the_command_refuses_a_bad_rollout_in_one_line(args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from provision.cli import cli

    result = CliRunner().invoke(cli, ["apply", *args])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().startswith(f"error: {message}"), result.stderr


def _rollout(tmp_path: Path, hooks: Hooks | None) -> rolling.Rollout:
    from rich.console import Console

    from provision.apply.workflow import ApplyOptions
    from provision.fleet.mapping import Fleet

    fleet = Fleet(inventory=tmp_path / "hosts.ini", specs={h: tmp_path / "spec.yaml" for h in "abcdefg"})
    console = Console(file=io.StringIO(), width=200)
    per_host = {h: hooks for h in fleet.specs} if hooks is not None else {}
    return rolling.Rollout(
        rolling.ApplyAction(fleet),
        per_host,
        ApplyOptions(False, True, tmp_path),
        console,
        tmp_path / "r.json",
    )


def _scheduler(tmp_path: Path) -> Hooks:
    """Hooks over a real program keeping drains as files, as a scheduler keeps node states."""
    program = tmp_path / "sched.py"
    program.write_text(
        "import sys\nfrom pathlib import Path\nverb, mark = sys.argv[1], Path(sys.argv[2])\n"
        "if verb == 'drained': sys.exit(0 if mark.exists() else 1)\n"
        "if verb == 'drain': mark.touch()\n"
        "if verb == 'undrain': mark.unlink()\n"
        "if verb == 'broken': print('scheduler down', file=sys.stderr); sys.exit(2)\n"
    )
    base = [sys.executable, str(program)]
    return Hooks(
        drained=[*base, "drained", f"{tmp_path}/{{host}}"],
        drain=[*base, "drain", f"{tmp_path}/{{host}}"],
        undrain=[*base, "undrain", f"{tmp_path}/{{host}}"],
    )


def test_an_admins_drain_is_remembered_and_never_undone(tmp_path: Path) -> None:
    rollout, record = _rollout(tmp_path, _scheduler(tmp_path)), _record()
    (tmp_path / "a").touch()  # the admin drained a
    assert rolling.drain(rollout, record, "a") is None and rolling.drain(rollout, record, "b") is None
    assert (record.hosts["a"].drained_by, record.hosts["b"].drained_by) == ("admin", "provision")
    assert rolling.undrain(rollout, record, "a") is None and rolling.undrain(rollout, record, "b") is None
    assert (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert record.hosts["a"].drained_by == "admin" and record.hosts["b"].drained_by is None


def test_a_host_provision_drained_before_a_stop_is_not_drained_twice(tmp_path: Path) -> None:
    rollout, record = _rollout(tmp_path, _scheduler(tmp_path)), _record()
    record.hosts["c"].drained_by = "provision"  # from the stopped run; drained() would now say yes
    (tmp_path / "c").touch()
    assert rolling.drain(rollout, record, "c") is None
    assert record.hosts["c"].drained_by == "provision"  # not mistaken for an admin's drain
    assert rolling.undrain(rollout, record, "c") is None and not (tmp_path / "c").exists()


def test_a_failing_hook_fails_the_host_with_its_words(tmp_path: Path) -> None:
    hooks = _scheduler(tmp_path)
    broken = hooks.model_copy(update={"drained": [*(hooks.drained or [])[:2], "broken", "{host}"]})
    rollout, record = _rollout(tmp_path, broken), _record()
    why = rolling.drain(rollout, record, "d")
    assert why is not None and why.startswith("drained hook: ") and why.endswith("exited 2: scheduler down")
    assert record.hosts["d"].drained_by is None and not (tmp_path / "d").exists()


def test_without_hooks_nothing_is_drained(tmp_path: Path) -> None:
    rollout, record = _rollout(tmp_path, None), _record()
    assert rolling.drain(rollout, record, "a") is None and record.hosts["a"].drained_by is None


def test_ctrl_c_in_a_wave_stops_the_rollout_where_resume_takes_it_up(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    from provision.apply.workflow import INTERRUPTED
    from provision.errors import Interrupted

    rollout, record = _rollout(tmp_path, None), _record()
    mocker.patch.object(rolling, "planned_fleet", return_value=(None, None))
    mocker.patch.object(rolling, "apply_planned", return_value=INTERRUPTED)
    with pytest.raises(Interrupted):
        rolling.apply_and_gate(rollout, record, ["a", "b"])
    saved = rolling.read_record(rollout.path)
    assert saved.status == "stopped" and saved.named("failed") == ["a", "b"] and saved.next_wave() == 0
    assert saved.hosts["a"].reasons == ["apply interrupted by Ctrl-C"]


@pytest.mark.parametrize("untrusted", ["record", "inventory"])
def test_resume_reads_the_record_and_its_inventory_by_the_trust_rule(tmp_path: Path, untrusted: str) -> None:
    from typer.testing import CliRunner

    from provision.cli import cli

    inventory = tmp_path / "hosts.ini"
    inventory.write_text("a\nb\n")
    record = _record().model_copy(update={"inventory": str(inventory)})
    path = tmp_path / "rollouts" / "r.json"
    rolling.save(path, record)
    (path if untrusted == "record" else inventory).chmod(0o666)  # anyone may write it
    result = CliRunner().invoke(cli, ["resume", str(path), "--yes"])
    assert result.exit_code == 1, result.output
    assert (
        "not trusted" in result.stderr and str(path if untrusted == "record" else inventory) in result.stderr
    )


def test_hosts_and_groups_get_their_own_hooks(tmp_path: Path) -> None:
    slurm, k8s = HookSet(drain=["scontrol", "{host}"]), HookSet(drain=["kubectl", "drain", "{host}"])
    hooks = Hooks(drain=["default", "{host}"], hosts={"slurm": slurm, "k8s": k8s, "g7": slurm})
    groups = {"g1": ("all", "slurm"), "g2": ("all", "k8s"), "g3": ("all",), "g7": ("all", "k8s")}
    names = ["g1", "g2", "g3", "g7", "all", "slurm", "k8s"]
    per = hooks.for_hosts(groups, names)
    assert (per["g1"], per["g2"], per["g7"]) == (slurm, k8s, slurm)  # the host's own entry first
    assert per["g3"].drain == ["default", "{host}"]
    with pytest.raises(ProvisionError, match=r"^g9: its groups k8s, slurm name different rollout hooks$"):
        hooks.for_hosts({"g9": ("k8s", "slurm")}, names)
    with pytest.raises(ProvisionError, match=r"^rollout\.hosts\.slurm: no host or group 'slurm'"):
        hooks.for_hosts(groups, ["g1"])
