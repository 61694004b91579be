"""Fixtures giving integration tests a real apply target (see tests/integration/harness).

Session scope:
    golden_root   harness.golden.GoldenRoot: path, ssh_key, build_seconds
    http_server   harness.server.StaticServer: root, port, url
    nvidia_repo   harness.services.NvidiaRepo: base_url, url, keyring, fingerprint, key_url,
                  keyring_url, path, bad(kind) -> url, apt_line(keyring_path_in_target)
    wheel_index   harness.services.WheelIndex: url (cu130), urls (variant -> url)

Function scope:
    target        harness.target.Target: root, host, port, ssh_key, inventory, workdir,
                  run(argv), ssh(*argv), dpkg_status(), installed()
    runs          Path: the run directory provision writes to (PROVISION_RUNS_DIR), no colour

Every test under tests/integration is marked ``integration``. They are skipped, with the
reason, only when not running as root or when debootstrap/overlayfs are missing; CI runs as
root with the tools installed, so there they run. A kernel without overlayfs fails loudly
at the first mount rather than skipping.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from tests.integration.harness import golden, services, timings
from tests.integration.harness import target as target_mod
from tests.integration.harness.server import StaticServer, start_server

HERE = Path(__file__).parent
INSTALL_HINT = "apt-get install debootstrap apt-utils dpkg-dev gnupg openssh-server openssh-client"
REQUIRED_TOOLS = ("debootstrap", "dpkg-deb", "apt-ftparchive", "gpg", "ssh", "ssh-keygen", "mount", "chroot")


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "integration tests need root (mounts, chroot, debootstrap)"
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        return f"integration tests need {', '.join(missing)} ({INSTALL_HINT})"
    return None


def pytest_configure(config: pytest.Config) -> None:
    # A SIGTERM (CI timeout, `timeout`) would kill pytest without running fixture teardown and
    # leave overlay mounts and chrooted sshds behind; as KeyboardInterrupt, teardown still runs.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _skip_reason()
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = timings.summary_lines()
    if lines:
        terminalreporter.write_sep("-", "integration harness timings")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def golden_root() -> golden.GoldenRoot:
    """The cached debootstrapped bookworm root (built on first use, ~45 s)."""
    root = golden.ensure_golden_root()
    timings.record("golden root build" if root.build_seconds else "golden root (cached)", root.build_seconds)
    return root


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StaticServer]:
    """One loopback ``http.server`` for the session's repository and wheel index."""
    base = tmp_path_factory.mktemp("served")
    (base / "www").mkdir()
    server = start_server(base / "www", base / "http.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def nvidia_repo(http_server: StaticServer, tmp_path_factory: pytest.TempPathFactory) -> services.NvidiaRepo:
    """The signed stand-in of NVIDIA's Debian 12 repository, served over http."""
    with timings.timed("stand-in repo (debs + index + sign)"):
        repo = services.publish_nvidia_repo(http_server, golden.cache_dir(), tmp_path_factory.mktemp("repo"))
    timings.record("stand-in repo index + sign", repo.build_seconds)
    return repo


@pytest.fixture(scope="session")
def wheel_index(http_server: StaticServer) -> services.WheelIndex:
    """The stand-in PyTorch PEP 503 index (``url`` is cu130)."""
    return services.publish_wheel_index(http_server)


@pytest.fixture()
def target(golden_root: golden.GoldenRoot, tmp_path: Path) -> Iterator[target_mod.Target]:
    """A fresh overlay target with its sshd running; torn down even when the test fails."""
    with timings.timed("target up"):
        box = target_mod.start_target(golden_root.path, golden_root.ssh_key, tmp_path / "target")
    try:
        yield box
    finally:
        with timings.timed("target down"):
            box.close()


@pytest.fixture()
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where provision writes its runs for this test, with colour off so output can be matched."""
    monkeypatch.setenv("PROVISION_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path / "runs"
