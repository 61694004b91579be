"""Every test: provision's run directories go under pytest's temporary directory, never into this
machine's real ``/var/lib/provision/runs`` (root's default), unless the test sets its own."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def _runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("provision-runs")


@pytest.fixture(autouse=True)
def _runs_dir_in_tmp(_runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISION_RUNS_DIR", str(_runs_root))
