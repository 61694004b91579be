"""The system suite: tests that drive heavy real programs without needing root (a real
ansible-playbook, headless Chromium, multi-process torch), kept out of ``tests/unit``, the fast loop.

Every test here is marked ``system``; ``python3 -m pytest`` (CI) runs them with everything else,
``.ci/lowest`` on the lowest dependency versions too. Each skips with its reason where its program
is missing (Chromium, CPU torch), except where CI requires it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.system)
