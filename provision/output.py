"""Reading and writing the files a user names (``--facts``, ``--fleet``, ``--out``, ``-o``, ``--junit``):
one clear error, no traceback; every output written atomically, never through a planted link.

A command that writes a file at its end checks the path first (:func:`check_output_file`,
:func:`check_output_directory`), before it detects, plans or runs anything: a typo in a directory
name costs one line, not minutes of GPU work followed by a report and an error.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path

from provision import trust
from provision.errors import FactsError, ProvisionError, UntrustedError
from provision.files import read_text, untrusted_message


def check_output_file(path: Path, option: str) -> None:
    """Refuse, in one line and before any work, a file path that could not be written at the end.

    Args:
        path: The file the command will write (``--out``, ``--junit``, ``--prometheus``, ``-o``).
        option: The option that named it, for the message.

    Raises:
        ProvisionError: ``path`` is a directory, or its directory does not exist or is not a directory.
        UntrustedError: Its directory fails the trust rule (a sticky one such as ``/tmp`` is
            allowed), or an entry of that name exists that another user owns (a planted link).
    """
    if path.is_dir():
        raise ProvisionError(f"{option} {path}: is a directory; give a file name")
    parent = path.parent
    if not parent.exists():
        raise ProvisionError(f"{option} {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise ProvisionError(f"{option} {path}: {parent} is not a directory")
    _check(parent, option, "its directory", sticky_ok=True)
    _refuse_foreign(path, option)


def check_output_directory(directory: Path, option: str) -> None:
    """Refuse, in one line and before any work, a directory path that exists as something else
    (the directory itself and its parents are created when written), or that the trust rule
    refuses (an existing one must pass; a missing one, the directory it would be created in,
    which may be sticky).

    Raises:
        FactsError: ``directory``, or the nearest of its parents that exists, is not a directory.
        UntrustedError: The trust rule refuses it.
    """
    if directory.exists() and not directory.is_dir():
        raise FactsError(f"{option} {directory}: exists and is not a directory")
    existing = next((p for p in directory.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise FactsError(f"{option} {directory}: {existing} is not a directory")
    _check(directory, option, "the directory", missing_ok=True, sticky_ok=not directory.exists())


def _check(path: Path, option: str, what: str, *, missing_ok: bool = False, sticky_ok: bool = False) -> None:
    try:
        trust.check_path(path, kind="dir", missing_ok=missing_ok, sticky_ok=sticky_ok, writing=True)
    except trust.Untrusted as exc:
        raise UntrustedError(f"{option} {untrusted_message(path, exc, what)}") from None


def _refuse_foreign(path: Path, option: str) -> None:
    """Refuse an existing entry at ``path`` that a user other than a trusted one owns: it is never
    written through (outputs replace it by rename), but in a sticky directory the rename would fail."""
    try:
        info = path.lstat()
    except OSError:
        return
    if info.st_uid not in trust.trusted_owners():
        raise UntrustedError(
            f"{option} {path}: exists and is owned by {trust.owner_text(info.st_uid)}; provision does not "
            f"replace another user's file (remove it or write elsewhere: {trust.DOC})"
        )


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


PRIVATE = 0o600
"""Mode of outputs that hold what root read on the machine (raw probe outputs, verify inputs,
support bundles): only their owner reads them."""
PUBLIC = 0o644
"""Mode of outputs meant to be read by others (plans, checklists, JUnit, node exporter textfiles)."""


def write_output(path: Path, data: str | bytes, *, mode: int = PUBLIC) -> None:
    """Write a file the user asked for (``--out``, ``-o``, ``--junit``, ``--prometheus``), atomically.

    The data goes to a new temporary file in the same directory (``O_CREAT | O_EXCL | O_NOFOLLOW``,
    opened relative to the directory's descriptor once the trust rule accepted the directory),
    is flushed to disk, and is renamed over ``path``: a reader, or a kill at any moment, sees the
    old file or the whole new one, never a partial or empty one, and a link planted at ``path`` is
    replaced, never written through.

    Raises:
        ProvisionError: The path cannot be written (missing directory, a directory, no permission).
        UntrustedError: Its directory fails the trust rule, or another user owns an entry there.
    """
    directory = _open_output_directory(path.parent, path)
    try:
        _write_at(directory, path, data.encode("utf-8") if isinstance(data, str) else data, mode)
    finally:
        os.close(directory)


def write_files(directory: Path, files: Mapping[str, str | bytes], *, mode: int = PUBLIC) -> list[Path]:
    """Write ``files`` (name -> content) into ``directory`` as :func:`write_output` does, creating the
    directory (and its parents, 0755) first when missing; returns the paths written.

    Raises:
        ProvisionError: As :func:`write_output`; the directory cannot be created.
        UntrustedError: ``directory`` fails the trust rule once created (another user's, of that name).
    """
    make_output_directory(directory)
    fd = _open_output_directory(directory, directory)
    try:
        written = []
        for name, data in files.items():
            written.append(directory / name)
            _write_at(fd, directory / name, data.encode("utf-8") if isinstance(data, str) else data, mode)
        return written
    finally:
        os.close(fd)


def make_output_directory(directory: Path) -> None:
    """Create ``directory`` and its missing parents (0755) where the trust rule allows it, then check
    the result (an entry of that name another user made first is refused).

    Raises:
        ProvisionError: It cannot be created.
        UntrustedError: The rule refuses it or where it would go.
    """
    try:
        if not trust.check_path(directory, kind="dir", missing_ok=True, sticky_ok=True, writing=True):
            directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    except trust.Untrusted as exc:
        raise UntrustedError(untrusted_message(directory, exc, "the output directory")) from None
    except OSError as exc:
        raise ProvisionError(f"cannot create {directory}: {exc.strerror or exc}") from None


def _open_output_directory(directory: Path, path: Path) -> int:
    try:
        return trust.open_directory(directory, sticky_ok=True, writing=True)
    except trust.Missing:
        raise ProvisionError(f"cannot write {path}: no such directory {directory}") from None
    except trust.Untrusted as exc:
        raise UntrustedError(untrusted_message(directory, exc, f"the directory of {path}")) from None
    except OSError as exc:
        raise ProvisionError(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_at(directory: int, path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path.name`` in the open ``directory``: a new temporary file, fsync, rename."""
    temp = f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        info = os.stat(path.name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None and info.st_uid not in trust.trusted_owners():
        raise UntrustedError(
            f"cannot write {path}: it exists and is owned by {trust.owner_text(info.st_uid)}; provision does "
            f"not replace another user's file ({trust.DOC})"
        )
    try:
        fd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=directory
        )
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(temp, path.name, src_dir_fd=directory, dst_dir_fd=directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=directory)
        raise ProvisionError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=directory)
        raise


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


def write_atomic(path: Path, data: str | bytes, mode: int = PUBLIC, option: str | None = None) -> None:
    """:func:`write_output`, the directory and its missing parents created first
    (:func:`make_output_directory`).

    Args:
        option: The option that named the path, for the message (``--prometheus``).

    Raises:
        ProvisionError: The directory or the file cannot be written (the reason), prefixed with
            ``option`` when given; UntrustedError where the trust rule refuses it.
    """
    try:
        make_output_directory(path.parent)
        write_output(path, data, mode=mode)
    except ProvisionError as exc:
        if option is None:
            raise
        exc.args = (f"{option} {exc}",)
        raise
