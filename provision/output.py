"""Reading and writing the files a user names (``--facts``, ``--fleet``, ``--out``, ``-o``, ``--junit``):
one clear error, no traceback.

A command that writes a file at its end checks the path first (:func:`check_output_file`,
:func:`check_output_directory`), before it detects, plans or runs anything: a typo in a directory
name costs one line, not minutes of GPU work followed by a report and an error.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from provision.errors import FactsError, ProvisionError
from provision.files import read_text


def check_output_file(path: Path, option: str) -> None:
    """Refuse, in one line and before any work, a file path that could not be written at the end.

    Args:
        path: The file the command will write (``--out``, ``--junit``, ``--prometheus``, ``-o``).
        option: The option that named it, for the message.

    Raises:
        ProvisionError: ``path`` is a directory, or its directory does not exist or is not a directory.
    """
    if path.is_dir():
        raise ProvisionError(f"{option} {path}: is a directory; give a file name")
    parent = path.parent
    if not parent.exists():
        raise ProvisionError(f"{option} {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise ProvisionError(f"{option} {path}: {parent} is not a directory")


def check_output_directory(directory: Path, option: str) -> None:
    """Refuse, in one line and before any work, a directory path that exists as something else
    (the directory itself and its parents are created when written).

    Raises:
        FactsError: ``directory``, or the nearest of its parents that exists, is not a directory.
    """
    if directory.exists() and not directory.is_dir():
        raise FactsError(f"{option} {directory}: exists and is not a directory")
    existing = next((p for p in directory.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise FactsError(f"{option} {directory}: {existing} is not a directory")


def check_outputs(
    files: Mapping[str, Path | None] | None = None, directories: Mapping[str, Path | None] | None = None
) -> None:
    """:func:`check_output_file` for each given file and :func:`check_output_directory` for each given
    directory, both keyed by the option that named them (None: the option was not given)."""
    for option, path in (files or {}).items():
        if path is not None:
            check_output_file(path, option)
    for option, path in (directories or {}).items():
        if path is not None:
            check_output_directory(path, option)


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


def refuse_existing(paths: Iterable[Path], force: bool) -> None:
    """Refuse, before any work, to replace a file the user did not say may be replaced.

    Raises:
        ProvisionError: One of ``paths`` exists and ``force`` is false.
    """
    existing = [p for p in paths if p.exists() or p.is_symlink()]
    if existing and not force:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise ProvisionError(f"{existing[0]} exists{more}: give --force to replace it, or another --out")


def write_atomic(path: Path, data: str | bytes, mode: int = 0o644, option: str | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file in its directory renamed over it, so that
    a reader sees the old file or the new one, never part of one (rename(2) is atomic within a file
    system); the directory and its parents are created.

    Args:
        option: The option that named the path, for the message (``--prometheus``); None says
            ``cannot write PATH``.

    Raises:
        ProvisionError: The directory or the file cannot be written (the reason from the OS).
    """
    where = f"{option} {path}" if option else f"cannot write {path}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ProvisionError(f"{where}: cannot write in {path.parent}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ProvisionError(f"{where}: {exc.strerror or exc}") from None
