"""Fleet verify and checklist end to end: four real sshd targets without GPUs, one of them stopped.

gpu1 gets a stand-in ``nvidia-smi`` (the H200 capture's GPU row) and a venv interpreter that
records its environment, so the GPU load program really runs there through Ansible and fails
for want of torch; the others have no nvidia-smi at all. For the services test, gpu3 is held to
a spec that serves a model and is monitored: the target's own python3 serves the stand-in
dcgm-exporter page (tests/fixtures/monitoring, the real exporter's format) on the target's address,
and nothing listens for node exporter or vLLM there.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from provision.cli import cli
from provision.spec.loader import load_spec
from provision.verify.checks_monitoring import RULE_FAMILIES
from provision.verify.launch import CHILD_ENV
from tests.fleet.conftest import FleetTargets
from tests.integration.harness.target import CHROOT_ENV
from tests.unit import junit_strict
from tests.unit.factories import by_host

ROOT = Path(__file__).parents[2]
SPEC = ROOT / "specs" / "dual-a100x.yaml"
VENV = "/opt/provision/venv"
QUERY_GPU = ROOT / "tests" / "fixtures" / "detect" / "h200-ubuntu2404" / "query-gpu.txt"
EXPORTER_PAGE = ROOT / "tests" / "fixtures" / "monitoring" / "dcgm-exporter-metrics.txt"
GPU_CHECKS = ("cuda-device-count", "cuda-kernel", "bf16-tflops", "pcie-link", "pcie-h2d", "gpu-temperature")


def provision(*args: str | Path) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture()
def inventory(fleet: FleetTargets, monkeypatch: pytest.MonkeyPatch) -> Path:
    """All four targets held to the dual-A100X spec; gpu4's sshd stopped; gpu1 with a stand-in GPU."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    lines = ["[gpu]", *(fleet.host_line(h, provision_spec=str(SPEC)) for h in fleet.targets)]
    path = fleet.directory / "hosts.ini"
    path.write_text("\n".join(lines) + "\n")
    _stand_in_gpu(fleet.targets["gpu1"].root)
    fleet.stop_sshd("gpu4")
    return path


