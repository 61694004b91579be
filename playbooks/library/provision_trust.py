#!/usr/bin/python3
"""The trust rule: what provision runs, applies or plans from as root must be root's or the invoking user's.

A path is **trusted** when every part of it, from ``/`` down (each directory, each symbolic link
followed, and the file itself):

* is owned by root or by the invoking user (:func:`invoking_uid`), and
* is writable by no one else: not by others, and not by its group unless the group is root's or
  a trusted user's private group (named as its user, that user's primary group, no other member
  listed). A sticky directory (``/tmp``, mode 1777) is allowed *above* the path, never as its
  last part: there others cannot rename or remove the entries they do not own.

The path is walked one component at a time from an open directory (``openat`` with
``O_NOFOLLOW``): a symbolic link is followed only after its own owner and the directory holding it
passed the rule, its target is then walked the same way, and at most :data:`MAX_LINKS` links are
followed, so no link another user planted is ever followed, and a directory swapped while it is
walked is refused. A file is opened by :func:`open_file` only once its path passed, relative to
its directory's descriptor, and only when it is a regular file (a FIFO or a device is never
opened). A tree (:func:`check_tree`: a venv, an inventory directory, provision's own package) is
trusted when its top is and every entry below it too (links' targets walked as paths). A venv
(:func:`check_venv`) is its tree plus the interpreter directory its ``pyvenv.cfg`` names.

A refusal is :class:`Untrusted`: one line naming the first part that fails and its owner.

Standalone (standard library only, Python 3.8+, no provision imports): provision imports it on the
controller, ``python3 -m provision.regenerate`` copies it verbatim to
``playbooks/library/provision_trust.py`` where the roles and the lock play run it as the Ansible
module ``provision_trust``, and remote verify runs it on each host as
``python3 -I provision_trust.py venv PATH`` (prints ``trusted`` or ``untrusted: <reason>``).
Source of the rule's shape: OpenSSH's ``StrictModes`` (sshd_config(5)) and sudoedit's checks of
the directories it writes in.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

MAX_LINKS = 40
"""Symbolic links followed in one path at most: Linux's own limit (path_resolution(7), ELOOP)."""
MAX_TREE_LINK_DEPTH = 4
"""Directories outside a tree reached through its links are checked as trees this many levels deep."""
CONFIG_LIMIT = 1 << 16
"""Bytes of ``pyvenv.cfg`` read at most (a venv's is under 300 bytes)."""
SUDO_VAR = "SUDO_UID"
"""Set by sudo(8) to the real uid of the user who ran sudo."""
DOC = "docs/security.md#the-trust-rule"
"""Where the rule is explained for users."""

_PATH_FLAGS = os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW
_DIR_FLAGS = _PATH_FLAGS | os.O_DIRECTORY
_READ_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Untrusted(Exception):
    """A path the rule refuses: ``str()`` is one line, ``<path>: <reason naming its owner>``."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class NotRegular(Untrusted):
    """:func:`open_file` was given something other than a regular file (``kind``: ``a FIFO``, ...)."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(path, f"not a regular file ({kind})")
        self.kind = kind


class Missing(Untrusted):
    """A part of the path does not exist (and ``missing_ok`` was not given)."""


def invoking_uid(environ: Mapping[str, str] | None = None) -> int:
    """The uid of the user on whose behalf provision runs.

    Run as root through sudo (real and effective uid 0, ``SUDO_UID`` a uid other than 0): the uid
    ``SUDO_UID`` names, that is the user who ran sudo, who could already run anything as root.
    Otherwise the real uid: root for a root shell, ``su -`` or a systemd unit (``SUDO_UID`` is
    then ignored even if inherited), the user itself when not run as root. Only root can set the
    environment of a process running as root, so ``SUDO_UID`` cannot be forged by another user.
    """
    uid = os.getuid()
    env = os.environ if environ is None else environ
    said = env.get(SUDO_VAR, "")
    if uid == 0 and os.geteuid() == 0 and re.fullmatch(r"[0-9]{1,10}", said) and 0 < int(said) < 2**32 - 1:
        return int(said)
    return uid


