"""Support bundles of a failed apply or verify: one per host, its members, mode 0600, secrets redacted."""

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
from provision import support as bundle
from provision.catalog import load_catalog
from provision.hosts import LOCALHOST, Hosts, HostSpec
from provision.spec.loader import load_spec
from provision.verify.bundles import write_verify_bundles
from provision.verify.command import read_inputs
from provision.verify.limits import shipped_limits
from provision.verify.models import Report
from provision.verify.workflow import evaluate

ROOT = Path(__file__).resolve().parents[2]
H200_RAW = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01"
INPUTS = ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json"

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


def test_redact_keeps_only_the_first_8_hex_of_the_machine_id() -> None:
    raw = (ROOT / "tests/fixtures/facts/machine-id/valid.txt").read_text(encoding="utf-8")
    redacted = bundle.redact(raw)
    assert "4f1c9a0e7" not in redacted
    assert "/etc/machine-id: 4f1c9a0e…\n/var/lib/dbus/machine-id: 4f1c9a0e…\n" in redacted


def test_only_the_kernel_lines_about_nvidia_are_kept() -> None:
    kept = bundle.nvidia_lines(DMESG).splitlines()
    assert len(kept) == 3 and all("NVRM" in line or "nvidia" in line for line in kept)


def _support_play(*hosts: str) -> list[dict[str, Any]]:
    """The events support.yml's tasks send for each host (a lock with a secret in it)."""
    lock = base64.b64encode(json.dumps({"number": 2, "token": "s3cr3t"}).encode()).decode()
    results = {
        "Read the kernel ring buffer (the NVIDIA lines are kept on the controller)": {"stdout": DMESG},
        "Read the DKMS module status": {
            "rc": 0,
            "stdout": "nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed",
        },
        "Read provision's lock": {"content": lock},
    }
    return [
        {"event": "runner_on_ok", "event_data": {"host": host, "task": task, "res": res}}
        for host in hosts
        for task, res in results.items()
    ]


def _run_events(runner_dir: Path) -> None:
    """An ansible-runner run over gpu01 and gpu02: a play start, each host's failed task, the stats."""
    events = runner_dir / "artifacts" / "x" / "job_events"
    events.mkdir(parents=True)
    written = [
        {"counter": 1, "event": "playbook_on_start", "event_data": {}, "stdout": ""},
        {
            "counter": 3,
            "event": "runner_on_failed",
            "event_data": {"host": "gpu01", "res": {"ansible_password": "hunter2"}},
            "stdout": "fatal: [gpu01]: FAILED! => E: broken",
        },
        {"counter": 2, "event": "runner_on_ok", "event_data": {"host": "gpu01"}, "stdout": "ok: [gpu01]"},
        {"counter": 4, "event": "runner_on_ok", "event_data": {"host": "gpu02"}, "stdout": "ok: [gpu02]"},
        {"counter": 5, "event": "playbook_on_stats", "event_data": {}, "stdout": "PLAY RECAP"},
    ]
    for event in written:
        (events / f"{event['counter']}-{event['event']}.json").write_text(json.dumps(event))
    (events / "6-cut.json").write_text('{"counter": 6, "event_da')  # a run stopped mid-write


def _raw(directory: Path) -> Path:
    """Two probe outputs of the real H200 capture, as ``detect --save-raw`` writes them."""
    directory.mkdir(parents=True)
    for probe in ("query-gpu", "dpkg-nvidia"):
        (directory / f"{probe}.txt").write_bytes((H200_RAW / f"{probe}.txt").read_bytes())
    return directory


def _members(path: Path) -> dict[str, str]:
    with tarfile.open(path) as tar:
        assert all(m.mode == 0o600 and m.isfile() for m in tar.getmembers())
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}  # type: ignore[union-attr]


