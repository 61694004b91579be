"""Detection end to end: raw format, collector (real processes), local, raw and remote runners."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from provision.detect import collector
from provision.detect.domains.python import NO_VENV, TorchFact
from provision.detect.facts import Facts, Gpu, Torch, Unknown, Venv
from provision.detect.raw import ProbeOutput, format_raw, parse_raw, read_raw, write_raw
from provision.detect.registry import all_probes
from provision.detect.runner import (
    COLLECTOR_TASK,
    collector_results,
    detect_local,
    detect_play,
    detect_remote,
    facts_from_outputs,
    facts_from_raw,
)
from provision.errors import FactsError
from provision.versions import DriverVersion
from tests.unit.factories import H200_RAW

NEWEST_H200 = Path(__file__).parents[1] / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01"
"""The newest full ``detect --save-raw`` capture of the H200 (every probe, extra files included)."""


def _script(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


# --- Raw format ------------------------------------------------------------------------------------


@pytest.mark.parametrize("output", ["", "one\n", "one\ntwo", "\n", "  trailing  \n[exit 3] inside\n"])
def test_raw_round_trip(output: str) -> None:
    out = ProbeOutput(command="nvidia-smi topo -m", output=output, rc=9)
    back = parse_raw(format_raw(out))
    assert (back.command, back.rc) == (out.command, out.rc)
    assert back.output == (output if not output or output.endswith("\n") else output + "\n")


def test_raw_rejects_a_file_without_exit_line() -> None:
    with pytest.raises(FactsError, match="not a raw probe file"):
        parse_raw("$ uname -a\nLinux\n", "uname.txt")


def test_read_raw_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(FactsError, match="no such raw probe directory"):
        read_raw(tmp_path / "absent")


def test_read_raw_of_the_copied_fixture() -> None:
    outputs = read_raw(H200_RAW)
    assert outputs["driver-version"].command == "cat /proc/driver/nvidia/version"
    assert outputs["lspci-tv"].rc == 127 and outputs["nvcc"].output.startswith("/usr/local/cuda/bin/nvcc\n")


# --- Facts from the captured H200 ------------------------------------------------------------------


def _assert_h200(facts: Facts) -> None:
    assert not isinstance(facts.driver, Unknown) and str(facts.driver.version) == "580.159.04"
    assert isinstance(facts.gpus, tuple) and facts.gpus[0].name == "NVIDIA H200"
    assert facts.package("libnccl2") is not None and facts.package("libnccl2").held  # type: ignore[union-attr]
    assert not isinstance(facts.cuda, Unknown) and str(facts.cuda.nvcc_version) == "13.0.88"
    assert isinstance(facts.torch, Torch) and facts.torch.version == "2.11.0+cu130"
    assert not isinstance(facts.kernel, Unknown) and facts.kernel.compiler == "gcc 15.3.0"
    assert facts.driver_on_disk == Unknown(unknown="modinfo: not found")


def test_facts_from_copied_fixture_dir_round_trips_json() -> None:
    facts = facts_from_raw(H200_RAW, host="h200")
    _assert_h200(facts)
    assert Facts.model_validate_json(facts.model_dump_json()) == facts
    assert facts.venv == Unknown(unknown=NO_VENV)


def test_facts_from_raw_takes_the_venv_a_capture_did_not_record() -> None:
    facts = facts_from_raw(H200_RAW, venv="/opt/torch/.venv")
    assert isinstance(facts.torch, Torch) and facts.torch.venv == "/opt/torch/.venv"


def test_facts_from_the_newest_full_capture_dir() -> None:
    facts = facts_from_raw(NEWEST_H200)
    _assert_h200(facts)
    assert isinstance(facts.venv, Venv) and facts.venv.path == "/opt/torch/.venv"
    assert Facts.model_validate_json(facts.model_dump_json()) == facts


def test_no_outputs_gives_unknowns_with_reasons() -> None:
    facts = facts_from_outputs({})
    assert facts.gpus == Unknown(unknown="no output from the query-gpu probe")
    assert facts.kernel == Unknown(unknown="no output from the proc-version probe")
    assert facts.torch == Unknown(unknown=NO_VENV) and facts.driver_on_disk is None


# --- Probes ----------------------------------------------------------------------------------------


def test_venv_travels_as_an_argv_item_not_in_script_text() -> None:
    venv = "/tmp/x'; rm -rf / #"
    assert TorchFact.command(venv)[-1] == venv
    for probe in all_probes(venv):
        assert all(venv not in part for part in probe.argv[:-1]), probe.id


def test_probe_ids_match_the_fixture_stems() -> None:
    ids = {p.id for p in all_probes("/opt/venv")}
    assert {
        "os-release",
        "uname",
        "proc-version",
        "driver-version",
        "query-gpu",
        "topo-m",
        "dpkg-nvidia",
        "nvcc",
        "cuda-dirs",
        "torch",
    } <= ids
    # The newest real capture holds an output of every probe detection runs, except the probes
    # added after it (monitoring's, issue 16, and module-signer, issue 17: their cases are under
    # tests/fixtures/facts/; captured at the next device run: `provision detect --save-raw DIR`),
    # the container runtimes' and CDI's, gsp-firmware (the GSP firmware files per driver release),
    # and the GPU settings' (MIG instances, holder services and modules, the boot unit: issue 30).
    newer = {"listening", "monitoring-files", "module-signer", "gsp-firmware"}
    newer |= {
        "docker-version",
        "containerd-version",
        "podman-version",
        "container-config",
        "cdi-specs",
        "cdi-refresh",
    }
    # The RHEL family's probes, run on every host since detection reads the family from os-release
    # (their cases are under tests/fixtures/facts/, the constructed Rocky capture has them).
    newer |= {"rpm-nvidia", "dnf-locks", "dnf-origins"}
    newer |= {"mig-lgi", "gpu-services", "nvidia-modules", "gpu-settings-unit"}
    newer |= {"machine-id"}  # one machine named twice in an inventory (provision/machines.py)
    assert ids - newer <= {p.stem for p in NEWEST_H200.glob("*.txt")}


# --- Collector: real processes ---------------------------------------------------------------------


def test_collector_runs_probes_concurrently(tmp_path: Path) -> None:
    """Each probe marks that it started, then waits until all six have: run one after another, the
    first would wait until its timeout (rc 124). No wall-clock bound, so load cannot fail it."""
    barrier = 'touch "$0/$1"; while [ "$(ls "$0" | wc -l)" -lt 6 ]; do sleep 0.02; done'
    probes = [
        {"id": f"s{i}", "argv": ["sh", "-c", barrier, str(tmp_path), f"s{i}"], "timeout": 60}
        for i in range(6)
    ]
    results = collector.collect(probes)
    assert [r["rc"] for r in results.values()] == [0] * 6 and list(results) == [f"s{i}" for i in range(6)]


def test_collector_not_found_and_timeout() -> None:
    started = time.monotonic()
    results = collector.collect(
        [
            {"id": "missing", "argv": ["no-such-tool-4711", "-x"], "timeout": 5},
            {"id": "slow", "argv": ["sh", "-c", "echo started; sleep 60 | cat"], "timeout": 0.5},
        ]
    )
    # Bounded by the pipeline's own sleep: had the timeout spared sleep, cat would wait for its 60 s.
    assert time.monotonic() - started < 60, "the timeout must kill the pipeline's children too"
    missing = {"command": "no-such-tool-4711 -x", "output": "no-such-tool-4711: not found\n", "rc": 127}
    assert results["missing"] == missing
    assert results["slow"]["rc"] == 124 and results["slow"]["output"].startswith("started\n")


def test_collector_script_reads_stdin_and_file(tmp_path: Path) -> None:
    probes = json.dumps([{"id": "echo", "argv": ["echo", "a b"], "timeout": 5}])
    (tmp_path / "probes.json").write_text(probes)
    script = collector.__file__
    by_stdin = subprocess.run(
        [sys.executable, script], input=probes, capture_output=True, text=True, check=True
    )
    by_file = subprocess.run(
        [sys.executable, script, str(tmp_path / "probes.json")], capture_output=True, text=True, check=True
    )
    expected = {"echo": {"command": "echo 'a b'", "output": "a b\n", "rc": 0}}
    assert json.loads(by_stdin.stdout) == json.loads(by_file.stdout) == expected


# --- detect_local with fake tools on PATH ----------------------------------------------------------


@pytest.fixture
def fake_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with fake nvidia-smi, dpkg-query and modinfo that print the H200 captures."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    raw = read_raw(H200_RAW)
    for probe_id in ("query-gpu", "topo-m", "dpkg-nvidia"):
        (bin_dir / f"{probe_id}.out").write_text(raw[probe_id].output)
    _script(
        bin_dir,
        "nvidia-smi",
        f'case "$1" in topo) cat {bin_dir}/topo-m.out;; *) sleep 0.2; cat {bin_dir}/query-gpu.out;; esac\n',
    )
    _script(bin_dir, "dpkg-query", f"cat {bin_dir}/dpkg-nvidia.out\n")
    _script(bin_dir, "modinfo", "echo 580.159.04\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def _fake_venv(root: Path) -> Path:
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*")) / "site-packages"
    (site / "torch").mkdir(parents=True)
    info = site / "torch-2.11.0+cu130.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n")
    (info / "RECORD").write_text(f"torch/version.py,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n"
    )
    return venv


def test_detect_local_save_raw_round_trip(fake_host: Path) -> None:
    venv = _fake_venv(fake_host)
    facts = detect_local(venv=str(venv), save_raw=fake_host / "raw")
    assert isinstance(facts.gpus, tuple) and isinstance(facts.gpus[0], Gpu)
    assert facts.gpus[0].memory_total_mib == 143771 and facts.driver_on_disk == DriverVersion("580.159.04")
    assert isinstance(facts.torch, Torch) and (facts.torch.venv, facts.torch.cuda) == (str(venv), "13.0")
    assert isinstance(facts.venv, Venv) and facts.venv.distributions == {"torch": "2.11.0+cu130"}
    assert facts.collected_at is not None
    again = facts_from_raw(fake_host / "raw")
    assert again.model_dump(exclude={"collected_at"}) == facts.model_dump(exclude={"collected_at"})


def test_detect_local_without_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _script(
        tmp_path,
        "nvidia-smi",
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."; exit 9\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    facts = detect_local()
    assert isinstance(facts.gpus, Unknown)
    assert facts.gpus.unknown.startswith("nvidia-smi exited 9: NVIDIA-SMI")
    assert facts.torch == Unknown(unknown=NO_VENV)


def test_write_raw_then_read_raw(tmp_path: Path) -> None:
    uname = "Linux h 6.8.0 #1 SMP x86_64 GNU/Linux\n"
    outputs = {"uname": ProbeOutput(command="uname -a", output=uname, rc=0)}
    write_raw(tmp_path / "raw", outputs)
    assert read_raw(tmp_path / "raw") == outputs


# --- Remote: event handling and one real ansible-runner play ---------------------------------------


def test_collector_results_from_events() -> None:
    stdout = json.dumps({"uname": {"command": "uname -a", "output": "x", "rc": 0}})
    events = [
        {
            "event": "runner_on_ok",
            "event_data": {"host": "a", "task": COLLECTOR_TASK, "res": {"stdout": stdout}},
        },
        {
            "event": "runner_on_unreachable",
            "event_data": {
                "host": "b",
                "task": "Create",
                "res": {"msg": "Failed to connect to the host via ssh: Connection refused"},
            },
        },
        {
            "event": "runner_on_failed",
            "event_data": {
                "host": "c",
                "task": COLLECTOR_TASK,
                "res": {"msg": "[Errno 2] No such file or directory: b'python3'"},
            },
        },
        {"event": "playbook_on_stats", "event_data": {}},
    ]
    hosts = collector_results(events)
    assert hosts["a"] == {"uname": {"command": "uname -a", "output": "x", "rc": 0}}
    assert hosts["b"] == "host unreachable: Failed to connect to the host via ssh: Connection refused"
    assert str(hosts["c"]).startswith(f"host failed at '{COLLECTOR_TASK}': [Errno 2]")


def test_detect_play_runs_the_collector_by_argv() -> None:
    tasks = detect_play()[0]["tasks"]
    run = next(t for t in tasks[1]["block"] if t["name"] == COLLECTOR_TASK)
    assert run["ansible.builtin.command"]["argv"][1:] == [
        "{{ provision_detect_dir.path }}/collector.py",
        "{{ provision_detect_dir.path }}/probes.json",
    ]
    assert tasks[1]["always"][0]["ansible.builtin.file"]["state"] == "absent"


def test_detect_remote_local_and_unreachable_hosts() -> None:
    inventory = (
        f"local ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        "refused ansible_host=127.0.0.1 ansible_port=1 ansible_connection=ssh\n"
    )
    facts = detect_remote(inventory)
    assert set(facts) == {"local", "refused"}
    assert not isinstance(facts["local"].os, Unknown) and facts["local"].host == "local"
    assert isinstance(facts["refused"].gpus, Unknown)
    assert facts["refused"].gpus.unknown.startswith("host unreachable")
    assert facts["refused"].os == facts["refused"].torch


def test_facts_from_our_own_probes_on_the_h200() -> None:
    facts = facts_from_raw(Path(__file__).parents[1] / "fixtures" / "raw" / "h200-ubuntu2404-probes")
    assert not isinstance(facts.driver, Unknown) and facts.driver.flavor == "open"
    assert isinstance(facts.gpus, tuple) and facts.gpus[0].memory_total_mib == 143771
    assert not isinstance(facts.cuda, Unknown) and facts.cuda.default_target == "/usr/local/cuda-13.0"
    assert str(facts.cuda.nvcc_version) == "13.0.88"
    assert facts.driver_on_disk == Unknown(unknown="modinfo: not found")
    assert isinstance(facts.packages, tuple) and facts.package("libcudnn9-cuda-13") is not None
    assert not isinstance(facts.topology, Unknown) and facts.topology.links == {"GPU0": {"GPU0": "X"}}
