"""One machine named twice in an inventory: hosts reporting the same machine ID are refused, each
with one line, before anything changes; the other hosts go on; an Unknown ID matches nothing.

The CLI cases run the real offline path (`plan -i INV --from-raw DIR`: the inventory read by
Ansible's inventory manager, real raw files, the real planner), the hosts' directories the H200
capture with a machine-id file added.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from typer.testing import CliRunner, Result

from provision.detect.domains.identity import MachineId, MachineIdFact
from provision.detect.raw import ProbeOutput, format_raw
from provision.detect.runner import facts_from_raw
from provision.detect.unknown import Unknown
from provision.hosts import Hosts, HostSpec, HostState, plan_facts
from provision.machines import RULE, same_machines
from provision.spec.loader import load_spec
from provision.verify.command import read_inputs
from provision.verify.hosts import verify_hosts
from provision.verify.runs import VerifyInputs
from tests.unit.factories import by_host

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "specs" / "h200-ubuntu2404.yaml"
H200_RAW = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec"
ONE = "4f1c9a0e7b2d48c6a5e3f9d1c0b8a762"
OTHER = "9b0e2c4d6f8a41b3a5c7e9f1d3b5a7c9"


def _id(value: str) -> MachineId:
    return MachineId.of(value, "/etc/machine-id")


def test_every_host_of_a_shared_id_is_refused_naming_the_others() -> None:
    found = same_machines({"gpu1": _id(ONE), "gpu2": _id(ONE), "gpu3": _id(OTHER)})
    assert found == {
        "gpu1": "the same machine as gpu2 (machine-id 4f1c9a0e…): name it once in the inventory",
        "gpu2": "the same machine as gpu1 (machine-id 4f1c9a0e…): name it once in the inventory",
    }


def test_a_group_of_three_names_both_others() -> None:
    found = same_machines({"a": _id(ONE), "b": _id(ONE), "c": _id(ONE)})
    assert found["b"].startswith("the same machine as a, c (")


def test_distinct_or_unknown_ids_refuse_nothing() -> None:
    unknown = Unknown(unknown="no machine ID: /etc/machine-id is empty")
    assert same_machines({"gpu1": _id(ONE), "gpu2": _id(OTHER)}) == {}
    assert same_machines({"gpu1": unknown, "gpu2": unknown, "gpu3": None}) == {}


def test_two_local_connection_hosts_are_this_machine_whatever_their_ids() -> None:
    """Ansible's local connection runs on the controller: two such names are one machine even where
    the image's /etc/machine-id is empty (the lent H200's is); one local host, or local beside an
    ssh host, refuses nothing."""
    empty = Unknown(unknown="no machine ID: /etc/machine-id is empty")
    found = same_machines({"gpu": empty, "gpu-again": empty, "far": _id(OTHER)}, local={"gpu", "gpu-again"})
    here = "(ansible_connection=local: this machine): name it once in the inventory"
    assert found == {
        "gpu": f"the same machine as gpu-again {here}",
        "gpu-again": f"the same machine as gpu {here}",
    }
    assert same_machines({"gpu": empty, "far": empty}, local={"gpu"}) == {}
    # a shared ID says so first: the local line is only for hosts the IDs did not already refuse
    assert same_machines({"a": _id(ONE), "b": _id(ONE)}, local={"a", "b"})["a"].endswith(
        "(machine-id 4f1c9a0e…): name it once in the inventory"
    )


def test_plan_of_an_inventory_naming_this_machine_twice_refuses_both(tmp_path: Path) -> None:
    """Live: ``plan -i`` over two ``ansible_connection=local`` names of this build machine."""
    from provision.cli import cli

    inventory = tmp_path / "hosts.ini"
    local = f"ansible_connection=local ansible_python_interpreter={sys.executable}"
    inventory.write_text(f"gpu {local}\ngpu-again {local}\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["plan", str(H200), "-i", str(inventory), "--json"])
    hosts = by_host(json.loads(result.stdout))
    assert result.exit_code == 1, result.output
    assert _same_machine(hosts["gpu"])[0].startswith("the same machine as gpu-again (")
    assert _same_machine(hosts["gpu-again"])[0].startswith("the same machine as gpu (")


def test_saved_captures_without_the_probe_load_with_the_id_unknown() -> None:
    facts = facts_from_raw(H200_RAW, host="gpu1")
    assert facts.machine_id == Unknown(unknown="not probed")


def _host_dir(raw: Path, host: str, machine_id: str | None) -> None:
    shutil.copytree(H200_RAW, raw / host)
    if machine_id is not None:
        lines = f"/etc/machine-id: {machine_id}\n/var/lib/dbus/machine-id: {machine_id}\n"
        out = ProbeOutput(command=" ".join(MachineIdFact.argv), output=lines, rc=0)
        (raw / host / f"{MachineIdFact.id}.txt").write_text(format_raw(out), encoding="utf-8")


def _plan(tmp_path: Path, ids: dict[str, str | None]) -> Result:
    from provision.cli import cli

    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu]\n" + "".join(f"{h}\n" for h in ids), encoding="utf-8")
    for host, machine_id in ids.items():
        _host_dir(tmp_path / "raw", host, machine_id)
    args = ["plan", str(H200), "-i", str(inventory), "--from-raw", str(tmp_path / "raw"), "--json"]
    return CliRunner().invoke(cli, args)


def _same_machine(host: dict[str, object]) -> list[str]:
    plan = host["plan"]
    assert isinstance(plan, dict)
    return [b["message"] for b in plan["blockers"] if b["rule"] == RULE]


def test_plan_refuses_the_hosts_that_are_one_machine_and_plans_the_others(tmp_path: Path) -> None:
    result = _plan(tmp_path, {"gpu1": ONE, "gpu2": ONE, "gpu3": OTHER})
    hosts = by_host(json.loads(result.stdout))
    assert result.exit_code == 1, result.output
    assert hosts["gpu1"]["state"] == hosts["gpu2"]["state"] == "refused"
    assert _same_machine(hosts["gpu2"]) == [
        "the same machine as gpu1 (machine-id 4f1c9a0e…): name it once in the inventory"
    ]
    assert _same_machine(hosts["gpu1"])[0].startswith("the same machine as gpu2 ")
    assert _same_machine(hosts["gpu3"]) == []
    assert ONE not in result.stdout and ONE[:9] not in result.stdout  # only the first 8 hex shown


@pytest.mark.parametrize(
    "ids",
    [
        {"gpu1": ONE, "gpu2": OTHER},
        {"gpu1": None, "gpu2": None},
        {"gpu1": "uninitialized", "gpu2": "uninitialized"},
    ],
    ids=["distinct", "not-probed", "uninitialized"],
)
def test_plan_refuses_nothing_when_ids_differ_or_are_unknown(
    tmp_path: Path, ids: dict[str, str | None]
) -> None:
    result = _plan(tmp_path, ids)
    hosts = by_host(json.loads(result.stdout))
    assert [_same_machine(h) for h in hosts.values()] == [[], []], result.output


def test_the_refusal_is_the_first_blocker_so_apply_outcomes_name_it(tmp_path: Path) -> None:
    for host in ("a", "b"):
        _host_dir(tmp_path, host, ONE)
    facts = {h: facts_from_raw(tmp_path / h, host=h) for h in ("a", "b")}
    held = HostSpec(load_spec(H200), str(H200))
    planned = plan_facts(Hosts(tmp_path / "hosts.ini", {"a": held, "b": held}), facts)
    assert planned.with_state(HostState.REFUSED) == ["a", "b"]
    assert all(p.plan is not None and p.plan.blockers[0].rule == RULE for p in planned.hosts.values())
    assert planned.pending == {}


SAVED_INPUTS = ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json"


def _inputs(machine_id: str) -> VerifyInputs:
    saved = read_inputs(SAVED_INPUTS)
    facts = saved.facts.model_copy(update={"machine_id": _id(machine_id)})
    return saved.model_copy(update={"facts": facts})


def _held(names: tuple[str, ...]) -> Hosts:
    held = HostSpec(load_spec(H200), str(H200))
    return Hosts(Path("hosts.ini"), dict.fromkeys(names, held))


def test_verify_reads_ids_first_and_never_loads_the_gpus_of_a_machine_named_twice(
    mocker: MockerFixture,
) -> None:
    found = {
        h: _inputs(i).facts.model_copy(update={"host": h}) for h, i in (("a", ONE), ("b", ONE), ("c", OTHER))
    }
    pass_ = mocker.patch("provision.detect.runner.detect_remote", return_value=found)
    gather = mocker.patch("provision.verify.hosts.gather", return_value={"c": _inputs(OTHER)})
    mocker.patch("provision.verify.hosts.routes_of", return_value={})
    verified = verify_hosts(_held(("a", "b", "c")))
    assert [p.id for p in pass_.call_args.kwargs["probes"]] == [MachineIdFact.id]
    assert list(gather.call_args.args[0].specs) == ["c"]  # only c's GPUs are loaded
    for host, other in (("a", "b"), ("b", "a")):
        (result,) = verified.hosts[host].report.results
        assert (result.id, result.status) == (RULE, "fail")
        assert (
            result.detail
            == f"the same machine as {other} (machine-id 4f1c9a0e…): name it once in the inventory"
        )
    assert all(r.id != RULE for r in verified.hosts["c"].report.results)
    assert verified.failed[:2] == ["a", "b"]


def test_verify_of_replayed_inputs_refuses_a_shared_id_and_checks_distinct_ones() -> None:
    shared = verify_hosts(_held(("a", "b")), gathered={"a": _inputs(ONE), "b": _inputs(ONE)})
    assert [v.report.results[0].id for v in shared.hosts.values()] == [RULE, RULE]
    distinct = verify_hosts(_held(("a", "b")), gathered={"a": _inputs(ONE), "b": _inputs(OTHER)})
    assert all(r.id != RULE for v in distinct.hosts.values() for r in v.report.results)
