"""Writing the files a user asks for (``--out``, ``-o``, ``--junit``): one clear error, no traceback."""

from __future__ import annotations

from pathlib import Path

from provision.errors import ProvisionError


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
