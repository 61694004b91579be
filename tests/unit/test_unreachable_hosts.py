"""A host that could not be detected is reported as such, with its reason, in every command's form:
never planned as a blank machine, never a quiet exit 0, never an empty ``hosts`` in the JSON
(README, "Exit codes": 1 when a host is unreachable). And ``checklist -i/--fleet --from-raw DIR``
reads the saved hosts offline, as ``plan -i --from-raw`` does.

Detection is replaced (pytest-mock) by facts the real detector gives an unreachable host
(:func:`provision.detect.runner.unknown_facts` with ssh's reason); the commands run for real through
typer's CliRunner.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture

from tests.unit.factories import A100X, DOWN, H200, H200_SPEC_RAW, by_host, invoke

pytestmark = pytest.mark.usefixtures("no_colour")


def test_apply_dry_run_with_every_host_unreachable_names_them_and_fails(
    inventory: Path, detected: Any
) -> None:
    result = invoke("apply", "-i", str(inventory), "-l", "b", "--dry-run", "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["outcome"] == "failed" and doc["run_dir"] is None
    assert doc["format_version"] == 2 and doc["hosts"] == [
        {
            "host": "b",
            "planned": "unreachable",
            "outcome": DOWN,
            "ok": False,
            "ansible": None,
            "support_bundle": None,
        }
    ]
    assert "Nothing to do" not in result.stderr
    assert f"Dry run: no host can be applied, Ansible was not started: b: {DOWN}" in result.stderr


def test_apply_dry_run_lists_every_host_with_what_it_would_get(inventory: Path, detected: Any) -> None:
    result = invoke("apply", "-i", str(inventory), "--dry-run", "--json")
    assert result.exit_code == 1, result.output  # b is unreachable
    doc = json.loads(result.stdout)
    assert doc["outcome"] == "dry-run" and by_host(doc)["b"]["outcome"] == DOWN
    assert by_host(doc)["a"]["outcome"].startswith("not applied (dry run): ")
    assert "Dry run: nothing was changed." in result.stderr


@pytest.mark.parametrize("as_json", [False, True])
def test_plan_spec_does_not_plan_an_unreachable_host(inventory: Path, detected: Any, as_json: bool) -> None:
    result = invoke("plan", A100X, "-i", str(inventory), "-l", "b", *(["--json"] if as_json else []))
    assert result.exit_code == 1, result.output
    assert "os-unknown" not in result.output and "repository" not in result.output
    assert "driver-preinstalled-missing" not in result.output
    if as_json:
        doc = json.loads(result.stdout)
        assert doc["format_version"] == 2 and doc["summary"]["unreachable"] == ["b"]
        b = {"host": "b", "state": "unreachable", "spec": A100X, "summary": DOWN, "unreachable": DOWN}
        assert doc["hosts"] == [b | {"plan": None}]
    else:
        assert f"b: {DOWN}" in result.stdout


def test_plan_spec_plans_the_reachable_hosts_and_names_the_others(inventory: Path, detected: Any) -> None:
    result = invoke("plan", A100X, "-i", str(inventory), "--json", "--detailed-exitcode")
    assert result.exit_code == 1, result.output  # unreachable outranks "changes pending"
    doc = json.loads(result.stdout)
    hosts = by_host(doc)
    assert list(hosts) == ["a", "b"] and hosts["b"]["unreachable"] == DOWN and hosts["b"]["plan"] is None
    assert hosts["a"]["plan"]["host"] == "a" and hosts["a"]["plan"]["steps"]


def test_plan_spec_out_refuses_an_unreachable_host(inventory: Path, detected: Any, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    result = invoke("plan", A100X, "-i", str(inventory), "-l", "b", "--out", str(out))
    assert result.exit_code == 1 and not out.exists()
    assert "--out saves one reachable host's plan" in result.stderr


def test_apply_spec_does_not_plan_an_unreachable_host(inventory: Path, detected: Any) -> None:
    result = invoke("apply", A100X, "-i", str(inventory), "--dry-run", "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["outcome"] == "failed" and by_host(doc)["b"]["outcome"] == DOWN
    planned = by_host(doc["plan"])
    assert planned["b"]["unreachable"] == DOWN and planned["b"]["plan"] is None
    assert planned["a"]["plan"]["host"] == "a" and by_host(doc)["a"]["outcome"].startswith("not applied: ")
    assert f"b: {DOWN}" in result.stderr and "os-unknown" not in result.stderr


@pytest.mark.parametrize("limit", [[], ["-l", "b"]])
def test_detect_inventory_fails_for_an_unreachable_host_in_one_document(
    inventory: Path, detected: Any, limit: list[str]
) -> None:
    result = invoke("detect", "-i", str(inventory), *limit, "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["unreachable"] == {"b": DOWN}
    assert [h["host"] for h in doc["hosts"]] == (["b"] if limit else ["a", "b"])
    assert f"b: {DOWN}" in result.stderr


def test_detect_inventory_text_names_the_unreachable_host(inventory: Path, detected: Any) -> None:
    result = invoke("detect", "-i", str(inventory), "-l", "b")
    assert result.exit_code == 1 and f"b: {DOWN}" in result.stderr


@pytest.fixture()
def saved_fleet(tmp_path: Path) -> tuple[Path, Path]:
    """A fleet file of one H200 host whose raw outputs were saved (``detect -i --save-raw``)."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("gpu01 ansible_host=192.0.2.10\n")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"inventory: {inventory}\nspecs:\n  all: {H200}\n")
    raw = tmp_path / "raw"
    shutil.copytree(H200_SPEC_RAW, raw / "gpu01")
    return fleet, raw


def test_fleet_checklist_reads_saved_hosts_offline(
    saved_fleet: tuple[Path, Path], tmp_path: Path, mocker: MockerFixture
) -> None:
    fleet, raw = saved_fleet
    play = mocker.patch("provision.ansible.run_play", side_effect=AssertionError("no Ansible offline"))
    ssh = mocker.patch("provision.hosts.detect_hosts", side_effect=AssertionError("no detection offline"))
    out = tmp_path / "out"
    result = invoke("checklist", "--fleet", str(fleet), "--from-raw", str(raw), "-o", str(out))
    assert result.exit_code == 0, result.output
    play.assert_not_called()
    ssh.assert_not_called()
    document = (out / "gpu01.md").read_text()
    assert f"read offline from {raw}/<host>/" in document and "host unreachable" not in document
    assert "On this host: confirmed.** 0000:00:06.0 BAR1 256.0 GiB (mapped above 4 GiB)" in document


def test_fleet_checklist_refuses_facts_in_one_line(saved_fleet: tuple[Path, Path], tmp_path: Path) -> None:
    fleet, _ = saved_fleet
    facts = tmp_path / "facts.json"
    facts.write_text("{}")
    result = invoke("checklist", "--fleet", str(fleet), "--facts", str(facts), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("error: --facts reads one host's facts; with -i or --fleet give")
