"""Fixtures for fleet tests: N real sshd targets on overlay roots, one inventory over all of them.

The session fixtures of tests/integration (golden root, stand-in NVIDIA repository, wheel
index) are reused. Every test here is marked ``fleet``; those that need targets are
skipped, with the reason, exactly where integration tests are (not root, tools missing).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration import conftest as integration
from tests.integration.harness import golden
from tests.integration.harness import target as target_mod

HERE = Path(__file__).parent
# The integration session fixtures, found by pytest under these names.
golden_root = integration.golden_root
http_server = integration.http_server
nvidia_repo = integration.nvidia_repo
wheel_index = integration.wheel_index
runs = integration.runs
TARGET_FIXTURES = {"fleet", "fleet6", "golden_root", "nvidia_repo", "wheel_index"}


def pytest_configure(config: pytest.Config) -> None:
    # As in tests/integration: a SIGTERM must still tear targets down (mounts, chrooted sshds).
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, integration._interrupt)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = integration._skip_reason()
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.fleet)
            if reason and TARGET_FIXTURES & set(getattr(item, "fixturenames", ())):
                item.add_marker(pytest.mark.skip(reason=reason))


@dataclass
class FleetTargets:
    """Running targets by inventory hostname, and the inventory directory for them.

    Attributes:
        targets: ``gpu1``..``gpuN`` -> harness Target (each on its own 127.0.0.X:2222).
        directory: Where inventories, specs and fleet files of the test go.
    """

    targets: dict[str, target_mod.Target]
    directory: Path

    def host_line(self, name: str, **extra: str) -> str:
        """One INI inventory line reaching target ``name`` over ssh as root."""
        box = self.targets[name]
        more = "".join(f" {k}={v}" for k, v in extra.items())
        return (
            f"{name} ansible_host={box.host} ansible_port={box.port} ansible_user=root "
            f"ansible_ssh_private_key_file={box.ssh_key} ansible_python_interpreter=/usr/bin/python3 "
            "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'" + more
        )

    def stop_sshd(self, name: str) -> None:
        """Make ``name`` unreachable: its sshd stops listening (sessions already open stay)."""
        box = self.targets[name]
        if box._sshd is not None:
            target_mod._stop(box._sshd)
            box._sshd = None

    def start_sshd(self, name: str) -> None:
        """Bring ``name`` back: start its sshd again on the same address."""
        box = self.targets[name]
        if box._sshd is None:
            box._sshd = target_mod._start_sshd(box)


def _targets(golden_root: golden.GoldenRoot, tmp_path: Path, count: int) -> Iterator[FleetTargets]:
    targets: dict[str, target_mod.Target] = {}
    try:
        for n in range(1, count + 1):
            name = f"gpu{n}"
            targets[name] = target_mod.start_target(golden_root.path, golden_root.ssh_key, tmp_path / name)
        yield FleetTargets(targets, tmp_path)
    finally:
        for box in targets.values():
            box.close()


@pytest.fixture()
def fleet(golden_root: golden.GoldenRoot, tmp_path: Path) -> Iterator[FleetTargets]:
    """Four fresh targets, ``gpu1``..``gpu4``; all torn down even when the test fails."""
    yield from _targets(golden_root, tmp_path, 4)


@pytest.fixture()
def fleet6(golden_root: golden.GoldenRoot, tmp_path: Path) -> Iterator[FleetTargets]:
    """Six fresh targets, ``gpu1``..``gpu6`` (a rollout of three waves of two)."""
    yield from _targets(golden_root, tmp_path, 6)
