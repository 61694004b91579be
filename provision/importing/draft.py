"""A spec being imported: its values in the spec's key order, why each was chosen, and the choices
the facts leave open.

Paths are dotted spec fields (``driver.source``); a value of :data:`DROP` removes the key (a
section or an optional field left out). Notes on a path the final spec does not have (a section
left out) are printed in the file's header instead (:mod:`provision.importing.render`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from provision.errors import ProvisionError


class NotImportable(ProvisionError):
    """The facts cannot describe a spec (no OS read, no GPU seen, a GPU the catalog does not know)."""


DROP: Any = object()
"""An update that removes the key."""


@dataclass(frozen=True)
class Option:
    """One value a choice may take.

    Attributes:
        updates: Dotted path -> value (or :data:`DROP`) this option writes.
        note: Why this value, attached to the choice's field when it is chosen.
    """

    updates: Mapping[str, Any]
    note: str


@dataclass(frozen=True)
class Choice:
    """A field the facts leave open, with its options in the evidence's order (the first is what the
    facts point at; a later one is taken only when its plan changes less).

    Attributes:
        late: Decided after the others, for a field whose plan depends on every other one (the holds:
            the pins provision writes name the spec's versions).
    """

    field: str
    options: tuple[Option, ...]
    late: bool = False


@dataclass
class Draft:
    """The spec's mapping being built, the notes per path, and the open choices."""

    data: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    choices: list[Choice] = field(default_factory=list)

    def put(self, path: str, value: Any, note: str | None = None) -> None:
        """Set ``path`` (creating its sections) and note why."""
        self.data = updated(self.data, {path: value})
        if note:
            self.note(path, note)

    def note(self, path: str, text: str) -> None:
        """Say why ``path`` has its value, or why it is left out."""
        self.notes.setdefault(path, []).append(text)

    def choose(self, path: str, *options: Option, late: bool = False) -> None:
        """Leave ``path`` to :func:`provision.importing.settle.settle` among ``options``."""
        self.choices.append(Choice(path, options, late))


def updated(data: Mapping[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``data`` with ``updates`` applied (an existing key keeps its position)."""
    out = copy.deepcopy(dict(data))
    for path, value in updates.items():
        *sections, key = path.split(".")
        node = out
        for name in sections:
            node = node.setdefault(name, {})
        if value is DROP:
            node.pop(key, None)
        else:
            node[key] = value
    return out


def has(data: Mapping[str, Any], path: str) -> bool:
    """Whether ``path`` is in ``data``."""
    node: Any = data
    for name in path.split("."):
        if not isinstance(node, Mapping) or name not in node:
            return False
        node = node[name]
    return True