def trusted_owners(*extra: int) -> frozenset[int]:
    """Root, the invoking user (:func:`invoking_uid`) and ``extra`` uids (a resume record's invoker)."""
    return frozenset({0, invoking_uid(), *extra})


def owner_text(uid: int) -> str:
    """``root``, ``uid 1000 (alice)`` or ``uid 4242`` (no such user)."""
    if uid == 0:
        return "root"
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def owners_text(owners: Iterable[int]) -> str:
    """Who may own a trusted path, for messages: ``root`` or ``root or uid 1000 (alice)``."""
    return " or ".join(owner_text(uid) for uid in sorted(set(owners) | {0}))


def _group_text(gid: int) -> str:
    try:
        import grp

        return f"group {grp.getgrgid(gid).gr_name}"
    except (KeyError, ImportError):
        return f"gid {gid}"


def _private_group(gid: int, owners: frozenset[int]) -> bool:
    """Whether ``gid`` is root's group or a trusted user's private group, no other member listed."""
    try:
        import grp
        import pwd

        group = grp.getgrgid(gid)
        members = [pwd.getpwnam(name).pw_uid for name in group.gr_mem]
        if any(uid not in owners for uid in members):
            return False
        if gid == 0:
            return True
        user = pwd.getpwnam(group.gr_name)
    except (KeyError, ImportError):
        return False
    return user.pw_uid in owners and user.pw_gid == gid


def _check_owner(path: str, info: os.stat_result, owners: frozenset[int]) -> None:
    if info.st_uid not in owners:
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else _kind(info.st_mode, "a file")
        raise Untrusted(path, f"{what} owned by {owner_text(info.st_uid)}, not by {owners_text(owners)}")


def _check_mode(path: str, info: os.stat_result, owners: frozenset[int], *, above: bool) -> None:
    """Refuse a part others may write; ``above``: a part above the last one (sticky allowed)."""
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return  # a link's own mode is always 0777 and means nothing; its directory and owner do
    sticky = above and stat.S_ISDIR(mode) and bool(mode & stat.S_ISVTX)
    bits = f"mode {stat.S_IMODE(mode):04o}, owner {owner_text(info.st_uid)}"
    if mode & stat.S_IWOTH and not sticky:
        raise Untrusted(path, f"writable by every user ({bits})")
    if mode & stat.S_IWGRP and not sticky and not _private_group(info.st_gid, owners):
        raise Untrusted(path, f"writable by {_group_text(info.st_gid)} ({bits})")


def _kind(mode: int, default: str = "a special file") -> str:
    kinds = {
        stat.S_IFREG: "a file",
        stat.S_IFDIR: "a directory",
        stat.S_IFIFO: "a FIFO",
        stat.S_IFCHR: "a character device",
    }
    return kinds.get(stat.S_IFMT(mode), default)


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


class _Found(NamedTuple):
    """The last part of a walked path: its directory (an ``O_PATH`` descriptor the caller closes)."""

    dir_fd: int
    dir_path: str
    name: str
    """The entry's name in its directory; ``.`` when the path names the directory itself."""
    path: str
    """The entry as reached (links resolved): what messages name."""
    info: os.stat_result | None
    """The entry's lstat; None when it does not exist (``missing_ok``)."""


