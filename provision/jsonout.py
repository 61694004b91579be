"""The one ``--json`` channel: exactly one JSON document on stdout per command, in every outcome.

Every document is a JSON object whose ``format_version`` names its shape (README, "JSON
output"). A command writes its document through :func:`emit`; when a ``ProvisionError`` ends a
``--json`` command before it wrote one, the CLI writes :func:`error_document` instead, so a
caller always parses exactly one object and reads the exit code for the outcome. Text for
people goes to stderr while ``--json`` is on.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from provision.errors import Interrupted, ProvisionError, SpecError

FORMAT_VERSION = 1
"""Raised when a key is removed or changes meaning; new keys keep the version."""

HOSTS_FORMAT = 2
"""``format_version`` of a command whose document is the hosts form: ``{"format_version": 2,
"hosts": [{"host": name, ...}, ...], ...}`` with the command's summary keys beside ``hosts``. One
shape whatever the targets: one machine is a list of one, with the same top-level keys as an
inventory's (``detect``, ``plan``; version 1 had a bare single-host form)."""

_written = False


def host_rows(document: Any, what: str = "hosts") -> list[dict[str, Any]]:
    """The per-host objects of a saved hosts-form document, whatever its version: format 2's
    ``hosts`` list as it is, format 1's ``{host: object}`` with each object's ``host`` added, in
    the document's order (``lock show``, ``import``, ``verify`` and ``plan`` wrote that shape).

    Raises:
        ValueError: ``document`` has no ``hosts`` in either shape (``what`` names it).
    """
    rows = document.get("hosts") if isinstance(document, dict) else None
    if isinstance(rows, dict) and all(isinstance(v, dict) for v in rows.values()):
        return [{"host": str(h), **{k: v for k, v in row.items() if k != "host"}} for h, row in rows.items()]
    if isinstance(rows, list) and all(isinstance(r, dict) and isinstance(r.get("host"), str) for r in rows):
        return list(rows)
    raise ValueError(f"not a provision {what} document (hosts: a list of objects with host, or by name)")


def begin() -> None:
    """Start a command: no document written yet."""
    global _written
    _written = False


def written() -> bool:
    """Whether the running command already wrote its document."""
    return _written


def versioned(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``format_version`` first (an existing one is kept: a Plan carries its own)."""
    return {"format_version": data.get("format_version", FORMAT_VERSION)} | data


def emit(data: dict[str, Any]) -> None:
    """Write ``data`` (versioned) to stdout as the command's one document.

    Raises:
        RuntimeError: A document was already written (two would break every caller's parser).
    """
    global _written
    if _written:
        raise RuntimeError("a --json command wrote a second document")
    # Indented for a person at a terminal; compact (the standard library's C encoder, several
    # times faster than its indented form: 0.06 s against 0.39 s for a 1000-host plan) when piped
    # to a program, as jq and gh do.
    indent = 2 if sys.stdout.isatty() else None
    sys.stdout.write(json.dumps(versioned(data), indent=indent, default=str) + "\n")
    sys.stdout.flush()
    _written = True


def error_document(exc: ProvisionError, exit_code: int) -> dict[str, Any]:
    """The document of a command a ProvisionError ended.

    Shape: ``{"format_version": 1, "outcome": "error", "exit_code": int, "error": {"type": str,
    "message": str, "problems": [str]}}``; ``problems`` holds one ``file:line:column: field:
    message`` line per problem of a spec (:class:`SpecError`), else the message alone. Ctrl-C
    (:class:`Interrupted`, exit 130) gives ``outcome: "interrupted"`` in the same shape.
    """
    problems = exc.problems if isinstance(exc, SpecError) else [str(exc)]
    return {
        "outcome": "interrupted" if isinstance(exc, Interrupted) else "error",
        "exit_code": exit_code,
        "error": {"type": type(exc).__name__, "message": str(exc), "problems": problems},
    }
