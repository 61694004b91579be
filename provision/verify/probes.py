"""The two probes verify adds to detection: the fabric manager's version and each GPU's fabric state.

Each is one command plus one pure parser returning data or an :class:`Unknown` with the reason,
as in :mod:`provision.detect`.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence

from provision.detect.facts import Unknown
from provision.detect.failure import failure, first_line
from provision.verify.runs import FabricGpu

FM_VERSION_ARGV = ("nv-fabricmanager", "--version")
SMI_Q_ARGV = ("nvidia-smi", "-q")
_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)+)")
_FIELD = re.compile(r"^\s*(State|Status)\s*:\s*(.*?)\s*$")


def run(argv: Sequence[str], timeout: float = 20.0) -> tuple[str, int]:
    """Output (stdout and stderr) and exit status of ``argv``; 127 when missing, 124 on timeout."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return f"{argv[0]}: not found", 127
    except subprocess.TimeoutExpired:
        return f"{argv[0]}: timed out after {timeout:.0f} s", 124
    return done.stdout + done.stderr, done.returncode


def parse_fm_version(output: str, rc: int) -> str | Unknown:
    """``nv-fabricmanager --version`` ("Fabric Manager version is : 535.183.01") -> ``535.183.01``."""
    if (bad := failure("nv-fabricmanager", output, rc)) is not None:
        return bad
    match = _VERSION.search(output)
    return match.group(1) if match else Unknown(unknown=f"no version in: {first_line(output)}")


def parse_fabric(output: str, rc: int) -> tuple[FabricGpu, ...] | Unknown:
    """The ``Fabric`` section (State, Status) of every GPU in ``nvidia-smi -q``, in GPU order."""
    if (bad := failure("nvidia-smi", output, rc)) is not None:
        return bad
    found: list[FabricGpu] = []
    fields: dict[str, str] | None = None
    for line in output.splitlines():
        if line.strip() == "Fabric":
            fields = {}
        elif fields is not None and (match := _FIELD.match(line)):
            fields[match.group(1).lower()] = match.group(2)
            if len(fields) == 2:
                found.append(FabricGpu(**fields))
                fields = None
    return tuple(found)


def fm_version() -> str | Unknown:
    """The installed fabric manager's version, or why it is unknown."""
    return parse_fm_version(*run(FM_VERSION_ARGV))


def fabric_states() -> tuple[FabricGpu, ...] | Unknown:
    """Fabric state and status of every GPU."""
    return parse_fabric(*run(SMI_Q_ARGV))
