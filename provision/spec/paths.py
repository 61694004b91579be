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
"""Directories a venv may be created under: root-owned and never part of the OS.

Source: Filesystem Hierarchy Standard 3.0, sections /opt (add-on software) and /srv (site data).
"""


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
    """``value`` unchanged when it lies under one of :data:`VENV_ROOTS`.

    Raises:
        ValueError: Anywhere else (root creates the venv and runs its python and pip: under /usr,
            /etc or /tmp that would overwrite the OS or run what another user planted;
            docs/security.md).
    """
    parent = str(PurePosixPath(value).parent)
    if not any(parent == root or parent.startswith(root + "/") for root in VENV_ROOTS):
        roots = " or ".join(f"{root}/" for root in VENV_ROOTS)
        raise ValueError(f"must be a directory under {roots} (system and shared directories are refused)")
    return value


__all__ = ["VENV_ROOTS", "absolute_path", "venv_path"]
