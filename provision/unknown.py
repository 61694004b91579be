"""What an unread fact is, and the reason a probe gave none, in a module of its own so that code which
only tests for it (``isinstance(value, Unknown)``: the components, the OS families' parsers in
:mod:`provision.os`) loads neither the detectors nor the families. :mod:`provision.detect.unknown`,
:mod:`provision.detect.fact` and :mod:`provision.detect.facts` re-export it."""

from __future__ import annotations

import re

from pydantic import Field

from provision.models import Frozen

NOT_FOUND_RC = 127
"""Exit status of a probe whose command is missing (the collector's, ``provision.detect.collector``)."""
TIMEOUT_RC = 124
"""Exit status of a probe the collector killed at its timeout."""
MISSING_RC = -1
"""Exit status of a probe that never ran (its output is absent from a capture)."""


class Unknown(Frozen):
    """A fact that could not be read, with the reason (e.g. ``lspci: not found``)."""

    unknown: str = Field(description="Why the fact is unknown.")


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
    # The substring test first: a pattern per tool compiled on every parse cost ~2 ms a command.
    said = f"{tool}: not found" in output
    if rc == NOT_FOUND_RC or (
        said and re.search(rf"^(sh: \d+: )?{re.escape(tool)}: not found$", output, re.MULTILINE)
    ):
        return Unknown(unknown=f"{tool}: not found")
    if rc == 0:
        return None
    if rc == TIMEOUT_RC:
        return Unknown(unknown=f"{tool} timed out")
    if rc == MISSING_RC:
        return Unknown(unknown=first_line(output))
    return Unknown(unknown=f"{tool} exited {rc}: {first_line(output)}")


class NotRun(Unknown):
    """A measurement whose program was never started, and what lets it run (verify's GPU program
    when the venv is missing or refused by the trust rule). A check built on it shows :attr:`fix`
    as its hint instead of a guess at a hardware cause that nothing measured."""

    fix: str = Field(description="What to do so that the program runs (one line).")


def because(statement: str, reason: str) -> str:
    """``statement`` and the ``reason`` for it as one flat clause: ``not observed: no venv given;
    torch is read from the spec's python.venv``, never ``not observed (no venv given (torch ...))``.

    Every place that says why something is so composes with this, so that a reason handed up
    through several layers (a probe's Unknown, a component's state, a check's detail) reads as one
    sentence however many layers add to it: see :func:`flat_reason`.
    """
    return f"{statement}: {flat_reason(reason)}"


def flat_reason(reason: str) -> str:
    """``reason`` with its trailing parenthesised asides as ``; `` clauses (``A (B (C))`` -> ``A; B;
    C``); an aside inside the text (``nvidia-smi(1)``, ``(x) y``) or ending an enumeration (``(a) and
    (b)``) stays. Never raises."""
    text = reason.strip()
    if not text.endswith(")"):
        return text
    start = _aside_start(text)
    if start is None or text[:start].rstrip().endswith((" and", " or", ",")):  # an enumeration's last item
        return text
    head, aside = flat_reason(text[:start]), flat_reason(text[start + 1 : -1])
    return f"{head}; {aside}" if head and aside else head or aside


def _aside_start(text: str) -> int | None:
    """Where the parenthesis that the final ``)`` closes opens, when a space (or nothing) precedes it."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i if i == 0 or text[i - 1] == " " else None
    return None
