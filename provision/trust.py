"""Who could have written a path: the check made before provision runs a file as root.

Root runs the spec's venv interpreter (verify's GPU load) and creates or fills the venv (apply).
A file that a user other than root could have written, or one under a directory such a user
could change, would let that user run code as root. ``docs/security.md`` lists what runs as root.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def untrusted_reason(path: Path) -> str | None:
    """Why a non-root user could have written ``path``, or None when only root could.

    Checks ``path`` and every directory above it (symlinks resolved first): each must be owned
    by root and writable by neither group nor others, except a sticky directory above (``/tmp``),
    where others cannot replace the root-owned entry below it. Parts that do not exist are
    skipped: the caller reports a missing file.
    """
    target = Path(os.path.realpath(path))
    for part in (target, *target.parents):
        try:
            info = part.lstat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"{part}: cannot be checked ({exc.strerror or exc})"
        if (why := _owner_problem(part, info, sticky_ok=part != target)) is not None:
            return why
    return None


def _owner_problem(part: Path, info: os.stat_result, *, sticky_ok: bool) -> str | None:
    if info.st_uid != 0:
        return f"{part} is owned by uid {info.st_uid}, not root"
    if info.st_mode & _WRITABLE_BY_OTHERS and not (sticky_ok and info.st_mode & stat.S_ISVTX):
        return f"{part} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None
