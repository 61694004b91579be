"""Verify's lock record, the lock reads (``lock show -i``, rollback) and the support bundle's host
reads over the direct transport, the lock module's and the collector's real code run on this
machine through a local connection; the play only for a host without a command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from typer.testing import CliRunner

from provision import ansible, support
from provision.cli import cli
from provision.detect import direct
from provision.lock import store
from provision.lock.store import record_verified

HERE = f"here ansible_connection=local ansible_python_interpreter={sys.executable}\n"
RESULT = {
    "at": "2026-12-03T12:00:00Z",
    "spec_digest": "sha256:aa",
    "passed": False,
    "counts": {},
    "failed": ["x"],
}


def _locks(tmp_path: Path, digest: str) -> Path:
    directory = tmp_path / "provision"
    (directory / "locks").mkdir(parents=True)
    directory.chmod(0o755)
    (directory / "locks").chmod(0o755)
    lock = {"number": 1, "spec_digest": digest, "packages": []}
    for path in (directory / "lock.json", directory / "locks" / "0001.json"):
        path.write_text(json.dumps(lock), encoding="utf-8")
    return directory


def _inventory(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hosts.ini"
    path.write_text(text, encoding="utf-8")
    return path


def test_verify_is_recorded_in_the_hosts_lock_without_the_play(tmp_path: Path, mocker: MockerFixture) -> None:
    play = mocker.patch.object(ansible, "run_play")
    directory, inventory = _locks(tmp_path, "sha256:aa"), _inventory(tmp_path, HERE)
    first = record_verified(inventory, {"here": RESULT}, tmp_path, directory)
    assert first["here"] == {
        "changed": True,
        "lock": {"number": 1, "spec_digest": "sha256:aa", "packages": [], "verify": RESULT},
    }
    for path in (directory / "lock.json", directory / "locks" / "0001.json"):
        assert json.loads(path.read_text())["verify"] == RESULT
    again = record_verified(inventory, {"here": RESULT}, tmp_path, directory)
    assert isinstance(again["here"], dict) and again["here"]["changed"] is False
    play.assert_not_called()


def test_a_lock_for_another_spec_is_left_alone(tmp_path: Path) -> None:
    directory = _locks(tmp_path, "sha256:bb")
    got = record_verified(_inventory(tmp_path, HERE), {"here": RESULT}, tmp_path, directory)
    assert got["here"] == {"changed": False, "lock": None}
    assert "verify" not in json.loads((directory / "lock.json").read_text())


def test_a_lock_directory_others_could_write_is_the_hosts_failure(tmp_path: Path) -> None:
    directory = _locks(tmp_path, "sha256:aa")
    directory.chmod(0o777)
    got = record_verified(_inventory(tmp_path, HERE), {"here": RESULT}, tmp_path, directory)
    assert isinstance(got["here"], str) and got["here"].startswith("failed: provision lock: "), got["here"]
    assert "writable only by it" in got["here"]


def test_support_reads_go_direct_and_the_rest_through_support_yml(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    event = {
        "event": "runner_on_ok",
        "event_data": {
            "host": "box",
            "task": "Read the DKMS module status",
            "res": {"rc": 0, "stdout": "nvidia/580"},
        },
    }
    play = mocker.patch.object(
        ansible, "run_play", return_value=ansible.PlayResult("successful", 0, (event,))
    )
    inventory = _inventory(tmp_path, HERE + "box ansible_connection=docker\n")
    found = support.collect(inventory, ["here", "box"], tmp_path)
    assert play.call_args.kwargs["limit"] == "box"
    assert {"dmesg-nvidia.txt", "dkms-status.txt"} <= set(found["here"])
    assert found["here"]["dkms-status.txt"].startswith("$ dkms status (rc ")
    assert found["box"] == {"dkms-status.txt": "$ dkms status (rc 0)\nnvidia/580\n"}


def test_support_texts_keep_the_nvidia_lines_and_a_lock_that_was_read() -> None:
    outputs = {
        "dmesg": {"command": "dmesg", "output": "usb 1-1: new\nNVRM: Xid 79\n", "rc": 0},
        "dkms-status": {"command": "dkms status", "output": "dkms: not found", "rc": 127},
        "lock": {"command": "cat", "output": "cat: /var/lib/provision/lock.json: No such file", "rc": 1},
    }
    assert support.support_texts(outputs) == {
        "dmesg-nvidia.txt": "NVRM: Xid 79\n",
        "dkms-status.txt": "$ dkms status (rc 127)\ndkms: not found",
    }


# Lock reads (`lock show -i`, rollback's): over the direct transport where route() gives a command.

LOCKED = {"number": 1, "spec_digest": "sha256:aa", "packages": []}
"""What :func:`_locks` writes: a document the module reads, not a lock this version reads."""


def _real_locks(tmp_path: Path) -> Path:
    """Two real locks (numbers 1 and 2) written by the lock module itself."""
    from tests.unit.test_lock import MODULE, _doc

    directory = tmp_path / "state"
    MODULE.write(directory, _doc(), None)
    MODULE.write(directory, _doc(pins="Package: nvidia-open\n"), None)
    return directory


def _fake_sudo(tmp_path: Path) -> Path:
    """A ``sudo`` that runs what follows its ``--`` (as this user): the become path without root."""
    path = tmp_path / "sudo"
    path.write_text('#!/bin/sh\nwhile [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    path.chmod(0o755)
    return path


def _read_event(host: str) -> ansible.Event:
    """The lock play's read of ``host``: no lock, one served version."""
    served = {"nvidia-open": ["580.95.05-1"]}
    res: dict[str, object] = {"changed": False, "current": None, "history": [], "served": served}
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": store.LOCK_TASK, "res": res}}


