"""Every ``--json`` prints exactly one JSON object on stdout, with ``format_version``, in every outcome.

Each case runs the real command through typer's CliRunner; for the fleet forms detection and the
playbook run are replaced (pytest-mock), the sequence and what it prints are the real code.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from typer.testing import Result

from provision.apply import runner
from provision.detect.facts import Facts
from provision.fleet.verify import FleetVerify, HostVerify
from provision.jsonout import HOSTS_FORMAT
from provision.verify.models import Report
from tests.unit.factories import (
    A100X,
    DOWN,
    H200,
    H200_SPEC_RAW,
    ROOT,
    by_host,
    fresh_ubuntu,
    invoke,
    one_host,
    one_plan,
    one_report,
)

IMPOSSIBLE = str(ROOT / "specs" / "examples" / "impossible-a100x.yaml")
INPUTS = str(ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json")

pytestmark = pytest.mark.usefixtures("no_colour")


def document(result: Result, version: int = 1) -> dict[str, Any]:
    """stdout as exactly one JSON object of format ``version`` (json.loads refuses trailing text);
    version 2 is the hosts form (``hosts`` a list of per-host objects, :data:`HOSTS_FORMAT`)."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict), doc
    assert doc["format_version"] == version, doc
    if version == HOSTS_FORMAT:
        assert isinstance(doc["hosts"], list) and all("host" in h for h in doc["hosts"]), doc
    return doc


def error_of(result: Result, code: int, message: str) -> dict[str, Any]:
    assert result.exit_code == code, result.output
    doc = document(result)
    assert doc["outcome"] == "error" and doc["exit_code"] == code
    assert message in doc["error"]["message"], doc
    return doc


def test_validate_valid() -> None:
    result = invoke("validate", A100X, "--json")
    assert result.exit_code == 0
    assert document(result)["valid"] is True


def test_validate_warnings_stay_inside_the_document(tmp_path: Path) -> None:
    spec = tmp_path / "warn.yaml"
    text = Path(A100X).read_text().replace("  branch: 580 ", "  branch: 999 ")
    spec.write_text(text.replace('  version: "580.95.05"', ""))
    result = invoke("validate", str(spec), "--json")
    assert result.exit_code == 0, result.output
    doc = document(result)
    assert doc["valid"] is True and [f["rule"] for f in doc["findings"]] == ["driver-branch-unknown"]


def test_validate_refused() -> None:
    result = invoke("validate", IMPOSSIBLE, "--json")
    doc = document(result)
    assert result.exit_code == 1 and doc["valid"] is False
    assert "cuda-driver-floor" in {f["rule"] for f in doc["findings"]}


