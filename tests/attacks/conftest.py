"""Fixtures for the attack tests: an unprivileged user (nobody, through setpriv) plants files, then
the real CLI runs as root.

Every test here is marked ``attacks``; they are skipped, with the reason, when not run as root or
without ``setpriv`` (util-linux, part of every Debian and Ubuntu install) or the ``nobody`` user.
CI runs as root on Debian 12, so there they run.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parents[1]
NOBODY = 65534
"""nobody and nogroup on Debian and Ubuntu: the attacker."""


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "attack tests run the CLI as root (and plant files as nobody through setpriv)"
    if shutil.which("setpriv") is None:
        return "attack tests need setpriv (util-linux)"
    try:
        pwd.getpwuid(NOBODY)
    except KeyError:
        return f"attack tests need the user nobody (uid {NOBODY})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _skip_reason()
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.attacks)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@dataclass(frozen=True)
class Lab:
    """A directory tree where root and the attacker both have places.

    Attributes:
        root: Root's directory (0755), under /srv: a venv under /tmp is refused by the spec itself.
        eve: The attacker's own directory (nobody's, 0755).
        sticky: A shared directory like /tmp (root's, mode 1777).
    """

    root: Path
    eve: Path
    sticky: Path

    def as_eve(self, script: str) -> None:
        """Run ``script`` with sh as nobody (real and effective uid and gid, no groups)."""
        subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", "sh", "-c", script],
            check=True,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "HOME": str(self.eve)},
            timeout=60,
        )

    def provision(
        self, *args: str, path_prefix: str = "", timeout: int = 300
    ) -> subprocess.CompletedProcess[str]:
        """The real CLI as root (not through sudo: only root is trusted)."""
        env = {k: v for k, v in os.environ.items() if k != "SUDO_UID"}
        env |= {"PYTHONPATH": str(REPO), "NO_COLOR": "1", "COLUMNS": "10000"}
        if path_prefix:
            env["PATH"] = f"{path_prefix}{os.pathsep}{env['PATH']}"
        return subprocess.run(
            [sys.executable, "-m", "provision", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
            timeout=timeout,
            check=False,
        )


@pytest.fixture
def lab() -> Iterator[Lab]:
    base = Path(tempfile.mkdtemp(prefix="provision-attack-", dir="/srv"))
    try:
        base.chmod(0o755)
        eve, sticky = base / "eve", base / "tmp"
        eve.mkdir()
        os.chown(eve, NOBODY, NOBODY)
        sticky.mkdir()
        sticky.chmod(0o1777)
        yield Lab(base, eve, sticky)
    finally:
        shutil.rmtree(base, ignore_errors=True)
