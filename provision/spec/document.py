"""Read a spec file into its YAML tree, before and apart from validation (no pydantic import).

:func:`provision.spec.loader.load_spec` validates what this reads. A live ``plan`` reads the
document first, starts the venv probes on the venv it names (:func:`declared_venv`) and then
validates, so that the probes run while the spec's models load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from provision.errors import SpecError
from provision.files import Location, key_position, parse_yaml, read_text
from provision.spec.paths import absolute_path, venv_path


def read_spec_document(path: Path) -> CommentedMap:
    """The spec at ``path`` as ruamel's round-trip tree (every key's line and column kept), not
    validated.

    Raises:
        SpecError: As :func:`load_spec`, for the problems found before validating.
    """
    text = read_text(path, what="spec", error=SpecError)
    data = parse_yaml(text, path, error=SpecError, typ="rt")
    if not isinstance(data, CommentedMap):
        raise SpecError([f"{path}:1:1: the spec must be a YAML mapping (key: value), not {_kind(data)}"])
    if (where := _non_string_key(data)) is not None:
        key, (line, col) = where
        raise SpecError([f"{path}:{line}:{col}: key {key!r} is not a name (spec keys are words)"])
    return data


def _kind(data: Any) -> str:
    if data is None:
        return "an empty document"
    if isinstance(data, CommentedSeq):
        return "a list"
    return f"a single value ({type(data).__name__})"


def _non_string_key(node: Any) -> tuple[Any, Location] | None:
    """The first mapping key that is not a string (``1:``, ``[a, b]:``), with its position."""
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            if not isinstance(key, str):
                return key, key_position(node, key)
            if (found := _non_string_key(value)) is not None:
                return found
    if isinstance(node, CommentedSeq):
        return next((found for v in node if (found := _non_string_key(v)) is not None), None)
    return None


def declared_venv(document: Any) -> str | None:
    """``python.venv`` of a spec document (any value), as the spec model would hold it; None when the
    document names none or the value breaks the spec's path rules (:mod:`provision.spec.paths`;
    validation then says so). Never raises."""
    python = document.get("python") if isinstance(document, dict) else None
    value = python.get("venv") if isinstance(python, dict) else None
    if not isinstance(value, str):
        return None
    try:
        return venv_path(absolute_path(value))
    except ValueError:
        return None


__all__ = ["declared_venv", "read_spec_document"]
