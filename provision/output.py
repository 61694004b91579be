"""Reading and writing the files a user names (``--facts``, ``--fleet``, ``--out``, ``-o``, ``--junit``):
one clear error, no traceback."""

from __future__ import annotations

from pathlib import Path

from provision.errors import ProvisionError
from provision.files import read_text


def write_output(path: Path, data: str | bytes) -> None:
    """Write a file the user asked for (``--out``, ``-o``).

    Raises:
        ProvisionError: The path cannot be written (missing directory, a directory, no permission).
    """
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as exc:
        raise ProvisionError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_input(path: Path, kind: str, error: type[ProvisionError], label: str | None = None) -> str:
    """The UTF-8 text of a file the user named.

    Args:
        kind: What the file is, for the messages (``facts``, ``plan``, ``fleet``).
        error: The ProvisionError subclass to raise.
        label: How a wrong file is named (default ``provision <kind>``).

    Raises:
        ProvisionError: ``error`` when the file is missing, not a regular file, too large, not
            UTF-8 text, holds a NUL byte, or is unreadable (see :mod:`provision.files`).
    """
    return read_text(path, what=kind, error=error, label=label or f"provision {kind}")