def _walk(
    path: str,
    owners: frozenset[int],
    *,
    missing_ok: bool = False,
    create_ok: bool = False,
    writing: bool = False,
) -> _Found:
    """Walk ``path`` from ``/`` one part at a time, checking each directory and link on the way.

    ``missing_ok``: a missing part ends the walk, where the directory that would hold it must be
    writable by no one else, or, with ``create_ok``, may be sticky (the caller creates the part
    itself, exclusively, and walks again).

    ``writing``: the directories above the last part may be anyone's (a service's own, such as
    ``/var/lib/prometheus``); links must still be a trusted user's (see :func:`open_directory`).

    Raises:
        Untrusted: A part above the last fails the rule, is not a directory, changed while
            walked, or (without ``missing_ok``) does not exist; too many links.
    """
    if not path or "\0" in path:
        raise Untrusted(repr(path), "not a path")
    full = path if path.startswith("/") else _join(os.getcwd(), path)
    pending = full.split("/")[::-1]  # the next part is pending[-1]
    root = os.open("/", _DIR_FLAGS)
    stack = [(root, "/")]
    links = 0
    try:
        info = os.fstat(root)
        _check_owner("/", info, owners)
        _check_mode("/", info, owners, above=True)
        while True:
            while pending and pending[-1] in ("", "."):
                pending.pop()
            if not pending:  # the path names a directory already walked (``/``, ``a/..``)
                fd, where = stack[-1]
                return _Found(os.dup(fd), where, ".", where, os.fstat(fd))
            name = pending.pop()
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop()[0])
                continue
            fd, where = stack[-1]
            entry = _join(where, name)
            last = all(p in ("", ".") for p in pending)
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if not missing_ok:
                    raise Missing(entry, "no such file or directory") from None
                # Whoever may write the directory could create the missing entry first.
                _check_mode(where, os.fstat(fd), owners, above=create_ok)
                return _Found(os.dup(fd), where, name, entry, None)
            except NotADirectoryError:
                raise Untrusted(where, "not a directory") from None
            if last or not writing or stat.S_ISLNK(info.st_mode):
                _check_owner(entry, info, owners)
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise Untrusted(entry, f"more than {MAX_LINKS} symbolic links")
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    for opened, _ in stack[1:]:
                        os.close(opened)
                    del stack[1:]
                pending.extend(target.split("/")[::-1])
                continue
            if last:
                return _Found(os.dup(fd), where, name, entry, info)
            if not stat.S_ISDIR(info.st_mode):
                raise Untrusted(entry, f"not a directory ({_kind(info.st_mode)})")
            if not writing:
                _check_mode(entry, info, owners, above=True)
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            stack.append((child, entry))
            if not _same(os.fstat(child), info):
                raise Untrusted(entry, "replaced while it was checked")
    finally:
        for opened, _ in stack:
            os.close(opened)


def _owners(owners: Iterable[int] | None) -> frozenset[int]:
    return trusted_owners() if owners is None else frozenset({0, *owners})


def check_path(
    path: str | os.PathLike[str],
    owners: Iterable[int] | None = None,
    *,
    kind: str | None = None,
    missing_ok: bool = False,
    sticky_ok: bool = False,
    writing: bool = False,
) -> bool:
    """Refuse ``path`` unless it is trusted (see the module docstring); whether it exists.

    Args:
        path: Any path; relative ones are taken from the working directory.
        owners: The uids that may own it (root is always one); default :func:`trusted_owners`.
        kind: ``"file"`` or ``"dir"``: what the last part must be; None for either.
        missing_ok: A path that does not exist (yet) passes when the directory that would hold
            its first missing part is trusted and writable by no one else (not even sticky).
        sticky_ok: The last part may be a sticky directory others may write (``/tmp``: a
            directory provision creates a private entry in); with ``missing_ok``, the directory
            that would hold the first missing part may be sticky too (the caller creates it
            exclusively and checks it again: another user's entry of that name is then refused).
        writing: The path is a directory written into through its descriptor
            (:func:`open_directory` with ``writing``): the directories above it may be anyone's.

    Raises:
        Untrusted: One line naming the first part that fails and its owner.
    """
    trusted = _owners(owners)
    found = _walk(os.fspath(path), trusted, missing_ok=missing_ok, create_ok=sticky_ok, writing=writing)
    try:
        if found.info is None:
            return False
        _check_kind(found.path, found.info, kind)
        _check_mode(found.path, found.info, trusted, above=sticky_ok)
        return True
    finally:
        os.close(found.dir_fd)


def _check_kind(path: str, info: os.stat_result, kind: str | None) -> None:
    if kind == "file" and not stat.S_ISREG(info.st_mode):
        raise NotRegular(path, _kind(info.st_mode))
    if kind == "dir" and not stat.S_ISDIR(info.st_mode):
        raise Untrusted(path, f"not a directory ({_kind(info.st_mode)})")


