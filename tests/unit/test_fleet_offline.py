"""Fleets planned offline from saved raw outputs, `--forks` reaching Ansible, `--save-raw` per host.

The offline path is the real one (inventory read by Ansible's inventory manager, real raw files,
the real planner); only the Ansible run of live detection is replaced where a test says so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from typer.testing import CliRunner, Result

from provision.detect import runner as detect
from provision.detect.raw import read_raw
from tests.unit.factories import by_host

ROOT = Path(__file__).resolve().parents[2]
H200 = str(ROOT / "specs" / "h200-ubuntu2404.yaml")
H200_RAW = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec"


def invoke(*args: str) -> Result:
    from provision.cli import cli

    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, Path]:
    """An inventory of three hosts and a raw directory holding two of them (the H200 capture)."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu]\ngpu01\ngpu02\ngpu03\n", encoding="utf-8")
    raw = tmp_path / "raw"
    for host in ("gpu01", "gpu02"):
        shutil.copytree(H200_RAW, raw / host)
    return inventory, raw


def test_plan_inventory_from_raw_plans_each_saved_host_offline(saved: tuple[Path, Path]) -> None:
    inventory, raw = saved
    result = invoke("plan", H200, "-i", str(inventory), "--from-raw", str(raw), "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 1, result.output  # gpu03 has no saved outputs: unreachable
    assert doc["summary"]["unreachable"] == ["gpu03"]
    hosts = by_host(doc)
    assert "no saved outputs" in hosts["gpu03"]["unreachable"]
    for host in ("gpu01", "gpu02"):
        assert hosts[host]["state"] in ("unchanged", "to change", "refused"), hosts[host]
        assert hosts[host]["plan"]["host"] == host


def test_plan_from_raw_honours_the_limit_and_runs_no_ansible(
    saved: tuple[Path, Path], mocker: MockerFixture
) -> None:
    inventory, raw = saved
    play = mocker.patch("provision.ansible.run_play")
    result = invoke("plan", H200, "-i", str(inventory), "-l", "gpu01", "--from-raw", str(raw), "--json")
    doc = json.loads(result.stdout)
    assert list(by_host(doc)) == ["gpu01"], result.output
    assert result.exit_code in (0, 1) and by_host(doc)["gpu01"]["state"] != "unreachable"
    play.assert_not_called()


def test_plan_from_a_missing_raw_directory_is_one_error_line(saved: tuple[Path, Path]) -> None:
    inventory, raw = saved
    result = invoke("plan", H200, "-i", str(inventory), "--from-raw", str(raw / "nope"))
    assert result.exit_code == 1
    assert "no such directory" in result.output and "Traceback" not in result.output


def _collector_event(host: str, outputs: dict[str, Any]) -> dict[str, Any]:
    res = {"stdout": json.dumps(outputs)}
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": detect.COLLECTOR_TASK, "res": res}}


@pytest.fixture
def fake_play(mocker: MockerFixture, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every host detected through the play, ansible.run_play replaced: it feeds one collector
    event per inventory host to on_event."""
    from provision import ansible
    from provision.detect import direct

    monkeypatch.setenv(direct.ENV_SWITCH, "ansible")

    outputs = {k: v.model_dump() for k, v in read_raw(H200_RAW).items()}

    def run(data_dir: Path, playbook: str, inventory: str, **kw: Any) -> ansible.PlayResult:
        for host in ("gpu01", "gpu02", "gpu03"):
            kw["on_event"](_collector_event(host, outputs))
        return ansible.PlayResult(status="successful", rc=0)

    return mocker.patch("provision.ansible.run_play", side_effect=run)


def test_detect_inventory_save_raw_writes_one_directory_per_host_and_passes_forks(
    saved: tuple[Path, Path], tmp_path: Path, fake_play: Any
) -> None:
    inventory, _ = saved
    out = tmp_path / "bundle"
    result = invoke("detect", "-i", str(inventory), "--save-raw", str(out), "--forks", "17", "--json")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["gpu01", "gpu02", "gpu03"]
    assert read_raw(out / "gpu02") == read_raw(H200_RAW)
    assert fake_play.call_args.kwargs["forks"] == 17
    assert fake_play.call_args.kwargs["keep"] is False  # outputs held once: events are not kept
    assert [h["host"] for h in json.loads(result.stdout)["hosts"]] == ["gpu01", "gpu02", "gpu03"]


def test_saved_fleet_plans_offline_as_it_planned_live(
    saved: tuple[Path, Path], tmp_path: Path, fake_play: Any
) -> None:
    inventory, _ = saved
    out = tmp_path / "bundle"
    assert invoke("detect", "-i", str(inventory), "--save-raw", str(out)).exit_code == 0
    live = json.loads(invoke("plan", H200, "-i", str(inventory), "--json", "--forks", "3").stdout)
    offline = json.loads(invoke("plan", H200, "-i", str(inventory), "--from-raw", str(out), "--json").stdout)
    assert fake_play.call_args.kwargs["forks"] == 3
    for index, host in enumerate(("gpu01", "gpu02", "gpu03")):
        steps = by_host(offline)[host]["plan"]["steps"]
        assert steps and steps == live["hosts"][index]["plan"]["steps"]


@pytest.mark.parametrize(("host", "name"), [("a/b", "a_b"), (".hidden", "_hidden"), ("gpu01", "gpu01")])
def test_a_host_directory_never_leaves_the_raw_directory(host: str, name: str) -> None:
    assert detect.host_dir_name(host) == name


def test_hosts_with_the_same_output_share_one_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.detect import fact

    calls: list[str] = []

    class Echo(fact.Fact[str]):
        id = "echo-test"

        @staticmethod
        def parse(output: str, rc: int) -> str:
            calls.append(output)
            return output.upper()

    monkeypatch.setattr(fact, "_parse_cache", fact.OrderedDict())
    monkeypatch.setattr(fact, "PARSE_CACHE_SIZE", 2)
    assert [fact.parse_once(Echo, "a\n", 0) for _ in range(3)] == ["A\n"] * 3
    assert fact.parse_once(Echo, "a\n", 1) == "A\n" and fact.parse_once(Echo, "b\n", 0) == "B\n"
    assert calls == ["a\n", "a\n", "b\n"]  # rc is part of the key
    assert len(fact._parse_cache) == 2  # bounded: the oldest went
    fact.parse_once(Echo, "a\n", 0)
    assert calls[-1] == "a\n" and len(calls) == 4


def test_detect_from_raw_with_an_inventory_is_one_clear_error(saved: tuple[Path, Path]) -> None:
    inventory, raw = saved
    result = invoke("detect", "-i", str(inventory), "--from-raw", str(raw), "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["outcome"] == "error"
    assert "plan -i INVENTORY --from-raw DIR" in result.stderr


def test_a_plan_saved_from_an_inventory_is_sealed_as_one_saved_for_this_machine(
    saved: tuple[Path, Path], tmp_path: Path
) -> None:
    from provision.app import load_plan
    from provision.plan import seal

    inventory, raw = saved
    out = tmp_path / "gpu01.json"
    result = invoke(
        "plan", H200, "-i", str(inventory), "-l", "gpu01", "--from-raw", str(raw), "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    saved_plan = load_plan(out)
    assert saved_plan.host == "gpu01" and saved_plan.seal is not None
    seal.check_seal(saved_plan, str(out))  # apply takes it (raises DriftError when not)


def test_a_saved_plan_with_a_fleet_file_is_one_line_not_a_spec_error_per_key(
    saved: tuple[Path, Path], tmp_path: Path
) -> None:
    inventory, raw = saved
    out = tmp_path / "gpu01.json"
    invoke("plan", H200, "-i", str(inventory), "-l", "gpu01", "--from-raw", str(raw), "--out", str(out))
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"inventory: {inventory}\nspecs:\n  all: {H200}\n", encoding="utf-8")
    for command in ("apply", "plan"):
        result = invoke(
            command, str(out), "--fleet", str(fleet), "--dry-run" if command == "apply" else "--json"
        )
        assert result.exit_code == 1, result.output
        assert f"{out} is a saved plan: it names its one host; give it without --fleet" in result.output
        assert "Field required" not in result.output


def test_checklist_inventory_from_raw_reports_a_missing_host_as_plan_does(
    saved: tuple[Path, Path], tmp_path: Path
) -> None:
    """A host without DIR/<host>/: `checklist -i INV --from-raw DIR` exits 1 with plan's very line
    (fleet.summary.print_unreachable), and still writes the host's document, nothing observed."""
    inventory, raw = saved
    plan = invoke("plan", H200, "-i", str(inventory), "--from-raw", str(raw))
    checklist = invoke(
        "checklist", H200, "-i", str(inventory), "--from-raw", str(raw), "-o", str(tmp_path / "out")
    )
    line = f"gpu03: host unreachable: no saved outputs in {raw / 'gpu03'}"
    plan_lines = [ln for ln in plan.stdout.splitlines() if ln.startswith("gpu03:")]
    checklist_lines = [ln for ln in checklist.stderr.splitlines() if ln.startswith("gpu03:")]
    assert (plan.exit_code, checklist.exit_code) == (1, 1), checklist.output
    assert plan_lines == checklist_lines == [line]
    assert "host unreachable" in (tmp_path / "out" / "gpu03.md").read_text(encoding="utf-8")
    assert "host unreachable" not in (tmp_path / "out" / "gpu01.md").read_text(encoding="utf-8")