def test_one_private_bundle_per_host_with_its_documents_raw_probes_events_and_host_data(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    _run_events(tmp_path / "run")
    play = mocker.patch.object(
        ansible, "run_play", return_value=ansible.PlayResult("successful", 0, tuple(_support_play("gpu01")))
    )
    evidence = bundle.Evidence(
        {"plan.json": '{"host": "gpu01", "url": "https://user:pa55@mirror.example.org/"}'},
        _raw(tmp_path / "raw"),
    )
    written = bundle.write_bundles(
        tmp_path / "run", tmp_path / "hosts.ini", {"gpu01": evidence}, tmp_path / "run"
    )

    assert play.call_args.kwargs["limit"] == "gpu01"
    path = written["gpu01"]
    assert path == tmp_path / "run" / "support-gpu01.tar.gz" and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    members = _members(path)
    assert set(members) == {
        "plan.json",
        "raw/query-gpu.txt",
        "raw/dpkg-nvidia.txt",
        "ansible/job_events/2-runner_on_ok.json",
        "ansible/job_events/3-runner_on_failed.json",
        "ansible/stdout",
        "host/dmesg-nvidia.txt",
        "host/dkms-status.txt",
        "host/lock.json",
    }  # gpu02's event, the play's start and stats and the cut file are not gpu01's
    assert members["ansible/stdout"] == "ok: [gpu01]\nfatal: [gpu01]: FAILED! => E: broken\n"
    assert "hunter2" not in members["ansible/job_events/3-runner_on_failed.json"]
    assert "pa55" not in members["plan.json"] and "mirror.example.org" in members["plan.json"]
    assert members["raw/dpkg-nvidia.txt"] == (H200_RAW / "dpkg-nvidia.txt").read_text()
    assert "s3cr3t" not in members["host/lock.json"] and '"number": 2' in members["host/lock.json"]
    assert "Xid" in members["host/dmesg-nvidia.txt"] and "e1000e" not in members["host/dmesg-nvidia.txt"]
    assert members["host/dkms-status.txt"].startswith("$ dkms status (rc 0)\nnvidia/580.95.05")


def test_a_host_the_support_play_could_not_read_still_gets_what_the_controller_holds(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    mocker.patch.object(ansible, "run_play", return_value=ansible.PlayResult("failed", 2, ()))
    written = bundle.write_bundles(
        tmp_path, tmp_path / "hosts.ini", {"gpu/01": bundle.Evidence({"facts.json": "{}"}, tmp_path / "none")}
    )
    assert written["gpu/01"] == tmp_path / "support-gpu_01.tar.gz"  # a host name never leaves the directory
    assert set(_members(written["gpu/01"])) == {"facts.json"}
    assert bundle.write_bundles(tmp_path, tmp_path / "hosts.ini", {}) == {}


def test_a_failed_verify_bundles_the_report_facts_plan_raw_probes_and_the_play(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    spec_path = ROOT / "specs" / "h200x2-ubuntu2404.yaml"  # two GPUs; the H200 run saw one
    inputs = read_inputs(INPUTS)
    hosts = Hosts(tmp_path / "hosts.ini", {"gpu01": HostSpec(load_spec(spec_path), str(spec_path))})
    kept = tmp_path / "kept"
    _raw(kept / "raw" / "gpu01")
    _run_events(kept / "ansible")
    mocker.patch.object(
        ansible,
        "run_play",
        return_value=ansible.PlayResult("successful", 0, tuple(_support_play("gpu01", "gpu02"))),
    )
    reports = {
        "gpu01": Report(
            host="gpu01",
            spec=str(spec_path),
            results=evaluate(hosts.specs["gpu01"].spec, inputs, load_catalog(), shipped_limits()),
        ),
    }
    written = write_verify_bundles(hosts, reports, {"gpu01": inputs}, load_catalog(), kept, tmp_path / "runs")

    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.endswith("-verify") and written == {"gpu01": run_dir / "support-gpu01.tar.gz"}
    members = _members(written["gpu01"])
    assert {"verify.json", "facts.json", "plan.json", "raw/dpkg-nvidia.txt", "ansible/stdout"} <= set(members)
    assert {"host/dmesg-nvidia.txt", "host/dkms-status.txt", "host/lock.json"} <= set(members)
    failed = {r["id"] for r in json.loads(members["verify.json"])["results"] if r["status"] == "fail"}
    assert failed == {"gpu-count", "cuda-device-count"}
    assert json.loads(members["plan.json"])["host"] == inputs.facts.host
    passing = {"gpu01": reports["gpu01"].model_copy(update={"results": ()})}
    assert (
        write_verify_bundles(hosts, passing, {"gpu01": inputs}, load_catalog(), kept, tmp_path / "more") == {}
    )
    assert not (tmp_path / "more").exists()  # no failure, no run directory


def test_the_detection_before_a_bundle_keeps_each_hosts_raw_outputs_under_its_name(tmp_path: Path) -> None:
    held = HostSpec(load_spec(ROOT / "specs" / "h200-ubuntu2404.yaml"), None)
    local = Hosts(None, {LOCALHOST: held}).keeping_raw(tmp_path)
    assert (
        local.save_raw == local.raw_of(tmp_path, LOCALHOST) == tmp_path / "localhost"
    )  # detect_local's own dir
    fleet = Hosts(tmp_path / "hosts.ini", {"gpu/01": held}).keeping_raw(tmp_path)
    assert fleet.save_raw == tmp_path and fleet.raw_of(tmp_path, "gpu/01") == tmp_path / "gpu_01"
    offline = Hosts(tmp_path / "hosts.ini", {"a": held}, from_raw=tmp_path / "saved")
    assert (
        offline.keeping_raw(tmp_path) is offline and offline.raw_of(tmp_path, "a") == tmp_path / "saved" / "a"
    )
