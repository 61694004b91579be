"""A stopped rollout's resume runs with the first run's choices (issue 31): ``--reboot`` and
``--reboot-timeout``, ``--forks``, ``--replace-held``, and the same hosts from the same
inventory, ``-l``, spec or fleet file, read back from its record.

Both runs go through the commands (``apply --max-unavailable``, ``resume RECORD``); what
reaches hosts is replaced by the values those steps return: the plans (a fresh machine: every
host has changes), the baseline, and each wave's apply and gate, which also captures the
options and hosts the wave was run with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from typer.testing import CliRunner

from provision.cli import cli
from provision.fleet import rolling
from provision.fleet.rollout import Gate, RolloutRecord
from provision.hosts import FleetPlan, HostPlan
from provision.plan.planner import make_plan
from tests.unit.factories import CATALOG, ROOT, fresh_ubuntu, spec

SPEC = ROOT / "specs" / "dual-a100x.yaml"


def _fake_hosts(mocker: MockerFixture, broken: set[str]) -> list[dict[str, Any]]:
    """Plans, baseline and waves replaced (the hosts of ``broken`` fail their gate, as long as
    they are in it); each wave's hosts, options and fleet, in order."""
    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    mocker.patch.object(
        rolling,
        "planned_fleet",
        side_effect=lambda fleet: (None, FleetPlan({h: HostPlan(h, SPEC, plan) for h in fleet.hosts})),
    )
    mocker.patch.object(rolling, "baseline", return_value={})
    waves: list[dict[str, Any]] = []

    def wave(rollout: rolling.Rollout, record: RolloutRecord, hosts: list[str]) -> list[Gate]:
        waves.append({"hosts": hosts, "options": rollout.options, "fleet": rollout.action.fleet})  # type: ignore[attr-defined]
        gates = [
            Gate(h, h not in broken, () if h not in broken else ("gpu-count: pass -> fail",)) for h in hosts
        ]
        for verdict in gates:
            record.hosts[verdict.host].state = "done" if verdict.passed else "failed"
        return gates

    mocker.patch.object(rolling, "apply_and_gate", side_effect=wave)
    return waves


def _first_run(tmp_path: Path, targets: str, reboot: bool) -> list[str]:
    """The command line of the first run: four of five hosts in waves of two, by ``-l``."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("".join(f"gpu0{n}\n" for n in range(1, 6)), encoding="utf-8")
    if targets == "spec":
        where = [str(SPEC), "-i", str(inventory)]
    else:
        fleet = tmp_path / "fleet.yaml"
        fleet.write_text(f"inventory: {inventory}\nspecs:\n  all: {SPEC}\n", encoding="utf-8")
        where = ["--fleet", str(fleet)]
    more = ["--reboot", "--reboot-timeout", "900"] if reboot else []
    return [
        "apply",
        *where,
        "-l",
        "gpu01,gpu02,gpu03,gpu04",
        "--max-unavailable",
        "2",
        "--forks",
        "3",
        "--replace-held",
        *more,
        "--yes",
        "--json",
        "--runs-dir",
        str(tmp_path / "runs"),
    ]


@pytest.mark.parametrize(("targets", "reboot"), [("spec", True), ("fleet", False), ("spec", False)])
def test_a_stopped_rollout_resumes_with_the_first_runs_choices(
    targets: str, reboot: bool, tmp_path: Path, mocker: MockerFixture
) -> None:
    broken = {"gpu02"}
    waves = _fake_hosts(mocker, broken)
    first = CliRunner().invoke(cli, _first_run(tmp_path, targets, reboot))
    assert first.exit_code == 1, first.output  # stopped at wave 1: gpu02 failed its gate
    path = Path(json.loads(first.stdout)["record"])
    record = rolling.read_record(path)
    assert (record.status, record.reboot, record.forks, record.replace_held) == ("stopped", reboot, 3, True)
    assert record.reboot_timeout_s == (900 if reboot else 600)
    assert [w["hosts"] for w in waves] == [["gpu01", "gpu02"]]

    resumed = CliRunner().invoke(cli, ["resume", str(path), "--yes", "--json"])
    assert resumed.exit_code == 1, resumed.output  # gpu02 still broken: stopped at wave 1 again
    said = "--reboot --reboot-timeout 900" if reboot else "no --reboot"
    assert "--max-unavailable 2, --forks 3, -l gpu01,gpu02,gpu03,gpu04" in resumed.stderr
    assert f"--replace-held, {said}." in resumed.stderr
    json.loads(resumed.stdout)  # the choices are said on stderr: stdout stays one JSON document
    assert [w["hosts"] for w in waves] == [["gpu01", "gpu02"], ["gpu02"]]
    for ran in waves:
        _assert_first_runs_choices(ran, reboot)
    waves.clear()
    broken.clear()  # repaired: resume takes gpu02 again, then the later wave
    done = CliRunner().invoke(cli, ["resume", str(path), "--yes", "--json"])
    assert done.exit_code == 0, done.output
    assert [w["hosts"] for w in waves] == [["gpu02"], ["gpu03", "gpu04"]]
    for ran in waves:
        _assert_first_runs_choices(ran, reboot)


def _assert_first_runs_choices(ran: dict[str, Any], reboot: bool) -> None:
    """A wave ran with the options and hosts :func:`_first_run` gave."""
    options = ran["options"]
    assert (options.reboot.enabled, options.reboot.timeout_s) == (reboot, 900 if reboot else 600)
    assert (options.forks, options.replace_held, options.yes) == (3, True, True)
    assert options.runs_dir.name == "runs"
    assert list(ran["fleet"].specs) == ["gpu01", "gpu02", "gpu03", "gpu04"]  # -l as the first run's
    assert {p.resolve() for p in ran["fleet"].specs.values()} == {SPEC.resolve()} and ran["fleet"].forks == 3


def test_a_record_written_before_the_reboot_fields_resumes_without_reboot(tmp_path: Path) -> None:
    from provision.apply.workflow import ApplyOptions
    from provision.fleet.rollout import MaxUnavailable, new_record

    record = new_record(
        "r", inventory="/i", max_unavailable=MaxUnavailable(1, False), pending=["a"], left_out={}, reboot=True
    )
    path = tmp_path / "rollouts" / "r.json"
    rolling.save(path, record)
    older = json.loads(path.read_text())
    del older["reboot"], older["reboot_timeout_s"]
    path.write_text(json.dumps(older))
    again = rolling.read_record(path)
    assert (again.format_version, again.reboot, again.reboot_timeout_s) == (1, False, 600)
    options = rolling.resumed_options(again, ApplyOptions(dry_run=False, yes=False, runs_dir=tmp_path))
    assert not options.reboot.enabled and options.yes
    with_reboot = rolling.resumed_options(record, ApplyOptions(dry_run=False, yes=False, runs_dir=tmp_path))
    assert with_reboot.reboot.enabled and with_reboot.reboot.timeout_s == 600
