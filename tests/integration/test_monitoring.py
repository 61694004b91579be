"""GPU monitoring end to end (issue 16) in the real Debian 12 root.

Real parts: Debian's own ``prometheus`` and ``prometheus-node-exporter`` from the Debian archive
(the golden root keeps Debian's source aside; these tests put it back), real apt/dpkg/Ansible,
real ``ss``. DCGM and dcgm-exporter are the stand-ins of ``harness/dcgm.py`` in the signed test
repository (NVIDIA's names, versions, dependencies and units; the exporter serves real-format
metrics for the counters file it is given). There is no systemd in the root: the role configures
and says so, and the test starts each daemon with its unit's command line (``ExecStart`` with
``$ARGS`` from the unit's ``EnvironmentFile``, provision's drop-in applied, as the unit's
``User``), each on the target's own loopback address.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import golden
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.harness.target import CHROOT_ENV, Target
from tests.integration.helpers import assert_no_change_unconfirmed, provision, write_spec
from tests.unit.factories import one_report

DCGM = {
    "datacenter-gpu-manager-4-core": "1:4.5.3-1",
    "datacenter-gpu-manager-4-cuda13": "1:4.5.3-1",
    "datacenter-gpu-manager-exporter": "4.8.2-1",
}
ARCHIVES = "var/cache/apt/archives"


def _debian_archive(target: Target) -> None:
    """Give the target Debian's own archive back (golden.py set it aside), with the .debs of
    earlier runs seeded from the cache so the mirror is only asked for what changed."""
    aside = target.root / "etc/apt/sources.list.debian"
    shutil.copy(aside, target.root / "etc/apt/sources.list")
    cache = golden.cache_dir() / "apt-archives"
    cache.mkdir(parents=True, exist_ok=True)
    for deb in cache.glob("*.deb"):
        shutil.copy(deb, target.root / ARCHIVES / deb.name)
    target.run(["apt-get", "update", "-q"], check=True)
    target.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "iproute2"], check=True)


def _keep_debs(target: Target) -> None:
    cache = golden.cache_dir() / "apt-archives"
    for deb in (target.root / ARCHIVES).glob("*.deb"):
        if not (cache / deb.name).exists():
            shutil.copy(deb, cache / deb.name)


def _spec(tmp_path: Path, target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex) -> Path:
    monitoring = {
        "dcgm": "4.5.3",
        "listen": target.host,
        "prometheus": True,
        "prometheus_listen": target.host,
    }
    return write_spec(
        tmp_path / "spec.yaml",
        nvidia_repo.url,
        nvidia_repo,
        wheel_index,
        python=None,
        cuda=None,
        monitoring=monitoring,
    )


def unit_command(root: Path, unit: str) -> tuple[list[str], str]:
    """The argv and user a unit starts: its ``ExecStart`` after drop-ins (an empty one resets),
    ``$VAR``/``${VAR}`` words expanded from its ``EnvironmentFile`` as systemd splits them."""
    texts = [(root / "lib/systemd/system" / unit).read_text()]
    texts += [p.read_text() for p in sorted((root / "etc/systemd/system" / f"{unit}.d").glob("*.conf"))]
    exec_start, user, env = "", "root", {}
    for text in texts:
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key == "ExecStart":
                exec_start = value
            elif key == "User":
                user = value
            elif key == "EnvironmentFile":
                for env_line in (root / value.lstrip("-").lstrip("/")).read_text().splitlines():
                    name, sep, raw = env_line.partition("=")
                    if sep and not name.startswith("#"):
                        env[name.strip()] = " ".join(shlex.split(raw))
    argv: list[str] = []
    for word in shlex.split(exec_start):
        name = word.removeprefix("$").strip("{}")
        argv += shlex.split(env.get(name, "")) if word.startswith("$") else [word]
    return argv, user


def analyze_unit(root: Path, unit: str, scratch: Path) -> list[str]:
    """``systemd-analyze verify`` on a copy of the root's unit and its drop-ins; the complaints
    left after removing "Command X is not executable" for an X that is executable in the root
    (the root has no systemd, so it cannot be analysed with --root)."""
    (scratch / f"{unit}.d").mkdir(parents=True)
    shutil.copy(root / "lib/systemd/system" / unit, scratch / unit)
    for conf in (root / "etc/systemd/system" / f"{unit}.d").glob("*.conf"):
        shutil.copy(conf, scratch / f"{unit}.d" / conf.name)
    done = subprocess.run(["systemd-analyze", "verify", str(scratch / unit)], capture_output=True, text=True)
    lines = (done.stdout + done.stderr).splitlines()
    missing = re.compile(rf"^{re.escape(unit)}: Command (/\S+) is not executable: No such file or directory$")
    return [
        line
        for line in lines
        if not ((m := missing.match(line)) and os.access(root / m.group(1).lstrip("/"), os.X_OK))
    ]


@pytest.fixture()
def daemons(target: Target) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test starts in the target; stopped at the end (the target's teardown also
    kills whatever still runs chrooted)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.terminate()
    for process in started:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _start(target: Target, unit: str, started: list[subprocess.Popen[bytes]]) -> list[str]:
    argv, user = unit_command(target.root, unit)
    log = (target.workdir / f"{unit}.log").open("ab")
    with log:
        started.append(
            subprocess.Popen(
                ["chroot", f"--userspec={user}:{user}", str(target.root), *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=CHROOT_ENV,
            )
        )
    return argv


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        data: bytes = response.read()
    return data


def _wait(what: str, probe: Any, timeout: float, target: Target) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except OSError as exc:
            last = exc
        time.sleep(0.5)
    logs = {p.name: p.read_text()[-1500:] for p in target.workdir.glob("*.service.log")}
    raise AssertionError(f"{what} not ready after {timeout} s: {last!r}; logs: {logs}")


def _targets_up(url: str) -> list[tuple[str, str, str]] | None:
    active = json.loads(_get(url))["data"]["activeTargets"]
    got = [(t["labels"]["job"], t["labels"]["instance"], t["health"]) for t in active]
    return got if got and all(h == "up" for _, _, h in got) else None


def test_monitoring_applies_runs_scrapes_and_reapplies_nothing(
    target: Target,
    nvidia_repo: NvidiaRepo,
    wheel_index: WheelIndex,
    tmp_path: Path,
    runs: Path,
    daemons: list[subprocess.Popen[bytes]],
) -> None:
    _debian_archive(target)
    spec = _spec(tmp_path, target, nvidia_repo, wheel_index)
    inv = str(target.inventory)

    first = provision("apply", str(spec), "-i", inv, "--yes")
    _keep_debs(target)
    assert first.exit_code == 0, first.output
    assert "Converged: a fresh plan shows no changes." in first.output
    # No systemd in the root: the role says so (in Ansible's output kept in the run directory).
    said = [
        p for p in runs.rglob("stdout") if "were configured but not started" in p.read_text(errors="replace")
    ]
    assert said, sorted(str(p.relative_to(runs)) for p in runs.rglob("*"))[:40]

    status = target.dpkg_status()
    for name, version in DCGM.items():
        assert status[name] == (version, "hold ok installed"), name  # pinned and held with the stack
    assert status["prometheus"][1] == "install ok installed"  # Debian's, not held: security updates reach it
    assert status["prometheus-node-exporter"][1] == "install ok installed"
    dropin = target.root / "etc/systemd/system/nvidia-dcgm-exporter.service.d/provision.conf"
    assert f"-a {target.host}:9400" in dropin.read_text()

    # systemd's own reading of the exporter unit with provision's drop-in (where systemd-analyze
    # exists): the only complaint allowed is that the command is missing on this host, not in the root.
    if shutil.which("systemd-analyze"):
        problems = analyze_unit(target.root, "nvidia-dcgm-exporter.service", tmp_path / "units")
        assert not problems, problems

    exporter = _start(target, "nvidia-dcgm-exporter.service", daemons)
    assert exporter == [
        "/usr/bin/dcgm-exporter",
        "-f",
        "/etc/dcgm-exporter/provision-counters.csv",
        "-a",
        f"{target.host}:9400",
    ]
    node = _start(target, "prometheus-node-exporter.service", daemons)
    assert node == [
        "/usr/bin/prometheus-node-exporter",
        f"--web.listen-address={target.host}:9100",
        "--collector.textfile.directory=/var/lib/prometheus/node-exporter",
    ]
    _start(target, "prometheus.service", daemons)

    api = f"http://{target.host}:9090/api/v1/targets"
    up = _wait("Prometheus targets up", lambda: _targets_up(api), 60, target)
    assert sorted(up) == [
        ("dcgm", f"{target.host}:9400", "up"),
        ("node", f"{target.host}:9100", "up"),
        ("prometheus", f"{target.host}:9090", "up"),
    ]
    rules = json.loads(_get(f"http://{target.host}:9090/api/v1/rules"))["data"]["groups"]
    assert {r["name"] for g in rules for r in g["rules"]} >= {"GpuMemoryTemperatureNearLimit", "GpuXidFatal"}

    # verify here reads the target's exporters and Prometheus on their addresses, and writes its
    # results into the target's textfile directory, which the target's node exporter then serves.
    textfile = target.root / "var/lib/prometheus/node-exporter/provision-verify.prom"
    result = provision("verify", str(spec), "--json", "--prometheus", str(textfile))
    report = one_report(json.loads(result.stdout))
    checks = {(r["id"], r["subject"]): r for r in report["results"]}
    assert checks[("dcgm-exporter-metrics", "")]["status"] == "pass", checks[("dcgm-exporter-metrics", "")]
    assert checks[("node-exporter-metrics", "")]["status"] == "pass"
    for job, port in (("dcgm", 9400), ("node", 9100), ("prometheus", 9090)):
        assert checks[("prometheus-targets", f"{job}/{target.host}:{port}")]["status"] == "pass"
    served = _wait(
        "node exporter serving verify's textfile",
        lambda: b"provision_verify_checks{" in _get(f"http://{target.host}:9100/metrics"),
        10,
        target,
    )
    assert served
    if promtool := shutil.which("promtool"):
        linted = subprocess.run(
            [promtool, "check", "metrics"], input=textfile.read_text(), capture_output=True, text=True
        )
        assert linted.returncode == 0, linted.stdout + linted.stderr

    # With every daemon running, detection sees their sockets as theirs: no refusal, no change.
    replan = provision("plan", str(spec), "-i", inv, "--detailed-exitcode", "--json")
    assert replan.exit_code == 0, replan.output
    assert_no_change_unconfirmed(json.loads(replan.stdout))
    second = provision("apply", str(spec), "-i", inv, "--yes")
    assert second.exit_code == 0, second.output
    assert "Nothing to do: Ansible was not started." in second.output


def test_a_port_taken_by_another_program_is_refused_and_nothing_changes(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    _debian_archive(target)
    spec = _spec(tmp_path, target, nvidia_repo, wheel_index)
    squatter = subprocess.Popen(
        ["python3", "-m", "http.server", "--bind", target.host, "9100"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait("the squatter listening", lambda: _get(f"http://{target.host}:9100/") is not None, 10, target)
        before = target.dpkg_status()
        result = provision("apply", str(spec), "-i", str(target.inventory), "--yes")
        assert result.exit_code == 1, result.output
        assert (
            "[monitoring-port-taken] monitoring.node_exporter_port: port 9100 is taken by python3"
            in result.output
        )
        assert target.dpkg_status() == before
        assert not (target.root / "etc/default/prometheus-node-exporter").exists()
    finally:
        squatter.terminate()
        squatter.wait(timeout=10)
