"""Every test: provision's run directories and its state (the plan seal key) go under pytest's
temporary directory, never into this machine's real ``/var/lib/provision`` (root's default),
unless the test sets its own. Session-wide, so that module and session fixtures get them too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _provision_dirs_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PROVISION_RUNS_DIR", str(tmp_path_factory.mktemp("provision-runs")))
        patch.setenv("PROVISION_STATE_DIR", str(tmp_path_factory.mktemp("provision-state")))
        yield
