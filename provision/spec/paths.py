"""The spec's path rules as plain functions (stdlib only).

:mod:`provision.spec.models` applies them as validators. A live ``plan`` or ``detect`` also applies
the venv rule to the spec's YAML before the models are loaded
(:func:`provision.spec.document.declared_venv`), so that the venv probes start while pydantic builds
the spec's validator instead of after it (:mod:`provision.detect.early`; they only read files).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

VENV_ROOTS = ("/opt", "/srv")
"""Where ``provision import`` looks for a machine's venvs: the directories root-made venvs go in
(Filesystem Hierarchy Standard 3.0: /opt add-on software, /srv site data). A spec's venv may lie
elsewhere too (:func:`venv_path`)."""

SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/tmp",
    "/usr",
    "/var",
)
"""Trees a venv may not lie in: the operating system's own (its programs, libraries, configuration,
kernel interfaces and managed state: ``python -m venv`` there would write ``bin/python`` over the
system's) and the shared temporary directories (``/tmp``, ``/var/tmp``, ``/dev/shm``: any user may
create the venv's name there first). ``/var/opt``, the variable data of ``/opt`` software, is the
one place under them that is allowed.

Source: Filesystem Hierarchy Standard 3.0, chapters 3 (the root filesystem), 4 (/usr) and 5 (/var).
"""
SYSTEM_EXCEPTIONS = ("/var/opt",)
"""Directories under :data:`SYSTEM_TREES` a venv may lie in (FHS 3.0, section 5.12: /var/opt)."""


def absolute_path(value: str) -> str:
    """``value`` normalized as a POSIX path (``/opt//x/`` -> ``/opt/x``).

    Raises:
        ValueError: Relative, holds ``..``, or a character other than letters, digits and ``._/+-``.
    """
    path = PurePosixPath(value)
    if not path.is_absolute() or ".." in path.parts:
        raise ValueError("must be an absolute path without '..'")
    if not re.fullmatch(r"[A-Za-z0-9._/+-]+", value):
        raise ValueError("may only contain letters, digits and . _ / + -")
    return str(path)


def venv_path(value: str) -> str:
    """``value`` unchanged unless it is a system or shared directory (or in one), ``/``, a directory
    at the top of the tree (``/opt``, ``/home``) or a home directory itself (``/home/me``, ``/root``).

    Where the venv may go otherwise (``/opt/torch``, ``/srv/ml/env``, ``/home/me/venv``) is decided
    when it is used: apply creates or fills it and verify runs it only when the trust rule accepts
    it (owned by root or the invoking user, writable by no one else: docs/security.md).

    Raises:
        ValueError: A system or shared directory (root creates the venv and runs its python and pip:
            under /usr or /etc that would overwrite the OS, under /tmp it could be another user's).
    """
    path = PurePosixPath(value)
    inside = [t for t in SYSTEM_TREES if path == PurePosixPath(t) or PurePosixPath(t) in path.parents]
    allowed = any(PurePosixPath(e) == path or PurePosixPath(e) in path.parents for e in SYSTEM_EXCEPTIONS)
    home = len(path.parts) == 3 and path.parts[1] == "home"
    if (inside and not allowed) or len(path.parts) < 3 or home:
        raise ValueError(
            "must be a directory of its own, e.g. /opt/torch or /home/you/venv (system and shared "
            "directories, /tmp, top-level directories and home directories themselves are refused)"
        )
    return value


__all__ = ["SYSTEM_TREES", "VENV_ROOTS", "absolute_path", "venv_path"]
