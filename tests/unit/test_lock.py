"""The lock (provision_lock module, lock documents, lock show) and rollback's planning pieces."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import stat
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pytest_mock import MockerFixture
from rich.console import Console
from typer.testing import CliRunner

from provision import jsonout
from provision.cli import cli
from provision.errors import ProvisionError
from provision.hosts import FleetPlan, HostPlan, HostState
from provision.lock.model import Lock, lock_document, spec_digest
from provision.lock.show import lock_json, render_locks
from provision.lock.store import HostLocks
from provision.plan.planner import make_plan
from provision.rollback import MISSING_RULE, choose, locked_spec, missing, refuse_missing
from tests.unit.factories import CATALOG, ROOT, by_host, fresh_ubuntu, pkg, spec


def _module() -> ModuleType:
    path = ROOT / "playbooks" / "library" / "provision_lock.py"
    loaded = importlib.util.spec_from_file_location("provision_lock_module", path)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


MODULE = _module()


def _doc(**over: Any) -> dict[str, Any]:
    s = spec()
    doc: dict[str, Any] = {
        "format_version": 1,
        "created_at": "2026-12-01T10:00:00Z",
        "host": "gpu01",
        "provision_version": "0.1.0",
        "run_dir": "/var/log/provision/runs/x",
        "spec_path": "specs/dual-a100x.yaml",
        "spec_digest": spec_digest(s),
        "spec": s.model_dump(mode="json"),
        "repository": {"url": "https://example.org/repo/", "fingerprint": "A" * 40},
        "packages": [{"name": "nvidia-open", "version": "580.95.05-1", "hold": True}],
        "pins": None,
        "verify": None,
    }
    return doc | over


def _venv(root: Path) -> Path:
    site = root / "venv" / "lib" / "python3.12" / "site-packages"
    torch = site / "torch-2.11.0+cu130.dist-info"
    torch.mkdir(parents=True)
    (torch / "RECORD").write_text("torch/__init__.py,sha256=abc,10\n")
    direct = site / "Typing_Extensions-4.12.2.dist-info"
    direct.mkdir()
    (direct / "RECORD").write_text("typing_extensions.py,,\n")
    url = {"url": "file:///w/t.whl", "archive_info": {"hashes": {"sha256": "f" * 64}}}
    (direct / "direct_url.json").write_text(json.dumps(url))
    return root / "venv"


def test_write_numbers_locks_keeps_history_and_skips_an_equal_lock(tmp_path: Path) -> None:
    directory = tmp_path / "var" / "lib" / "provision"
    changed, first = MODULE.write(directory, _doc(), None)
    assert changed and first["number"] == 1
    for path, mode in ((directory, 0o755), (directory / "locks", 0o755), (directory / "lock.json", 0o644)):
        assert stat.S_IMODE(os.lstat(path).st_mode) == mode, path
    again, current = MODULE.write(directory, _doc(created_at="2026-12-02T00:00:00Z", run_dir="/other"), None)
    assert not again and current["number"] == 1  # same state: no new entry
    upgraded = _doc(packages=[{"name": "nvidia-open", "version": "580.126.20-1", "hold": True}])
    changed, second = MODULE.write(directory, upgraded, None)
    assert changed and second["number"] == 2
    assert [d["number"] for d in MODULE.history(directory)] == [1, 2]
    assert json.loads((directory / "lock.json").read_text()) == second
    assert not [p for p in directory.rglob(".*")]  # no temporary file left behind


def test_wheels_carry_record_digest_and_pip_archive_hashes(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    wheels = {w["name"]: w for w in MODULE.wheels(str(venv))}
    record = (venv / "lib/python3.12/site-packages/torch-2.11.0+cu130.dist-info/RECORD").read_bytes()
    assert wheels["torch"] == {
        "name": "torch",
        "version": "2.11.0+cu130",
        "record_sha256": hashlib.sha256(record).hexdigest(),
        "hashes": {},  # installed from an index: pip records no archive hash
    }
    assert wheels["typing-extensions"]["hashes"] == {"sha256": "f" * 64}
    changed, lock = MODULE.write(tmp_path / "state", _doc(), str(venv))
    assert changed and {w["name"] for w in lock["venv"]["wheels"]} == {"torch", "typing-extensions"}


def test_a_lock_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "provision"
    directory.mkdir()
    directory.chmod(0o777)
    with pytest.raises(MODULE.LockError, match="writable only by it"):
        MODULE.write(directory, _doc(), None)
    assert not (directory / "lock.json").exists()


def test_verified_records_the_result_in_the_current_lock_and_its_history(tmp_path: Path) -> None:
    MODULE.write(tmp_path, _doc(), None)
    result = {
        "at": "2026-12-01T11:00:00Z",
        "spec_digest": spec_digest(spec()),
        "passed": True,
        "counts": {"pass": 24},
        "failed": [],
    }
    changed, lock = MODULE.verified(tmp_path, result)
    assert changed and lock["verify"] == result
    assert MODULE.history(tmp_path)[0]["verify"] == result
    assert Lock.model_validate(lock).verify is not None
    assert MODULE.verified(tmp_path / "none", result) == (False, None)
    other = result | {"spec_digest": spec_digest(spec(description="another machine"))}
    assert MODULE.verified(tmp_path, other) == (False, None)  # another spec says nothing of this lock


def test_served_reads_apt_cache_madison_and_never_passes_a_bad_name(mocker: MockerFixture) -> None:
    madison = (
        "nvidia-open | 580.95.05-1 | https://developer.download.nvidia.com/compute/cuda/repos/"
        "ubuntu2404/x86_64  Packages\n"
        "nvidia-open | 580.82.07-1 | https://developer.download.nvidia.com/compute/cuda/repos/"
        "ubuntu2404/x86_64  Packages\n"
    )
    run = mocker.patch.object(
        MODULE.subprocess, "run", return_value=subprocess.CompletedProcess([], 0, madison, "")
    )
    found = MODULE.served(["nvidia-open", "libnccl2", "-oDebug=1", "a;b"])
    assert found == {"nvidia-open": ["580.95.05-1", "580.82.07-1"], "libnccl2": []}
    assert run.call_args.args[0] == ["apt-cache", "madison", "nvidia-open", "libnccl2"]


def test_lock_document_records_packages_holds_pins_repository_and_spec_digest() -> None:
    s = spec()
    facts = fresh_ubuntu(
        packages=(
            pkg("nvidia-open", "580.95.05-1", "hold ok installed"),
            pkg("libnccl2", "2.28.3-1+cuda13.0"),
            pkg("nvidia-utils", "580.82.07-1", "deinstall ok config-files"),
        )
    )
    plan = make_plan(s, facts, CATALOG, spec_path="specs/dual-a100x.yaml")
    doc = lock_document(plan, facts, CATALOG, "/runs/1")
    assert doc["packages"] == [
        {"name": "libnccl2", "version": "2.28.3-1+cuda13.0", "hold": False},
        {"name": "nvidia-open", "version": "580.95.05-1", "hold": True},
    ]
    repo = CATALOG.repository(s.os.repo_code, arch=s.os.architecture)
    assert repo is not None and doc["repository"] == {"url": repo.url, "fingerprint": repo.fingerprint}
    assert doc["spec_digest"] == spec_digest(s) and doc["spec_digest"].startswith("sha256:")
    assert spec_digest(spec(description="another")) != doc["spec_digest"]
    assert Lock.model_validate(doc | {"number": 1}).package("nvidia-open") is not None


def _lock(number: int, **over: Any) -> Lock:
    return Lock.model_validate(_doc(**over) | {"number": number})


def _host(*numbers: int, current: int | None = None) -> HostLocks:
    history = tuple(_lock(n) for n in numbers)
    now = next((lock for lock in history if lock.number == current), history[-1] if history else None)
    return HostLocks("gpu01", now, history, {})


def test_choose_takes_the_lock_before_the_current_or_the_one_named() -> None:
    assert choose(_host(1, 2, 3), None).number == 2
    assert choose(_host(1, 2, 3), 1).number == 1
    with pytest.raises(ProvisionError, match="gpu01: no lock 7; the host has 1, 2, 3"):
        choose(_host(1, 2, 3), 7)
    with pytest.raises(ProvisionError, match="lock 1 is the first; no earlier lock"):
        choose(_host(1), None)
    with pytest.raises(ProvisionError, match="no lock in /var/lib/provision"):
        choose(_host(), None)


def test_locked_spec_narrows_only_where_the_spec_would_resolve_to_another_version() -> None:
    branch_only = spec(driver__version=None, cuda__cudnn="9.14")
    packages = [
        {"name": "nvidia-open", "version": "580.82.07-1", "hold": True},
        {"name": "libcudnn9-cuda-13", "version": "9.14.0.64-1", "hold": True},
    ]
    lock = _lock(1, spec=branch_only.model_dump(mode="json"), packages=packages)
    newer = {
        "nvidia-open": ("580.95.05-1", "580.82.07-1"),
        "libcudnn9-cuda-13": ("9.14.1.2-1", "9.14.0.64-1"),
    }
    narrowed = locked_spec(lock, CATALOG, newer).spec
    assert str(narrowed.driver.version) == "580.82.07"
    assert narrowed.cuda is not None and str(narrowed.cuda.cudnn) == "9.14.0.64"
    only = {"nvidia-open": ("580.82.07-1",), "libcudnn9-cuda-13": ("9.14.0.64-1",)}
    assert locked_spec(lock, CATALOG, only).spec == branch_only  # pins stay the spec's own


def test_missing_lists_versions_neither_installed_nor_served_and_refuses_the_host() -> None:
    packages = [
        {"name": "nvidia-open", "version": "580.82.07-1", "hold": True},
        {"name": "libnccl2", "version": "2.28.3-1+cuda13.0", "hold": True},
        {"name": "nvidia-utils", "version": "580.82.07-1", "hold": True},
    ]
    lock = _lock(1, packages=packages)
    facts = fresh_ubuntu(packages=(pkg("libnccl2", "2.28.3-1+cuda13.0"), pkg("nvidia-utils", "580.95.05-1")))
    served = {"nvidia-utils": ("580.82.07-1",)}
    assert missing(lock, facts, served) == ["nvidia-open=580.82.07-1"]

    plan = make_plan(spec(), facts, CATALOG)
    planned = FleetPlan({"gpu01": HostPlan("gpu01", None, plan)})
    refused = refuse_missing(planned, {"gpu01": (1, ["nvidia-open=580.82.07-1"])})
    assert refused.hosts["gpu01"].state is HostState.REFUSED
    blocker = refused.hosts["gpu01"].plan.blockers[-1]  # type: ignore[union-attr]
    assert blocker.rule == MISSING_RULE
    assert blocker.message == "lock 1 needs versions the repository no longer serves: nvidia-open=580.82.07-1"


def test_lock_show_prints_the_current_lock_and_history(mocker: MockerFixture) -> None:
    found = {"gpu01": _host(1, 2)}
    console = Console(record=True, width=200)
    render_locks(found, console)
    text = console.export_text()
    assert "gpu01: lock 2," in text and "nvidia-open 580.95.05-1 (held)" in text
    assert "    2: 2026-12-01T10:00:00Z spec dual-a100x" in text and "(current)" in text
    whole = lock_json(found)
    assert whole["format_version"] == 2
    document = by_host(whole)["gpu01"]
    assert document["current"]["number"] == 2 and [h["number"] for h in document["history"]] == [1, 2]

    mocker.patch("provision.lock.store.read_locks", return_value=found)
    shown = CliRunner().invoke(cli, ["lock", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    shown_doc = json.loads(shown.stdout)
    assert shown_doc["format_version"] == 2 and shown_doc["hosts"][0]["host"] == "gpu01"
    # A saved format 1 document (hosts by name) reads as the same rows.
    old = {
        "format_version": 1,
        "hosts": {r["host"]: {k: v for k, v in r.items() if k != "host"} for r in shown_doc["hosts"]},
    }
    assert (
        jsonout.host_rows(old, "lock show") == jsonout.host_rows(shown_doc, "lock show") == shown_doc["hosts"]
    )


def test_rollback_without_a_lock_is_one_line_and_one_json_document(mocker: MockerFixture) -> None:
    nothing = {"localhost": HostLocks("localhost", None, (), {})}
    mocker.patch("provision.rollback.read_locks", return_value=nothing)
    result = CliRunner().invoke(cli, ["rollback", "--json"])
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["outcome"] == "error"
    assert document["error"]["message"] == "localhost: no lock in /var/lib/provision; nothing to roll back to"


@pytest.mark.parametrize("command", [["lock", "show"], ["rollback", "--dry-run"]])
def test_a_missing_inventory_is_one_line_and_starts_no_ansible(
    command: list[str], tmp_path: Path, mocker: MockerFixture
) -> None:
    played = mocker.patch("provision.ansible.run_play")
    missing = tmp_path / "nope.ini"
    result = CliRunner().invoke(cli, [*command, "-i", str(missing)])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {missing}: no such inventory"
    played.assert_not_called()


def test_this_machines_locks_are_read_by_the_module_in_process_without_a_play(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    from provision.lock import store

    directory = tmp_path / "state"
    MODULE.write(directory, _doc(), None)
    MODULE.write(
        directory, _doc(packages=[{"name": "nvidia-open", "version": "580.126.20-1", "hold": True}]), None
    )
    mocker.patch.object(store, "LOCK_DIRECTORY", directory)
    play = mocker.patch("provision.ansible.run_play")
    found = store.read_locks(None)
    play.assert_not_called()
    here = found["localhost"]
    assert here.current is not None and here.current.number == 2
    assert [lock.number for lock in here.history] == [1, 2]
    assert (
        here.current == store._host_locks("x", {"current": MODULE.read_json(directory / "lock.json")}).current
    )
    shown = CliRunner().invoke(cli, ["lock", "show", "--json"])
    assert by_host(json.loads(shown.stdout))["localhost"]["current"]["number"] == 2, shown.output
    play.assert_not_called()
    mocker.patch.object(MODULE, "history", side_effect=PermissionError(13, "Permission denied"))
    mocker.patch.object(store, "_lock_module", return_value=MODULE)
    with pytest.raises(store.LockReadError, match="localhost: cannot read the lock: failed: provision lock"):
        store.read_locks(None)


@pytest.mark.parametrize(
    "document",
    [{"hosts": [{"spec": "x"}]}, {"hosts": {"a": "not an object"}}, {"format_version": 2}, ["hosts"]],
)
def test_a_document_without_host_rows_is_refused_by_name(document: Any) -> None:
    with pytest.raises(ValueError, match="not a provision lock show document"):
        jsonout.host_rows(document, "lock show")