def test_validate_field_errors_are_a_document(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nos:\n  distro: ubuntu\n  version: '24.04'\n  colour: blue\n")
    doc = error_of(invoke("validate", str(bad), "--json"), 2, "unknown key")
    assert doc["error"]["type"] == "SpecError"
    assert f"{bad}:1:1: gpus: Field required" in doc["error"]["problems"], doc


def test_validate_missing_file_is_a_document(tmp_path: Path) -> None:
    error_of(invoke("validate", str(tmp_path / "no.yaml"), "--json"), 2, "no such spec file")


def test_detect_one_host_is_a_list_of_one_and_reads_back(tmp_path: Path) -> None:
    result = invoke("detect", "--from-raw", str(H200_SPEC_RAW), "--json")
    assert result.exit_code == 0
    doc = document(result, HOSTS_FORMAT)
    assert doc["unreachable"] == {}
    assert str(Facts.model_validate(one_host(doc)).driver.version) == "580.159.04"  # type: ignore[union-attr]
    saved = tmp_path / "facts.json"
    saved.write_text(result.stdout)
    assert invoke("plan", H200, "--facts", str(saved), "--json").exit_code == 0


def test_detect_error_is_a_document(tmp_path: Path) -> None:
    error_of(invoke("detect", "--from-raw", str(tmp_path), "--json"), 1, "no probe outputs")


def test_detect_inventory_is_one_document_of_hosts(inventory: Path, detected: Any, tmp_path: Path) -> None:
    result = invoke("detect", "-i", str(inventory), "--json")
    assert result.exit_code == 1, result.output  # b is unreachable
    doc = document(result, HOSTS_FORMAT)
    assert [h["host"] for h in doc["hosts"]] == ["a", "b"] and doc["unreachable"] == {"b": DOWN}
    saved = tmp_path / "facts.json"
    saved.write_text(result.stdout)
    assert invoke("checklist", A100X, "--facts", str(saved), "--host", "a").exit_code == 0


def test_plan_one_host() -> None:
    result = invoke("plan", H200, "--from-raw", str(H200_SPEC_RAW), "--json")
    assert result.exit_code == 0
    # The earlier capture lacks the binding and initramfs probes: no change, but not confirmed.
    assert one_plan(document(result, HOSTS_FORMAT))["summary"] == (
        "No changes planned, but the machine is not confirmed to match the spec: "
        "2 warning(s) name facts that could not be read."
    )


def test_plan_refused() -> None:
    result = invoke("plan", IMPOSSIBLE, "--from-raw", str(H200_SPEC_RAW), "--json")
    assert result.exit_code == 1
    doc = document(result, HOSTS_FORMAT)
    assert one_plan(doc)["blockers"] and doc["summary"]["refused"] == [one_host(doc)["host"]], doc


def test_plan_error_is_a_document(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"host": 3}')
    error_of(invoke("plan", H200, "--facts", str(facts), "--json"), 1, "not a provision facts file")


def test_plan_fleet(inventory: Path, detected: Any) -> None:
    result = invoke("plan", "-i", str(inventory), "--json")
    assert result.exit_code == 1, result.output  # b is unreachable
    hosts = by_host(document(result, HOSTS_FORMAT))
    assert hosts["b"]["unreachable"] == DOWN and hosts["a"]["plan"]["steps"]


def test_apply_refused_on_this_machine() -> None:
    result = invoke("apply", A100X, "--dry-run", "--json")
    assert result.exit_code == 1
    doc = document(result, HOSTS_FORMAT)
    plan = one_plan(doc["plan"])
    assert doc["outcome"] == "refused" and plan["blockers"][0]["rule"] == "os-mismatch"
    assert one_host(doc)["planned"] == "refused" and not one_host(doc)["ok"]


def test_apply_error_is_a_document(tmp_path: Path) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text("{}")
    error_of(invoke("apply", str(bad), "--dry-run", "--json"), 1, "not a provision plan")


def test_apply_fleet_dry_run(inventory: Path, detected: Any) -> None:
    result = invoke("apply", "-i", str(inventory), "--dry-run", "--json")
    assert result.exit_code == 1, result.output  # b is unreachable
    doc = document(result, HOSTS_FORMAT)
    assert doc["outcome"] == "dry-run" and doc["plan"]["summary"]["unreachable"] == ["b"]


def test_apply_fleet_applied(inventory: Path, detected: Any, mocker: MockerFixture, tmp_path: Path) -> None:
    ran = runner.ApplyResult(
        run_dir=tmp_path / "run",
        status="failed",
        rc=2,
        hosts={"a": runner.HostResult("a", ok=3, failed=1, failures=("Install: E: broken",))},
    )
    mocker.patch.object(runner, "run_playbook", return_value=ran)
    mocker.patch(
        "provision.apply.bundles.write_bundles", return_value={"a": tmp_path / "run" / "support-a.tar.gz"}
    )
    result = invoke("apply", "-i", str(inventory), "--yes", "--json", "--runs-dir", str(tmp_path))
    assert result.exit_code == 1, result.output
    doc = document(result, HOSTS_FORMAT)  # the support bundle's line went to stderr: still one document
    assert doc["outcome"] == "failed" and doc["run_dir"] == str(tmp_path / "run")
    assert by_host(doc)["a"]["outcome"] == "failed: Install: E: broken"
    assert by_host(doc)["a"]["ansible"]["failed"] == 1 and by_host(doc)["b"]["planned"] == "unreachable"
    assert by_host(doc)["a"]["support_bundle"] == str(tmp_path / "run" / "support-a.tar.gz")
    assert by_host(doc)["b"]["support_bundle"] is None


def test_apply_fleet_error_is_a_document(inventory: Path, detected: Any) -> None:
    # No terminal to confirm on: refused before Ansible starts.
    error_of(invoke("apply", "-i", str(inventory), "--json"), 1, "pass --yes")


def test_verify_replayed_inputs() -> None:
    result = invoke("verify", H200, "--inputs", INPUTS, "--json")
    assert result.exit_code == 0, result.output
    doc = one_report(document(result, HOSTS_FORMAT))
    assert doc["counts"] == {"pass": 29, "warn": 0, "fail": 0, "skip": 13}


def test_a_failed_verify_names_its_support_bundle_in_the_one_document(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    from provision import ansible
    from provision.verify.command import read_inputs

    h200x2 = str(ROOT / "specs" / "h200x2-ubuntu2404.yaml")  # two GPUs; the saved H200 run saw one
    mocker.patch("provision.verify.hosts.gather", return_value={"localhost": read_inputs(Path(INPUTS))})
    support = mocker.patch.object(ansible, "run_play", return_value=ansible.PlayResult("successful", 0, ()))
    mocker.patch("provision.lock.record.record_verify", return_value=mocker.Mock(numbers={}, failures={}))
    result = invoke("verify", h200x2, "--json", "--runs-dir", str(tmp_path))
    assert result.exit_code == 1, result.output
    doc = one_report(document(result, HOSTS_FORMAT))
    bundle = Path(doc["support_bundle"])
    assert doc["failed"] is True and bundle.is_file() and bundle.parent.parent == tmp_path
    assert bundle.name == "support-localhost.tar.gz"
    # This machine's support data is read over the local transport: no support.yml play.
    support.assert_not_called()
    with tarfile.open(bundle) as archive:
        assert {"host/dmesg-nvidia.txt", "host/dkms-status.txt"} <= set(archive.getnames())


def test_verify_error_is_a_document(tmp_path: Path) -> None:
    error_of(invoke("verify", H200, "--inputs", str(tmp_path / "no.json"), "--json"), 1, "no such")


def test_verify_fleet(inventory: Path, mocker: MockerFixture) -> None:
    report = Report(host="b", spec=A100X, results=[])
    gone = FleetVerify({"b": HostVerify("b", Path(A100X), report, DOWN)})
    mocker.patch("provision.fleet.verify.verify_fleet", return_value=gone)
    result = invoke("verify", "-i", str(inventory), "--json")
    assert result.exit_code == gone.exit_code(), result.output
    assert by_host(document(result, HOSTS_FORMAT))["b"]["unreachable"] == DOWN


@pytest.mark.parametrize("table", ["gpus", "drivers", "cuda", "torch"])
def test_catalog_table(table: str) -> None:
    result = invoke("catalog", table, "--json")
    assert result.exit_code == 0, result.output
    doc = document(result)
    assert set(doc) == {"format_version", table, "sources"} and doc[table]["rows"]


def test_catalog_error_is_a_document() -> None:
    error_of(invoke("catalog", "bios", "--json"), 1, "no catalog table 'bios'")


def test_apply_fleet_interrupted(
    inventory: Path, detected: Any, mocker: MockerFixture, tmp_path: Path
) -> None:
    ran = runner.ApplyResult(run_dir=tmp_path / "run", status="canceled", rc=254, hosts={})
    mocker.patch.object(runner, "run_playbook", return_value=ran)
    result = invoke("apply", "-i", str(inventory), "--yes", "--json", "--runs-dir", str(tmp_path))
    assert result.exit_code == 130, result.output
    doc = document(result, HOSTS_FORMAT)
    assert by_host(doc)["a"]["outcome"].startswith("interrupted (Ctrl-C): ")


def test_apply_fleet_reboot_not_back(
    inventory: Path, detected: Any, mocker: MockerFixture, tmp_path: Path
) -> None:
    from provision.hosts import FleetPlan, HostPlan
    from provision.lock.record import Recorded
    from provision.plan.planner import make_plan
    from tests.unit.factories import CATALOG, spec

    planned = make_plan(spec(), fresh_ubuntu(), CATALOG)  # installs the driver: a reboot is required
    converged = planned.model_copy(update={"steps": (), "reboot_required": False})
    ran = runner.ApplyResult(
        tmp_path / "run", "successful", 0, {"a": runner.HostResult("a", ok=30, changed=9)}
    )
    mocker.patch.object(runner, "run_playbook", return_value=ran)
    mocker.patch(
        "provision.apply.workflow.plan_hosts_with_facts",
        return_value=(FleetPlan({"a": HostPlan("a", None, converged)}), {}),
    )
    mocker.patch("provision.apply.workflow.record_locks", return_value=Recorded({}, {}))
    timed_out = "reboot failed: Timed out waiting for last boot time check (timeout=60)"
    reboots = mocker.patch("provision.reboot.remote.reboot_hosts", return_value={"a": timed_out})
    result = invoke(
        "apply",
        "-i",
        str(inventory),
        "--yes",
        "--json",
        "--runs-dir",
        str(tmp_path),
        "--reboot",
        "--reboot-timeout",
        "60",
    )
    assert result.exit_code == 1, result.output  # b unreachable, a did not come back
    doc = document(result, HOSTS_FORMAT)  # the reboot's progress lines went to stderr
    assert reboots.call_args.args[1] == ["a"]
    assert doc["outcome"] == "failed" and by_host(doc)["a"]["outcome"] == "converged"
    assert doc["reboot"] == [
        {"host": "a", "state": "not-back", "outcome": f"did not come back: {timed_out}", "ok": False}
    ]
    assert doc["after_reboot"] is None


def test_resume_without_a_record_is_a_nothing_to_do_document(tmp_path: Path) -> None:
    result = invoke("resume", str(tmp_path / "resume.json"), "--json")
    doc = document(result, HOSTS_FORMAT)
    assert result.exit_code == 0 and doc["outcome"] == "nothing-to-do" and doc["hosts"] == []


def test_resume_error_is_a_document(tmp_path: Path) -> None:
    bad = tmp_path / "resume.json"
    bad.write_text("{}")
    bad.chmod(0o600)
    error_of(invoke("resume", str(bad), "--json"), 1, "not a provision resume record")


def _keys(result: Result) -> tuple[list[str], list[str]]:
    """A hosts-form document's top-level keys and its first host's keys."""
    doc = document(result, HOSTS_FORMAT)
    assert doc["hosts"], doc
    return list(doc), list(doc["hosts"][0])


def test_every_command_has_one_shape_for_one_machine_and_an_inventory(
    inventory: Path, detected: Any, mocker: MockerFixture, tmp_path: Path
) -> None:
    """detect, plan, apply and verify: this machine (or one saved machine) is a list of one, with the
    same top-level keys, and the same keys per host, as an inventory's document (format 2)."""
    report = Report(host="b", spec=A100X, results=[])
    mocker.patch(
        "provision.fleet.verify.verify_fleet",
        return_value=FleetVerify({"b": HostVerify("b", Path(A100X), report, DOWN)}),
    )
    inv = str(inventory)
    forms = {
        "detect": (["detect", "--from-raw", str(H200_SPEC_RAW)], ["detect", "-i", inv]),
        "plan": (["plan", H200, "--from-raw", str(H200_SPEC_RAW)], ["plan", "-i", inv]),
        "plan SPEC -i": (["plan", H200, "--from-raw", str(H200_SPEC_RAW)], ["plan", A100X, "-i", inv]),
        "apply": (["apply", A100X, "--dry-run"], ["apply", "-i", inv, "--dry-run"]),
        "apply SPEC -i": (["apply", A100X, "--dry-run"], ["apply", A100X, "-i", inv, "--dry-run"]),
        "verify": (["verify", H200, "--inputs", INPUTS], ["verify", "-i", inv]),
    }
    inventories = {command: _keys(invoke(*fleet, "--json")) for command, (_, fleet) in forms.items()}
    mocker.stopall()  # this machine: detected for real (apply), or read from a saved capture
    for command, (one, _) in forms.items():
        single = invoke(*one, "--json")
        assert len(document(single, HOSTS_FORMAT)["hosts"]) == 1, (command, single.stdout)
        assert _keys(single) == inventories[command], command