def test_lock_show_reads_a_local_inventory_host_directly_without_ansible(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    play = mocker.patch.object(ansible, "run_play")
    runner = mocker.patch("ansible_runner.run")
    mocker.patch.object(store, "LOCK_DIRECTORY", _real_locks(tmp_path))
    inventory = _inventory(tmp_path, HERE)
    shown = CliRunner().invoke(cli, ["lock", "show", "-i", str(inventory), "--json"])
    assert shown.exit_code == 0, shown.output
    [row] = json.loads(shown.stdout)["hosts"]
    assert row["host"] == "here" and row["current"]["number"] == 2
    assert row["current"]["pins"] == "Package: nvidia-open\n"
    assert [h["number"] for h in row["history"]] == [1, 2]
    served = store.served_versions(inventory, {"here": ["nvidia-open", "bad name;"]})
    assert set(served["here"].served) == {"nvidia-open"}  # the module's rule: a bad name never reaches apt
    assert served["here"].current == store.read_locks(inventory)["here"].current
    play.assert_not_called()
    runner.assert_not_called()


def test_a_host_without_root_reads_under_its_become_prefix(tmp_path: Path, mocker: MockerFixture) -> None:
    sudo = _fake_sudo(tmp_path)
    inventory = _inventory(tmp_path, HERE.replace("\n", f" ansible_become_exe={sudo}\n"))
    directory = _real_locks(tmp_path)
    mocker.patch("provision.detect.direct.os.geteuid", return_value=1000)  # not root: sudo -H -n
    run = mocker.spy(direct, "run_one")
    found = store.read_locks(inventory, directory=directory)
    assert run.call_args.args[0][:6] == [str(sudo), "-H", "-n", "-u", "root", "--"]
    assert found["here"].current is not None and found["here"].current.number == 2


def test_hosts_the_direct_transport_cannot_reach_go_through_one_play_in_inventory_order(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    play = mocker.patch.object(
        ansible, "run_play", return_value=ansible.PlayResult("successful", 0, (_read_event("box"),))
    )
    inventory = _inventory(tmp_path, "box ansible_connection=docker\n" + HERE)
    found = store.read_locks(inventory, directory=_real_locks(tmp_path))
    assert list(found) == ["box", "here"]
    assert found["box"].current is None and found["here"].current is not None
    assert play.call_args.kwargs["limit"] == "box"
    assert play.call_args.kwargs["extravars"]["provision_lock_args"] == {
        "box": {"state": "read", "served": []}
    }
    assert play.call_args.kwargs["extravars"]["provision_lock_become"] is True  # the locks are root's
    served = store.served_versions(inventory, {"here": [], "box": ["nvidia-open"]})
    assert served["box"].served == {"nvidia-open": ("580.95.05-1",)}
    assert play.call_args.kwargs["extravars"]["provision_lock_args"] == {
        "box": {"state": "read", "served": ["nvidia-open"]}
    }


def test_with_the_direct_transport_off_every_host_goes_through_the_play(
    tmp_path: Path, mocker: MockerFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(direct.ENV_SWITCH, "ansible")
    play = mocker.patch.object(
        ansible, "run_play", return_value=ansible.PlayResult("successful", 0, (_read_event("here"),))
    )
    found = store.read_locks(_inventory(tmp_path, HERE), "here")
    assert found["here"].served == {"nvidia-open": ("580.95.05-1",)}
    assert play.call_args.kwargs["extravars"]["provision_lock_default"] == {"state": "read"}
    assert play.call_args.kwargs["limit"] == "here"


@pytest.mark.parametrize(
    ("case", "cause"),
    [
        (
            "others may write",
            r"^here: cannot read the lock: failed: not trusted: .*/locks: .* \(only root or the ",
        ),
        ("not a lock", r"^here: the lock is not one this version reads \(created_at: Field required; "),
        (
            "no interpreter",
            r"^here: cannot read the lock: host unreachable: /nonexistent/python3: not found$",
        ),
    ],
)
def test_an_unreadable_lock_record_is_one_line_naming_the_host(
    case: str, cause: str, tmp_path: Path, mocker: MockerFixture
) -> None:
    play = mocker.patch.object(ansible, "run_play")
    directory, text = _locks(tmp_path, "sha256:aa"), HERE
    if case == "others may write":
        (directory / "locks").chmod(0o777)
    if case == "no interpreter":
        text = HERE.replace(sys.executable, "/nonexistent/python3")
    with pytest.raises(store.LockReadError, match=cause) as raised:
        store.read_locks(_inventory(tmp_path, text), directory=directory)
    assert "\n" not in str(raised.value)
    play.assert_not_called()
