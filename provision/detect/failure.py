"""The explicit Unknown of a probe that did not run cleanly, shared by every parser module.

Kept apart from the parsers so that fact models defined next to their parsers (hardware,
system) can be imported by facts.py without an import cycle.
"""

from __future__ import annotations

import re

from provision.detect.collector import NOT_FOUND_RC, TIMEOUT_RC
from provision.detect.raw import MISSING_RC
from provision.detect.unknown import Unknown


def first_line(output: str, limit: int = 200) -> str:
    """The first non-blank line of ``output``, stripped and cut to ``limit`` characters."""
    line = next((s.strip() for s in output.splitlines() if s.strip()), "no output")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def failure(tool: str, output: str, rc: int) -> Unknown | None:
    """The Unknown for a probe that did not run cleanly, or None when ``rc`` is 0.

    Args:
        tool: The command as named in the reason, e.g. ``nvidia-smi``.
        output: The probe's output.
        rc: Its exit status (127 not found, 124 timed out, -1 never ran).
    """
    # A pipeline (`sh -c 'modinfo nvidia | head'`) exits 0 even when its first command is missing.
    if rc == NOT_FOUND_RC or re.search(rf"^(sh: \d+: )?{re.escape(tool)}: not found$", output, re.MULTILINE):
        return Unknown(unknown=f"{tool}: not found")
    if rc == 0:
        return None
    if rc == TIMEOUT_RC:
        return Unknown(unknown=f"{tool} timed out")
    if rc == MISSING_RC:
        return Unknown(unknown=first_line(output))
    return Unknown(unknown=f"{tool} exited {rc}: {first_line(output)}")