def _stand_in_gpu(root: Path) -> None:
    rows = [line for line in QUERY_GPU.read_text().splitlines()[1:] if not line.startswith("[exit")]
    _script(
        root / "usr/local/bin/nvidia-smi",
        'case "$*" in *--query-gpu=index,name*) cat <<"EOF"\n' + "\n".join(rows) + "\nEOF\n;;\n"
        '*) echo "stand-in nvidia-smi: $*" >&2; exit 9;;\nesac\n',
    )
    _script(
        root / VENV.lstrip("/") / "bin/python",
        'case "$*" in *gpuload.py*) env > /tmp/gpuload-env; echo "$@" > /tmp/gpuload-argv;; esac\n'
        'exec /usr/bin/python3 "$@"\n',
    )


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_verify_reports_every_host_with_reasons_and_the_unreachable_one(
    fleet: FleetTargets, inventory: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "verify.xml"
    result = provision("verify", "-i", inventory, "--json", "--junit", junit, "--forks", "4")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["summary"]["failed"] == ["gpu1", "gpu2", "gpu3", "gpu4"]
    hosts = by_host(doc)
    assert hosts["gpu4"]["unreachable"].startswith("host unreachable:")
    assert {r["status"] for r in hosts["gpu4"]["report"]["results"]} == {"fail"}
    assert all(r["detail"] == hosts["gpu4"]["unreachable"] for r in hosts["gpu4"]["report"]["results"])
    for name in ("gpu1", "gpu2", "gpu3"):
        assert hosts[name]["unreachable"] is None
        results = hosts[name]["report"]["results"]
        gpu = [r for r in results if r["id"] in GPU_CHECKS]
        assert gpu and all(r["status"] in ("fail", "skip") and r["detail"] for r in gpu), name
    by_id = {r["id"]: r for r in hosts["gpu2"]["report"]["results"]}
    assert by_id["cuda-device-count"]["detail"].startswith("no GPU work: ")
    count = next(r for r in hosts["gpu1"]["report"]["results"] if r["id"] == "cuda-device-count")
    assert count["detail"] == "GPU load program: ModuleNotFoundError: No module named 'torch'"
    _assert_gpu_program_ran_as_launch_does(fleet.targets["gpu1"].root)
    _assert_junit(junit)


def _assert_gpu_program_ran_as_launch_does(root: Path) -> None:
    argv = (root / "tmp/gpuload-argv").read_text().split()
    assert argv[0] == "-I" and argv[1].endswith("/gpuload.py") and argv[2:4] == ["gpus", "--seconds"]
    env = dict(
        line.split("=", 1) for line in (root / "tmp/gpuload-env").read_text().splitlines() if "=" in line
    )
    assert {k: env.get(k) for k in CHILD_ENV} == CHILD_ENV


def _assert_junit(path: Path) -> None:
    assert junit_strict.problems(path.read_text()) == []
    suites = ET.parse(path).getroot().findall("testsuite")
    assert [s.get("hostname") for s in suites] == ["gpu1", "gpu2", "gpu3", "gpu4"]
    assert all(int(s.get("failures", "0")) > 0 and s.findall("testcase") for s in suites)


def test_verify_text_shows_host_tables_and_the_summary(fleet: FleetTargets, inventory: Path) -> None:
    result = provision("verify", "-i", inventory, "-l", "gpu2,gpu4")
    assert result.exit_code == 1, result.output
    assert "Fleet verify: 2 host(s)" in result.output
    assert "provision verify" in result.output and "on gpu2" in result.output
    assert "gpu4: host unreachable:" in result.output


def test_checklist_writes_one_document_per_host_and_an_index(fleet: FleetTargets, inventory: Path) -> None:
    out = fleet.directory / "checklists"
    result = provision("checklist", "-i", inventory, "-o", out)
    assert result.exit_code == 1, result.output  # gpu4 unreachable: named, and exit 1 as plan -i does
    assert "gpu4: host unreachable:" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["gpu1.md", "gpu2.md", "gpu3.md", "gpu4.md", "index.md"]
    index = (out / "index.md").read_text()
    for name in ("gpu1", "gpu2", "gpu3"):
        assert f"| {name} | {SPEC} |" in index and "| detected |" in index
        document = (out / f"{name}.md").read_text()
        assert f"**Host:** {name}" in document and "detected through Ansible from" in document
    assert "| gpu4 |" in index and "unreachable: host unreachable:" in index
    assert "not observable" in (out / "gpu4.md").read_text().lower()


@pytest.fixture()
def exporter_in_gpu3(fleet: FleetTargets) -> Iterator[str]:
    """The stand-in dcgm-exporter page served by gpu3's own python3 on gpu3's address, port 9400."""
    box = fleet.targets["gpu3"]
    page = box.root / "srv/exporter/metrics"
    page.parent.mkdir(parents=True)
    page.write_bytes(EXPORTER_PAGE.read_bytes())
    argv = ["python3", "-m", "http.server", "--bind", box.host, "--directory", "/srv/exporter", "9400"]
    server = subprocess.Popen(
        ["chroot", str(box.root), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=CHROOT_ENV
    )
    url = f"http://{box.host}:9400/metrics"
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(url, timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        yield box.host
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_verify_asks_each_hosts_server_and_monitoring_from_the_host(
    fleet: FleetTargets, exporter_in_gpu3: str
) -> None:
    address = exporter_in_gpu3
    held = load_spec(ROOT / "specs" / "h200-serve-llama8b.yaml").model_dump(mode="json", exclude_none=True)
    held["serve"]["host"] = address
    held["monitoring"] = {"dcgm": "4.5.3", "listen": address, "prometheus": False}
    spec3 = fleet.directory / "gpu3-serving.yaml"
    spec3.write_text(json.dumps(held))  # JSON is YAML
    lines = [
        "[gpu]",
        fleet.host_line("gpu2", provision_spec=str(SPEC)),
        fleet.host_line("gpu3", provision_spec=str(spec3)),
    ]
    hosts = fleet.directory / "services.ini"
    hosts.write_text("\n".join(lines) + "\n")
    result = provision("verify", "-i", hosts, "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)  # one JSON document, the host probe's output included
    by_id = {r["id"]: r for r in by_host(doc)["gpu3"]["report"]["results"]}
    exporter = by_id["dcgm-exporter-metrics"]
    assert exporter["status"] == "pass", exporter
    assert exporter["measured"]["value"] == len(RULE_FAMILIES)
    assert exporter["detail"].startswith(f"http://{address}:9400/metrics: ")
    # Nothing listens there: refused from the host's own view, each with the address it asked.
    for check, port in (("node-exporter-metrics", 9100), ("serve-completion", 8000), ("serve-models", 8000)):
        row = by_id[check]
        assert row["status"] == "fail" and row["detail"].startswith(f"http://{address}:{port}/"), row
        assert "Connection refused" in row["detail"], row
    health = by_id["serve-health"]
    assert health["status"] == "fail" and "Connection refused" in health["measured"]["value"]
    assert by_id["serve-tokens-per-second"]["status"] == "skip"
    assert by_id["prometheus-targets"]["status"] == "skip"  # monitoring.prometheus is false
    assert "monitoring-services" in by_id
    gpu2 = {r["id"] for r in by_host(doc)["gpu2"]["report"]["results"]}
    assert not gpu2 & {"serve-health", "dcgm-exporter-metrics"}  # a spec without the sections
