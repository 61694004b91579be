"""dpkg's package states (dpkg-query(1): ``${Status}`` is want, error flag and state), read into the
OS-neutral :class:`provision.os.models.Package` fields."""

from __future__ import annotations

from typing import Any

FINISHED = ("installed", "not-installed", "config-files")
"""dpkg states of a package whose last operation ended (dpkg-query(1))."""


def package_state(status: str) -> dict[str, Any]:
    """dpkg's three-word ``status`` (``hold ok half-configured``) -> the neutral Package fields.

    ``installed``: the state is ``installed``; ``held``: the selection is ``hold``; ``unfinished``:
    half-installed, unpacked, triggers pending, or flagged reinstall-required (``reinstreq``). Never
    raises: words it does not know read as not installed, not held, finished.
    """
    words = status.split()
    state = words[-1] if words else ""
    return {
        "installed": status.endswith(" installed"),
        "held": bool(words) and words[0] == "hold",
        "unfinished": bool(words) and (state not in FINISHED or (len(words) > 1 and words[1] == "reinstreq")),
        "state": status,
    }