def open_file(path: str | os.PathLike[str], owners: Iterable[int] | None = None) -> int:
    """A read-only descriptor of the regular file ``path``, once the path is trusted.

    Opened relative to its directory's descriptor with ``O_NOFOLLOW | O_NONBLOCK``, and checked to
    be the very file that was walked; nothing that is not a regular file is opened.

    Raises:
        Missing: A part of the path does not exist.
        NotRegular: The path names a directory, a FIFO, a device or a socket.
        Untrusted: The path fails the rule.
        OSError: Opening failed otherwise (permission).
    """
    trusted = _owners(owners)
    found = _walk(os.fspath(path), trusted)
    try:
        assert found.info is not None  # not missing_ok
        return _open_entry(found.dir_fd, found.name, found.path, found.info, trusted)
    finally:
        os.close(found.dir_fd)


def open_in(dir_fd: int, dir_path: str, name: str, owners: Iterable[int] | None = None) -> int:
    """:func:`open_file` for the entry ``name`` of a directory already opened by :func:`open_directory`
    (``dir_path`` names it in messages): one ``fstatat`` and ``openat`` per file of a large directory.

    Raises:
        Missing, NotRegular, Untrusted, OSError: As :func:`open_file` (a link is followed as
            there, by a walk of its target from ``/``).
    """
    trusted = _owners(owners)
    path = _join(dir_path, name)
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise Missing(path, "no such file or directory") from None
    _check_owner(path, info, trusted)
    if stat.S_ISLNK(info.st_mode):
        return open_file(path, trusted)
    return _open_entry(dir_fd, name, path, info, trusted)


def _open_entry(dir_fd: int, name: str, path: str, info: os.stat_result, owners: frozenset[int]) -> int:
    _check_kind(path, info, "file")
    _check_mode(path, info, owners, above=False)
    fd = os.open(
        name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dir_fd
    )
    if not _same(os.fstat(fd), info):
        os.close(fd)
        raise Untrusted(path, "replaced while it was checked")
    return fd


def open_directory(
    path: str | os.PathLike[str],
    owners: Iterable[int] | None = None,
    *,
    sticky_ok: bool = False,
    writing: bool = False,
) -> int:
    """A descriptor (``O_RDONLY | O_DIRECTORY``) of the directory ``path`` once it is trusted, for
    creating and renaming files in it with ``dir_fd`` (see :func:`check_path` for ``sticky_ok``).

    ``writing``: only the directory itself must pass, not those above it (node exporter's
    ``/var/lib/prometheus/node-exporter`` is root's inside the ``prometheus`` user's directory). A
    file written by ``openat(O_CREAT | O_EXCL | O_NOFOLLOW)`` and ``renameat`` in the descriptor
    reaches that directory whatever is renamed above it afterwards; and since no link an
    untrusted user owns is followed on the way, and the directory reached must be a trusted
    user's, what another user could swap in is only a trusted directory already in their tree.

    Raises:
        Untrusted: As :func:`check_path` with ``kind="dir"``.
    """
    trusted = _owners(owners)
    found = _walk(os.fspath(path), trusted, writing=writing)
    try:
        assert found.info is not None
        _check_kind(found.path, found.info, "dir")
        _check_mode(found.path, found.info, trusted, above=sticky_ok)
        fd = os.open(found.name, _READ_DIR_FLAGS, dir_fd=found.dir_fd)
    finally:
        os.close(found.dir_fd)
    if not _same(os.fstat(fd), found.info):
        os.close(fd)
        raise Untrusted(found.path, "replaced while it was checked")
    return fd


def read_file(path: str | os.PathLike[str], limit: int, owners: Iterable[int] | None = None) -> bytes:
    """At most ``limit`` bytes of the trusted regular file ``path`` (see :func:`open_file`)."""
    fd = open_file(path, owners)
    try:
        data = b""
        while len(data) < limit and (chunk := os.read(fd, limit - len(data))):
            data += chunk
        return data
    finally:
        os.close(fd)


def check_tree(top: str | os.PathLike[str], owners: Iterable[int] | None = None) -> None:
    """Refuse ``top`` unless it and everything below it are trusted.

    ``top`` is walked as :func:`check_path`; each entry below it (directories entered without
    following links) must be owned by a trusted user and writable by no one else, and each link
    must lead to a trusted path; a directory outside ``top`` that a link leads to is checked as a
    tree too (:data:`MAX_TREE_LINK_DEPTH` levels). A dangling link passes when no one else may
    create its target. Entries removed while walked are skipped.

    Raises:
        Untrusted: One line naming the first entry that fails and its owner.
    """
    _tree(os.fspath(top), _owners(owners), set(), 0, None)


