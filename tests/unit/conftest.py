"""Fixtures the unit tests share (builders and helpers are in :mod:`tests.unit.factories`)."""

from __future__ import annotations

import pytest


@pytest.fixture()
def no_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain text from rich (NO_COLOR), so that a test reads a command's lines as a pipe would.

    Use it for a whole module with ``pytestmark = pytest.mark.usefixtures("no_colour")``.
    """
    monkeypatch.setenv("NO_COLOR", "1")
