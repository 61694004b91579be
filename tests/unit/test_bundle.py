"""The support bundle of a failed apply: members, mode 0600, secrets redacted."""

from __future__ import annotations

import base64
import json
import os
import stat
import tarfile
from pathlib import Path
from typing import Any

from pytest_mock import MockerFixture

from provision import ansible
from provision.apply import bundle
from tests.unit.factories import fresh_ubuntu

DMESG = """\
[    0.000000] Linux version 6.8.0-60-generic (buildd@lcy02-amd64-098)
[   12.345678] nvidia: loading out-of-tree module taints kernel.
[   12.400001] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build
[   13.000000] e1000e 0000:00:1f.6 eth0: NIC Link is Up 1000 Mbps Full Duplex
[ 4242.424242] NVRM: Xid (PCI:0000:17:00): 79, pid=1234, name=python, GPU has fallen off the bus.
"""


def test_redact_hides_secret_values_and_url_credentials() -> None:
    text = (
        '{"ansible_become_password": "hunter2", "token": "abc123", "api_key=xyz", '
        '"url": "https://user:pa55@mirror.example.org/repo/", "branch": 580}'
    )
    redacted = bundle.redact(text)
    for secret in ("hunter2", "abc123", "xyz", "pa55", "user:"):
        assert secret not in redacted, secret
    assert '"branch": 580' in redacted and "https://<redacted>@mirror.example.org/repo/" in redacted


def test_only_the_kernel_lines_about_nvidia_are_kept() -> None:
    kept = bundle.nvidia_lines(DMESG).splitlines()
    assert len(kept) == 3 and all("NVRM" in line or "nvidia" in line for line in kept)


def _events(host: str) -> list[dict[str, Any]]:
    lock = base64.b64encode(json.dumps({"number": 2, "token": "s3cr3t"}).encode()).decode()
    results = {
        "Read the kernel ring buffer (the NVIDIA lines are kept on the controller)": {"stdout": DMESG},
        "Read the DKMS module status": {"stdout": "nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed"},
        "Read provision's lock": {"content": lock},
    }
    return [
        {"event": "runner_on_ok", "event_data": {"host": host, "task": task, "res": res}}
        for task, res in results.items()
    ]


def test_bundle_holds_plans_events_facts_and_host_data_redacted_and_private(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    run = tmp_path / "run"
    (run / "artifacts" / "x" / "job_events").mkdir(parents=True)
    (run / "plan-gpu01.json").write_text('{"host": "gpu01"}')
    (run / "artifacts" / "x" / "job_events" / "1-a.json").write_text('{"ansible_password": "hunter2"}')
    (run / "artifacts" / "x" / "stdout").write_text("TASK [nvidia_packages] failed\n")
    play = mocker.patch.object(
        ansible, "run_play", return_value=ansible.PlayResult("successful", 0, tuple(_events("gpu01")))
    )
    path = bundle.write_bundle(run, tmp_path / "hosts.ini", ["gpu01"], {"gpu01": fresh_ubuntu(host="gpu01")})

    assert play.call_args.kwargs["limit"] == "gpu01"
    assert path == run / bundle.BUNDLE and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with tarfile.open(path) as tar:
        members = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert set(members) == {
        "plans/plan-gpu01.json",
        "ansible/job_events/1-a.json",
        "ansible/stdout",
        "facts/gpu01.json",
        "hosts/gpu01/dmesg-nvidia.txt",
        "hosts/gpu01/dkms-status.txt",
        "hosts/gpu01/lock.json",
    }
    assert "hunter2" not in members["ansible/job_events/1-a.json"]
    assert (
        "s3cr3t" not in members["hosts/gpu01/lock.json"] and '"number": 2' in members["hosts/gpu01/lock.json"]
    )
    assert (
        "Xid" in members["hosts/gpu01/dmesg-nvidia.txt"]
        and "e1000e" not in members["hosts/gpu01/dmesg-nvidia.txt"]
    )
    assert json.loads(members["facts/gpu01.json"])["host"] == "gpu01"
