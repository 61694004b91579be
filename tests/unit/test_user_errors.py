"""What a first-time user runs into: each case ends in one clear line or the right label, and bad
input changes nothing (found by a fresh-user trial of the README).

The commands run for real through typer's CliRunner; where a command would detect or run GPU work,
that step is replaced (pytest-mock) so that a test can assert it was never reached.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pytest_mock import MockerFixture

from provision.detect.facts import Facts
from tests.unit.factories import A100X, H200, H200_SPEC_RAW, ROOT, by_host, invoke, mock_detection, one_host

INPUTS = ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json"

pytestmark = pytest.mark.usefixtures("no_colour")


# Output paths: checked before any work, one line, exit 1 (README, "Exit codes").


@pytest.mark.parametrize(
    ("option", "name", "why"),
    [
        ("--junit", "missing/v.xml", "directory {tmp}/missing does not exist"),
        ("--prometheus", "missing/v.prom", "directory {tmp}/missing does not exist"),
        ("--junit", ".", "is a directory; give a file name"),
        ("--save-raw", "taken.txt/raw", "{tmp}/taken.txt is not a directory"),
    ],
)
@pytest.mark.parametrize("fleet", [False, True])
def test_verify_output_paths_are_refused_before_any_gpu_work(
    tmp_path: Path, mocker: MockerFixture, option: str, name: str, why: str, fleet: bool
) -> None:
    (tmp_path / "taken.txt").write_text("x\n")
    local = mocker.patch("provision.verify.command.run_verify")
    remote = mocker.patch("provision.cli.verify._fleet_verify")
    target = ["-i", str(tmp_path / "hosts.ini")] if fleet else []
    path = tmp_path / name if name != "." else tmp_path
    result = invoke("verify", H200, *target, option, str(path))
    assert result.exit_code == 1, result.output
    assert result.output.strip() == f"error: {option} {path}: {why.format(tmp=tmp_path)}"
    assert not local.called and not remote.called
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.txt"]


def test_verify_output_path_refusal_is_one_json_document(tmp_path: Path, mocker: MockerFixture) -> None:
    work = mocker.patch("provision.verify.command.run_verify")
    result = invoke("verify", H200, "--json", "--junit", str(tmp_path / "missing" / "v.xml"))
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["outcome"] == "error" and "does not exist" in doc["error"]["message"]
    assert not work.called


def test_checklist_fleet_output_onto_a_file_is_refused_before_detection(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    taken = tmp_path / "taken.txt"
    taken.write_text("x\n")
    detect = mocker.patch("provision.fleet.checklist.detect_by_venv")
    result = invoke("checklist", "-i", str(tmp_path / "hosts.ini"), "-o", str(taken))
    assert result.exit_code == 1
    assert result.output.strip() == f"error: --output {taken}: exists and is not a directory"
    assert not detect.called and taken.read_text() == "x\n"


# Replayed verify inputs are labelled with the host they were read on, never as this machine.


def test_verify_inputs_of_a_local_verify_are_labelled_as_replayed(tmp_path: Path) -> None:
    junit = tmp_path / "v.xml"
    result = invoke("verify", H200, "--inputs", str(INPUTS), "--json", "--junit", str(junit))
    label = f"inputs replayed from {INPUTS}"
    assert one_host(json.loads(result.stdout))["host"] == label
    assert f'hostname="{label}"' in junit.read_text()
    text = invoke("verify", H200, "--inputs", str(INPUTS))
    assert f"on {label}" in text.stdout and "localhost" not in text.stdout


def test_verify_inputs_of_an_inventory_host_are_labelled_with_it(tmp_path: Path) -> None:
    saved = json.loads(INPUTS.read_text())
    saved["facts"]["host"] = "gpu07"
    inputs = tmp_path / "gpu07" / "inputs.json"
    inputs.parent.mkdir()
    inputs.write_text(json.dumps(saved))
    result = invoke("verify", H200, "--inputs", str(inputs), "--json")
    assert one_host(json.loads(result.stdout))["host"] == "gpu07"


# A host name the command does not know: refused in one line naming the known hosts.


@pytest.mark.parametrize(
    "command",
    [
        ["plan", H200, "-l", "b,gpu7"],
        ["plan", "-l", "b,gpu7"],
        ["detect", "-l", "b,gpu7"],
        ["apply", H200, "--dry-run", "-l", "b,gpu7"],
        ["verify", "-l", "b,gpu7"],
        ["lock", "show", "-l", "b,gpu7"],
        ["rollback", "--dry-run", "-l", "b,gpu7"],
        ["checklist", "-o", "OUT", "-l", "b,gpu7"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
@pytest.mark.parametrize("as_json", [False, True])
def test_a_limit_naming_an_unknown_host_is_refused_before_ansible(
    tmp_path: Path, mocker: MockerFixture, command: list[str], as_json: bool
) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"gpu07 provision_spec={H200}\nb provision_spec={H200}\n")
    play = mocker.patch("provision.ansible.run_play")
    detect = mocker.patch("provision.detect.runner.detect_remote")
    json_flag = ["--json"] if as_json and command[0] != "checklist" else []
    args = [str(tmp_path / "out") if a == "OUT" else a for a in command]
    result = invoke(*args, "-i", str(inventory), *json_flag)
    assert result.exit_code == 1, result.output
    known = "(its hosts: gpu07, b); did you mean 'gpu07'?"
    line = f"error: --limit b,gpu7: no host or group 'gpu7' in {inventory} {known}"
    assert result.stderr.strip() == line
    if json_flag:
        doc = json.loads(result.stdout)
        assert doc["outcome"] == "error" and doc["error"]["message"] == line.removeprefix("error: ")
    else:
        assert result.stdout == ""
    assert not play.called and not detect.called
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts.ini"]


# One host's bad provision_spec fails that host alone; the others are planned (README, "Exit codes").


@pytest.fixture()
def bad_spec_fleet(tmp_path: Path) -> Path:
    """``a`` on the A100X spec, ``c`` on a spec with a misspelt key, ``d`` on a spec file not there."""
    (tmp_path / "typo.yaml").write_text(Path(A100X).read_text().replace("  branch: 580", "  brnach: 580", 1))
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        f"a provision_spec={A100X}\nc provision_spec=typo.yaml\nd provision_spec=gone.yaml\n"
    )
    return inventory


def test_a_host_with_a_bad_spec_fails_alone_in_the_fleet_plan(
    bad_spec_fleet: Path, mocker: MockerFixture
) -> None:
    mock_detection(mocker, "host unreachable: not used")
    result = invoke("plan", "-i", str(bad_spec_fleet), "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["summary"]["to change"] == ["a"] and doc["summary"]["failed"] == ["c", "d"]
    assert by_host(doc)["a"]["plan"]["host"] == "a"
    typo = bad_spec_fleet.parent / "typo.yaml"
    assert by_host(doc)["c"]["summary"] == (
        f"spec not loaded: {typo}:20:1: driver.branch: Field required "
        "(and 1 more; `provision validate` lists them)"
    )
    assert (
        by_host(doc)["d"]["summary"]
        == f"spec not loaded: {bad_spec_fleet.parent / 'gone.yaml'}: no such spec file"
    )
    assert by_host(doc)["d"]["plan"] is None
    text = invoke("plan", "-i", str(bad_spec_fleet))
    assert text.exit_code == 1
    assert f"d: spec not loaded: {bad_spec_fleet.parent / 'gone.yaml'}: no such spec file" in text.stdout
    assert "Fleet: 3 host(s)" in text.stdout


def test_a_host_with_a_bad_spec_fails_alone_in_a_fleet_apply(
    bad_spec_fleet: Path, mocker: MockerFixture
) -> None:
    mock_detection(mocker, "host unreachable: not used")
    result = invoke("apply", "-i", str(bad_spec_fleet), "--dry-run", "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["outcome"] == "dry-run"
    assert by_host(doc)["a"]["outcome"].startswith("not applied (dry run): ")
    assert by_host(doc)["d"]["planned"] == "failed"
    assert by_host(doc)["d"]["outcome"].startswith("spec not loaded: ")


def test_one_bad_spec_for_every_host_is_the_command_s_one_line(
    bad_spec_fleet: Path, mocker: MockerFixture
) -> None:
    detect = mock_detection(mocker, "host unreachable: not used")
    result = invoke(
        "plan", str(bad_spec_fleet.parent / "gone.yaml"), "--fleet", str(_fleet_file(bad_spec_fleet))
    )
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {bad_spec_fleet.parent / 'gone.yaml'}: no such spec file"
    assert not detect.called


@pytest.mark.parametrize("command", ["plan", "detect"])
def test_one_bad_spec_for_every_host_is_the_fleet_command_s_one_line(
    bad_spec_fleet: Path, mocker: MockerFixture, command: str
) -> None:
    detect = mock_detection(mocker, "host unreachable: not used")
    typo = bad_spec_fleet.parent / "typo.yaml"
    fleet = bad_spec_fleet.parent / "all.yaml"
    fleet.write_text(f"inventory: {bad_spec_fleet.name}\nspecs:\n  all: typo.yaml\n")
    result = invoke(command, "--fleet", str(fleet), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["outcome"] == "error" and doc["error"]["message"].startswith(f"{typo}:20:1: ")
    assert not detect.called


def test_a_host_with_a_bad_spec_is_still_detected_in_a_fleet_detect(
    bad_spec_fleet: Path, mocker: MockerFixture
) -> None:
    from tests.unit.factories import fresh_ubuntu

    venvs: dict[str, str | None] = {}

    def detect(inv: Path | None, limit: str | None, venv: str | None, *rest: object) -> dict[str, Facts]:
        names = (limit or "").split(",")
        venvs.update(dict.fromkeys(names, venv))
        return {h: fresh_ubuntu(host=h) for h in names}

    mocker.patch("provision.hosts.detect_hosts", side_effect=detect)
    fleet = _fleet_file(bad_spec_fleet)
    result = invoke("detect", "--fleet", str(fleet), "--json")
    assert result.exit_code == 1, result.output
    # a is read with its spec's venv; c and d, whose specs do not load, without the venv probes
    assert venvs == {"a": "/opt/provision/venv", "c": None, "d": None}
    doc = json.loads(result.stdout)
    typo = bad_spec_fleet.parent / "typo.yaml"
    why = {
        "c": f"spec not loaded: {typo}:20:1: driver.branch: Field required "
        "(and 1 more; `provision validate` lists them)",
        "d": f"spec not loaded: {bad_spec_fleet.parent / 'gone.yaml'}: no such spec file",
    }
    assert doc["unreachable"] == why
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert list(hosts) == ["a", "c", "d"]
    for host, reason in why.items():  # detected all the same: only torch and the venv are not read
        assert hosts[host]["os"]["version_id"] == "24.04" and hosts[host]["packages"] == []
        assert hosts[host]["torch"] == {"unknown": reason} and hosts[host]["venv"] == {"unknown": reason}
    assert hosts["a"]["torch"] == {"unknown": "torch: no virtual environment at /opt/provision/venv"}
    text = invoke("detect", "--fleet", str(fleet))
    assert text.exit_code == 1
    assert text.stderr.strip().splitlines() == [f"{h}: {r}" for h, r in why.items()]
    assert text.stdout.count("24.04") >= 3


def _fleet_file(inventory: Path) -> Path:
    path = inventory.parent / "fleet.yaml"
    path.write_text(f"inventory: {inventory.name}\n")
    return path


def test_a_host_with_a_bad_spec_fails_alone_in_a_fleet_verify(
    bad_spec_fleet: Path, mocker: MockerFixture
) -> None:
    from provision.verify.command import read_inputs

    read = read_inputs(INPUTS)
    gathered = mocker.patch("provision.verify.hosts.gather", return_value={"a": read})
    record = mocker.patch("provision.cli.verify._record_verify")
    junit = bad_spec_fleet.parent / "v.xml"
    result = invoke("verify", "-i", str(bad_spec_fleet), "--json", "--junit", str(junit))
    assert result.exit_code == 1, result.output
    assert list(gathered.call_args.args[0].specs) == ["a"]  # only the host with a spec was read
    doc = json.loads(result.stdout)
    gone = f"spec not loaded: {bad_spec_fleet.parent / 'gone.yaml'}: no such spec file"
    assert by_host(doc)["d"]["unreachable"] == gone and by_host(doc)["d"]["failed"] is True
    assert [(r["id"], r["status"], r["detail"]) for r in by_host(doc)["d"]["report"]["results"]] == [
        ("spec", "fail", gone)
    ]
    assert by_host(doc)["a"]["unreachable"] is None and len(by_host(doc)["a"]["report"]["results"]) > 10
    assert set(doc["summary"]["failed"]) >= {"c", "d"}
    assert 'name="provision verify d"' in junit.read_text()
    assert list(record.call_args.args[1]) == ["a"]  # the lock records only the host that was verified


def test_a_host_with_a_bad_spec_fails_alone_in_a_fleet_checklist(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"a provision_spec={H200}\nd provision_spec=gone.yaml\n")
    shutil.copytree(H200_SPEC_RAW, tmp_path / "raw" / "a")
    out = tmp_path / "out"
    result = invoke("checklist", "-i", str(inventory), "--from-raw", str(tmp_path / "raw"), "-o", str(out))
    assert result.exit_code == 1, result.output
    gone = f"spec not loaded: {tmp_path / 'gone.yaml'}: no such spec file"
    assert result.stderr.strip().splitlines()[-1] == f"d: {gone}"
    assert sorted(p.name for p in out.iterdir()) == ["a.md", "index.md"]
    index = (out / "index.md").read_text()
    assert f"| d | {tmp_path / 'gone.yaml'} | 0 | 0 | 0 | 0 | {gone} | - |" in index
    assert "[a.md](a.md)" in index