VENV_READ_AT_TOP = frozenset({"pyvenv.cfg"})
"""The only regular file at a venv's top that the interpreter reads (PEP 405: ``pyvenv.cfg``, found
beside ``bin/`` at start-up). Other files there are tools' data that Python never imports or runs:
uv's ``.lock`` (mode 0666 when uv made the venv as root with umask 0), ``.gitignore``,
``CACHEDIR.TAG``. The top directory itself and everything under it stay checked, so no one else
can add a file there, and the code Python runs (``bin/``, ``lib*/``) is checked whole."""


def _tree(
    top: str, owners: frozenset[int], seen: set[tuple[int, int]], depth: int, top_files: frozenset[str] | None
) -> None:
    """``top_files``: when given, the only regular files directly in ``top`` that are checked (the
    others are data nothing root runs reads); links and directories there are always checked."""
    found = _walk(top, owners)
    try:
        assert found.info is not None
        _check_mode(found.path, found.info, owners, above=False)
        if not stat.S_ISDIR(found.info.st_mode) or (found.info.st_dev, found.info.st_ino) in seen:
            return
        fd = os.open(found.name, _READ_DIR_FLAGS, dir_fd=found.dir_fd)
    finally:
        os.close(found.dir_fd)
    base = os.path.realpath(found.path)
    outside: list[str] = []
    _entries(fd, found.path, found.info, owners, seen, outside, top_files)
    for target in outside:
        real = os.path.realpath(target)
        if depth < MAX_TREE_LINK_DEPTH and real != base and not real.startswith(base.rstrip("/") + "/"):
            _tree(target, owners, seen, depth + 1, None)


def _entries(
    fd: int,
    where: str,
    info: os.stat_result,
    owners: frozenset[int],
    seen: set[tuple[int, int]],
    outside: list[str],
    top_files: frozenset[str] | None,
) -> None:
    """Check every entry below the open directory ``fd`` (closed here); link targets that are
    directories go to ``outside``; with ``top_files``, regular files directly in ``where`` not
    named there pass unchecked."""
    pending = [(fd, where, info)]
    while pending:
        dfd, dpath, dinfo = pending.pop()
        try:
            if not _same(os.fstat(dfd), dinfo):
                raise Untrusted(dpath, "replaced while it was checked")
            seen.add((dinfo.st_dev, dinfo.st_ino))
            with os.scandir(dfd) as scan:
                entries = list(scan)
            for entry in entries:
                if (
                    top_files is not None
                    and dpath == where
                    and entry.name not in top_files
                    and entry.is_file(follow_symlinks=False)
                ):
                    continue
                sub = _entry(dfd, dpath, entry, owners, outside)
                if sub is not None:
                    pending.append(sub)
        finally:
            os.close(dfd)


def _entry(
    dfd: int, dpath: str, entry: os.DirEntry[str], owners: frozenset[int], outside: list[str]
) -> tuple[int, str, os.stat_result] | None:
    path = _join(dpath, entry.name)
    try:
        info = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None  # removed while walking (a cache file): nothing left to run
    _check_owner(path, info, owners)
    _check_mode(path, info, owners, above=False)
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(entry.name, dir_fd=dfd)
        resolved = target if target.startswith("/") else _join(dpath, target)
        if check_path(resolved, owners, missing_ok=True) and os.path.isdir(resolved):
            outside.append(resolved)
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    try:
        child = os.open(entry.name, _READ_DIR_FLAGS, dir_fd=dfd)
    except FileNotFoundError:
        return None
    return child, path, info


def venv_home(venv: str | os.PathLike[str], owners: Iterable[int] | None = None) -> str | None:
    """The ``home`` of the venv's ``pyvenv.cfg`` (the interpreter's directory, PEP 405), read from
    the trusted file, at most :data:`CONFIG_LIMIT` bytes; None when there is no such line."""
    config = _join(os.fspath(venv), "pyvenv.cfg")
    try:
        text = read_file(config, CONFIG_LIMIT, owners).decode("utf-8", "replace")
    except Missing:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip():
            return value.strip()
    return None


