"""The probe verify adds to detection: the fabric manager's version.

The fact itself (command and parser) is :class:`~provision.detect.domains.driver.FabricManagerVersionFact`;
the fabric state comes from detection's ``nvidia-smi -q`` (``facts.fabric``), parsed once there.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from provision.detect.domains.driver import FabricManagerVersionFact
from provision.detect.fact import Unknown


def run(argv: Sequence[str], timeout: float = 20.0) -> tuple[str, int]:
    """Output (stdout and stderr) and exit status of ``argv``; 127 when missing, 124 on timeout."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return f"{argv[0]}: not found", 127
    except subprocess.TimeoutExpired:
        return f"{argv[0]}: timed out after {timeout:.0f} s", 124
    return done.stdout + done.stderr, done.returncode


def fm_version() -> str | Unknown:
    """The installed fabric manager's version, or why it is unknown."""
    fact = FabricManagerVersionFact
    return fact.parse(*run(fact.argv, fact.timeout))
