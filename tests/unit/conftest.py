"""Fixtures the unit tests share (builders and helpers are in :mod:`tests.unit.factories`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture

from tests.unit.factories import A100X, DOWN, mock_detection, two_host_inventory


@pytest.fixture()
def no_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain text from rich (NO_COLOR), so that a test reads a command's lines as a pipe would.

    Use it for a whole module with ``pytestmark = pytest.mark.usefixtures("no_colour")``.
    """
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture()
def inventory(tmp_path: Path) -> Path:
    """``hosts.ini``: ``a`` a fresh Ubuntu box, ``b`` unreachable (with ``detected``); both mapped to
    the A100X spec."""
    return two_host_inventory(tmp_path, A100X)


@pytest.fixture()
def detected(mocker: MockerFixture) -> Any:
    """Detection answers ``a`` as a fresh Ubuntu box and ``b`` as unreachable with ``DOWN``."""
    return mock_detection(mocker, DOWN)
