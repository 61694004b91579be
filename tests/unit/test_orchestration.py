"""One host is a fleet of one: the shared detect/plan, apply sequence and verify, without Ansible.

Detection and the playbook run are replaced (pytest-mock); the sequence, the outcomes and what each
form shows are the real code.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from rich.console import Console

from provision import hosts as hosts_mod
from provision.apply import runner
from provision.apply import workflow as apply_workflow
from provision.apply.views import JsonReport, SingleView
from provision.apply.workflow import ApplyOptions, apply_planned
from provision.detect.facts import Facts
from provision.detect.runner import unknown_facts
from provision.errors import ProvisionError
from provision.fleet.apply import FleetView
from provision.hosts import LOCALHOST, FleetPlan, Hosts, HostSpec, HostState, one_spec, plan_facts
from provision.plan.models import Plan
from provision.spec.models import Spec
from provision.verify.command import read_inputs
from provision.verify.hosts import verify_hosts
from tests.unit.factories import by_host, fresh_ubuntu, spec

ROOT = Path(__file__).parents[2]
SAVED = read_inputs(ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json")
DOWN = "host unreachable: Failed to connect to the host via ssh"


def ubuntu_spec() -> Spec:
    return spec(os={"distro": "ubuntu", "version": "24.04"})


def box(name: str) -> Facts:
    return fresh_ubuntu().model_copy(update={"host": name})


def two_hosts(tmp_path: Path) -> tuple[Hosts, FleetPlan]:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("a\nb\n")
    facts = {"a": box("a"), "b": box("b")}
    hosts = one_spec(inventory, facts, HostSpec(ubuntu_spec(), "s.yaml"))
    return hosts, plan_facts(hosts, facts)


def done(plan: Plan) -> Plan:
    """``plan`` as a fresh plan after a successful apply: nothing left to change."""
    return plan.model_copy(update={"steps": ()})


@pytest.fixture()
def console() -> Console:
    return Console(width=200, record=True, color_system=None)


@pytest.fixture()
def ansible_run(mocker: MockerFixture, tmp_path: Path) -> Any:
    """The playbook run: host ``a`` applied, ``b`` unreachable."""
    result = runner.ApplyResult(
        run_dir=tmp_path / "run",
        status="failed",
        rc=4,
        hosts={
            "a": runner.HostResult("a", ok=20, changed=9),
            "b": runner.HostResult("b", unreachable=1, failures=("Gathering: Connection refused",)),
        },
    )
    return mocker.patch.object(runner, "run_playbook", return_value=result)


@pytest.fixture()
def replan(mocker: MockerFixture, tmp_path: Path) -> Any:
    """Detection and planning after the run: every host planned again has nothing left."""

    def fresh(hosts: Hosts, names: list[str], catalog: Any = None) -> tuple[FleetPlan, dict[str, Any]]:
        some = Hosts(hosts.inventory, {n: hosts.specs[n] for n in names})
        facts = {n: box(n) for n in names}
        planned = plan_facts(some, facts)
        again = FleetPlan(
            {h: p.__class__(h, p.spec_path, done(p.plan)) for h, p in planned.hosts.items() if p.plan}
        )
        return again, facts

    return mocker.patch.object(apply_workflow, "plan_hosts_with_facts", side_effect=fresh)


@pytest.fixture(autouse=True)
def bundle(mocker: MockerFixture, tmp_path: Path) -> Any:
    """The support bundles after a failed run (their content: tests/unit/test_support.py)."""

    def write(directory: Path, inventory: Path, evidence: Any, runner_dir: Path | None) -> dict[str, Path]:
        return {h: directory / f"support-{h}.tar.gz" for h in evidence}

    return mocker.patch("provision.apply.bundles.write_bundles", side_effect=write)


@pytest.fixture(autouse=True)
def lock_play(mocker: MockerFixture) -> Any:
    """The lock play after the run: every converged host gets lock 1."""
    return mocker.patch(
        "provision.lock.record.run_lock_play",
        side_effect=lambda inventory, args, run_dir: {h: {"lock": {"number": 1}} for h in args},
    )


def options(tmp_path: Path, **over: Any) -> ApplyOptions:
    return ApplyOptions(**({"dry_run": False, "yes": True, "runs_dir": tmp_path / "runs"} | over))


def test_plan_facts_marks_unreachable_hosts_and_still_plans_them() -> None:
    facts = {"a": box("a"), "b": unknown_facts("b", DOWN)}
    planned = plan_facts(one_spec(None, facts, HostSpec(ubuntu_spec(), "s.yaml")), facts)
    assert planned.hosts["a"].state is HostState.CHANGE
    assert planned.hosts["b"].state is HostState.UNREACHABLE and planned.hosts["b"].unreachable == DOWN
    assert set(planned.plans) == {"a", "b"} and set(planned.pending) == {"a"}
    assert planned.plans["b"].blockers[0].rule == "os-unknown"  # what the single form shows
    assert planned.exit_code() == 1


def test_a_host_missing_from_detection_is_unreachable() -> None:
    hosts = Hosts(Path("inv"), {"a": HostSpec(ubuntu_spec(), "s.yaml")})
    assert plan_facts(hosts, {}).hosts["a"].unreachable == hosts_mod.NO_RESULT


def test_detection_runs_once_per_venv_and_limits_to_the_group(mocker: MockerFixture) -> None:
    detect = mocker.patch.object(hosts_mod, "detect_hosts", side_effect=lambda i, limit, v, *options: {})
    other = ubuntu_spec().model_copy(
        update={"python": ubuntu_spec().python.model_copy(update={"venv": "/opt/b"})}  # type: ignore[union-attr]
    )
    hosts = Hosts(
        Path("inv"),
        {"a": HostSpec(ubuntu_spec(), "a"), "b": HostSpec(other, "b"), "c": HostSpec(ubuntu_spec(), "c")},
    )
    hosts_mod.detect_by_venv(hosts)
    assert [c.args[1:3] for c in detect.call_args_list] == [("a,c", "/opt/provision/venv"), ("b", "/opt/b")]
    detect.reset_mock()
    hosts_mod.detect_by_venv(Hosts(None, {LOCALHOST: HostSpec(ubuntu_spec(), "s")}))
    assert detect.call_args.args[:2] == (None, None)  # this machine: in-process, no pattern


def test_hosts_without_a_spec_are_detected_in_the_run_without_a_venv(mocker: MockerFixture) -> None:
    detect = mocker.patch.object(hosts_mod, "detect_hosts", side_effect=lambda i, limit, v, *options: {})
    bare = ubuntu_spec().model_copy(update={"python": None})
    hosts = Hosts(Path("inv"), {"a": HostSpec(ubuntu_spec(), "a"), "b": HostSpec(bare, "b")})
    hosts_mod.detect_by_venv(hosts, without_spec=["c", "d"])
    assert [c.args[1:3] for c in detect.call_args_list] == [("a", "/opt/provision/venv"), ("b,c,d", None)]
    raw = mocker.patch("provision.detect.runner.facts_from_raw_hosts", return_value={})
    hosts_mod.detect_by_venv(replace(hosts, from_raw=Path("raw")), without_spec=["c"])
    assert raw.call_args.args[1:] == (["a", "b", "c"], {"a": "/opt/provision/venv", "b": None, "c": None})


def test_fleet_form_runs_pending_hosts_once_and_replans_the_reached(
    tmp_path: Path, console: Console, ansible_run: Any, replan: Any
) -> None:
    hosts, planned = two_hosts(tmp_path)
    code = apply_planned(hosts, planned, options(tmp_path, forks=3), FleetView(console))
    assert code == 1
    args, kwargs = ansible_run.call_args
    assert set(args[0]) == {"a", "b"} and args[1] == hosts.inventory
    assert (kwargs["limit"], kwargs["forks"]) == ("a,b", 3)  # exactly the pending hosts
    assert replan.call_args.args[1] == ["a"]  # b was unreachable: not detected again
    text = console.export_text()
    assert "Apply: 1 ok, 1 failed" in text and "converged" in text
    assert "unreachable: Gathering: Connection refused" in text
    assert "Run directory (logs, plans, Ansible artifacts):" in text


def test_only_converged_hosts_get_a_lock_built_from_their_fresh_facts(
    tmp_path: Path, console: Console, ansible_run: Any, replan: Any, lock_play: Any
) -> None:
    hosts, planned = two_hosts(tmp_path)
    apply_planned(hosts, planned, options(tmp_path), FleetView(console))
    inventory, args, run_dir = lock_play.call_args.args
    assert inventory == hosts.inventory and run_dir == tmp_path / "run"
    assert list(args) == ["a"]  # b was unreachable: nothing to lock
    assert args["a"]["state"] == "write" and args["a"]["venv"] == "/opt/provision/venv"
    assert args["a"]["lock"]["host"] == "a" and args["a"]["lock"]["spec"]["name"] == ubuntu_spec().name
    assert "a: lock 1 recorded in /var/lib/provision/lock.json" in console.export_text()


def test_a_failed_host_gets_a_support_bundle_and_its_path_is_printed(
    tmp_path: Path, console: Console, ansible_run: Any, replan: Any, bundle: Any
) -> None:
    hosts, planned = two_hosts(tmp_path)
    apply_planned(hosts, planned, options(tmp_path), FleetView(console))
    run_dir, inventory, evidence, events = bundle.call_args.args
    assert (run_dir, inventory, list(evidence), events) == (tmp_path / "run", hosts.inventory, ["b"], run_dir)
    # b was not reached: its plan, but no fresh facts, plan or raw outputs of it
    assert set(evidence["b"].documents) == {"plan.json"}
    assert json.loads(evidence["b"].documents["plan.json"])["host"] == "b"
    assert evidence["b"].raw is not None and not evidence["b"].raw.exists()
    assert f"Support bundle for b (mode 0600, secrets redacted): {tmp_path / 'run' / 'support-b.tar.gz'}" in (
        console.export_text().replace("\n", "")
    )


def test_single_form_shows_counts_and_what_did_not_converge(
    tmp_path: Path, console: Console, ansible_run: Any, replan: Any
) -> None:
    hosts, planned = two_hosts(tmp_path)
    report = JsonReport(True)
    code = apply_planned(hosts, planned, options(tmp_path), SingleView(console, report, "s"))
    assert code == 1
    text = console.export_text()
    assert "a: ok=20 changed=9 failed=0 unreachable=0" in text
    assert "b did not converge: unreachable: Gathering: Connection refused" in text
    assert "Converged" not in text
    outcomes = by_host(report.data)
    assert report.data["outcome"] == "failed" and outcomes["a"]["ansible"]["changed"] == 9
    assert [p["host"] for p in report.data["plan"]["hosts"]] == ["a", "b"]
    assert outcomes["b"]["support_bundle"] == str(tmp_path / "run" / "support-b.tar.gz")
    assert outcomes["a"]["support_bundle"] is None


def test_this_machine_is_applied_through_a_local_inventory(
    tmp_path: Path, console: Console, ansible_run: Any, replan: Any
) -> None:
    facts = {LOCALHOST: box(LOCALHOST)}
    hosts = one_spec(None, facts, HostSpec(ubuntu_spec(), "s.yaml"))
    ansible_run.return_value = runner.ApplyResult(
        tmp_path / "run", "successful", 0, {LOCALHOST: runner.HostResult(LOCALHOST, ok=20, changed=9)}
    )
    report = JsonReport(False)
    code = apply_planned(hosts, plan_facts(hosts, facts), options(tmp_path), SingleView(console, report, "s"))
    assert code == 0 and report.data["outcome"] == "applied" and report.data["converged"]
    args, kwargs = ansible_run.call_args
    assert args[1].name == "inventory.ini" and "ansible_connection=local" in args[1].read_text()
    assert kwargs["limit"] == LOCALHOST
    assert "Converged: a fresh plan shows no changes." in console.export_text()


@pytest.mark.parametrize(("dry_run", "line", "outcome"), [(True, "Dry run", "dry-run"), (False, "", "")])
def test_nothing_runs_on_a_dry_run_or_without_changes(
    tmp_path: Path, console: Console, ansible_run: Any, dry_run: bool, line: str, outcome: str
) -> None:
    hosts, planned = two_hosts(tmp_path)
    if not dry_run:
        planned = FleetPlan(
            {h: p.__class__(h, p.spec_path, done(p.plan)) for h, p in planned.hosts.items() if p.plan}
        )
        line, outcome = "Nothing to do: Ansible was not started.", "nothing-to-do"
    report = JsonReport(True)
    assert (
        apply_planned(hosts, planned, options(tmp_path, dry_run=dry_run), SingleView(console, report, "s"))
        == 0
    )
    assert line in console.export_text() and report.data["outcome"] == outcome
    ansible_run.assert_not_called()
    assert FleetView(console).stopped(planned, "dry-run") == 0


def test_single_form_refuses_the_whole_apply_fleet_form_runs_the_rest(
    tmp_path: Path, console: Console, ansible_run: Any, replan: Any
) -> None:
    facts = {"a": box("a"), "b": box("b").model_copy(update={"os": unknown_facts("b", DOWN).os})}
    hosts = one_spec(Path("inv"), facts, HostSpec(ubuntu_spec(), "s.yaml"))
    planned = plan_facts(hosts, facts)
    report = JsonReport(True)
    assert apply_planned(hosts, planned, options(tmp_path), SingleView(console, report, "s")) == 1
    assert report.data["outcome"] == "refused"
    assert console.export_text().count("os-unknown") == 1  # the refusal is said once
    ansible_run.assert_not_called()
    assert apply_planned(hosts, planned, options(tmp_path), FleetView(console)) == 1
    assert set(ansible_run.call_args.args[0]) == {"a"}


def test_confirmation_is_needed_without_yes(tmp_path: Path, console: Console, ansible_run: Any) -> None:
    hosts, planned = two_hosts(tmp_path)
    with pytest.raises(ProvisionError, match="pass --yes"):
        apply_planned(hosts, planned, options(tmp_path, yes=False), FleetView(console))
    ansible_run.assert_not_called()


def test_verify_this_machine_and_inventory_hosts_the_same_way(tmp_path: Path) -> None:
    h200 = spec(os={"distro": "ubuntu", "version": "24.04"})
    one = Hosts(None, {LOCALHOST: HostSpec(h200, "h200.yaml")})
    local = verify_hosts(one, gathered={LOCALHOST: SAVED}, save_raw=tmp_path / "here")
    assert local.hosts[LOCALHOST].report.host == SAVED.facts.host  # the replayed machine's name
    assert (tmp_path / "here" / "inputs.json").exists()
    many = Hosts(Path("inv"), {"h200": HostSpec(h200, "h200.yaml"), "gone": HostSpec(h200, "h200.yaml")})
    fleet = verify_hosts(many, gathered={"h200": SAVED}, save_raw=tmp_path / "fleet")
    assert (tmp_path / "fleet" / "h200" / "inputs.json").exists()
    assert fleet.hosts["gone"].unreachable == hosts_mod.NO_RESULT and fleet.failed[-1] == "gone"
    same = [(r.id, r.status) for r in fleet.hosts["h200"].report.results]
    assert same == [(r.id, r.status) for r in local.hosts[LOCALHOST].report.results]
    assert json.loads(local.hosts[LOCALHOST].report.model_dump_json())["spec"] == "h200.yaml"


@pytest.mark.parametrize("left", [(), ("pid 4242: /usr/bin/dpkg --configure -a",)])
def test_ctrl_c_is_interrupted_and_130_and_names_any_process_that_outlived_it(
    tmp_path: Path, console: Console, ansible_run: Any, replan: Any, left: tuple[str, ...]
) -> None:
    hosts, planned = two_hosts(tmp_path)
    ansible_run.return_value = runner.ApplyResult(tmp_path / "run", "canceled", 254, {}, left_running=left)
    report = JsonReport(True)
    code = apply_planned(hosts, planned, options(tmp_path), SingleView(console, report, "s"))
    text = console.export_text()
    assert code == 130 and report.data["outcome"] == "interrupted" and "Interrupted" in text
    assert report.data["left_running"] == list(left)
    assert ("nothing of it is left running" in text) == (not left)
    assert all(pid in text for pid in left)
