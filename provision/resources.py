"""Locate the playbooks, templates, example specs and documents shipped with the package.

A wheel carries them under ``provision/_data/`` (see ``force-include`` in
pyproject.toml; ``docs/`` too, so that a printed source such as
``docs/field-failures.md#ff-01`` can be opened from an installed wheel); an editable
install or a source checkout reads them from the repository's top level, where they
are maintained.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory holding shipped data ``name``.

    Args:
        name: One of ``"playbooks"``, ``"templates"``, ``"specs"`` or ``"docs"``.

    Returns:
        An existing directory path.

    Raises:
        FileNotFoundError: If neither the wheel nor the checkout layout has it.
    """
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"shipped data directory {name!r} not found next to {_PACKAGE_DIR}")
