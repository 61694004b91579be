"""Verify's lock record and the support bundle's host reads over the direct transport, the lock
module's and the collector's real code run on this machine through a local connection; the play
only for a host without a command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pytest_mock import MockerFixture

from provision import ansible, support
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