def check_venv(venv: str | os.PathLike[str], owners: Iterable[int] | None = None) -> bool:
    """Refuse a venv (existing or to be created) root would run or fill unless it is trusted;
    whether it exists.

    An existing venv: :func:`check_tree` over it (its ``bin/python`` link's target walked as a
    path), except the data files at its top that the interpreter never reads (uv's ``.lock``; see
    :data:`VENV_READ_AT_TOP`), and the interpreter directory its ``pyvenv.cfg`` names (``home``)
    walked as a path. A venv not created yet: the directory that would hold it must be trusted and
    writable by no one else (:func:`check_path` with ``missing_ok``). The base interpreter's
    standard library is trusted as far as its ``home`` is (``/usr/lib/python3.X`` is the
    distribution's).

    Raises:
        Untrusted: One line naming the first part that fails and its owner.
    """
    trusted = _owners(owners)
    if not check_path(venv, trusted, kind="dir", missing_ok=True):
        return False
    _tree(os.fspath(venv), trusted, set(), 0, VENV_READ_AT_TOP)
    home = venv_home(venv, trusted)
    if home is not None:
        check_path(home, trusted, kind="dir")
    return True


def problem(
    check: str, path: str, owners: Iterable[int] | None = None, *, missing_ok: bool = False
) -> str | None:
    """Why ``path`` fails the ``check`` (``path``, ``file``, ``dir``, ``tree`` or ``venv``); None when
    it passes (a missing path passes only with ``missing_ok``, and ``venv`` always allows it)."""
    try:
        if check == "venv":
            check_venv(path, owners)
        elif check == "tree":
            if missing_ok and not check_path(path, owners, missing_ok=True):
                return None
            check_tree(path, owners)
        else:
            check_path(path, owners, kind=None if check == "path" else check, missing_ok=missing_ok)
    except Untrusted as exc:
        return str(exc)
    except OSError as exc:
        return f"{path}: cannot be checked ({exc.strerror or exc})"
    return None


CHECKS = ("path", "file", "dir", "tree", "venv")


def cli(argv: list[str]) -> int:
    """``CHECK PATH [missing-ok]``: print ``trusted`` or ``untrusted: <reason>``; exit 0 either way
    (2 for a usage error), so that a caller reads the answer, not the status."""
    if len(argv) not in (2, 3) or argv[0] not in CHECKS or argv[2:] not in ([], ["missing-ok"]):
        sys.stderr.write(f"usage: provision_trust.py {{{'|'.join(CHECKS)}}} PATH [missing-ok]\n")
        return 2
    why = problem(argv[0], argv[1], missing_ok=argv[2:] == ["missing-ok"])
    sys.stdout.write("trusted\n" if why is None else f"untrusted: {why}\n")
    return 0


DOCUMENTATION = r"""
module: provision_trust
short_description: Refuse a path that a user other than root or the invoking user could have written
description: provision's trust rule (see the module's docstring), run on the host before root uses the path.
options:
  path:
    description: The path to check.
    type: str
    required: true
  check:
    description: path, file, dir, tree (everything below it too) or venv (its tree and its interpreter).
    type: str
    choices: [path, file, dir, tree, venv]
    default: path
  missing_ok:
    description: A missing path passes when no one else could create it.
    type: bool
    default: false
author: provision
"""


def ansible_main() -> None:
    """The Ansible module: fails with the one line, or returns ``trusted: true`` (never changes)."""
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module: Any = AnsibleModule(
        argument_spec={
            "path": {"type": "str", "required": True},
            "check": {"type": "str", "choices": list(CHECKS), "default": "path"},
            "missing_ok": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    why = problem(params["check"], params["path"], missing_ok=params["missing_ok"])
    if why is not None:
        module.fail_json(
            msg=f"not trusted: {why} (only root or the invoking user may own it or write it: {DOC})"
        )
    module.exit_json(changed=False, trusted=True, invoking_uid=invoking_uid())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(cli(sys.argv[1:]))
    ansible_main()
