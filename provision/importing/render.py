"""An imported spec as YAML, each chosen value's reason in a comment above its key.

Notes on a key the spec does not have (a section left out) go to the header, so that nothing the
import decided is silent.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from provision.importing.draft import has

WIDTH = 100
"""Columns a comment is wrapped at."""


def render(data: Mapping[str, Any], notes: Mapping[str, Sequence[str]], header: Sequence[str]) -> str:
    """The YAML text of ``data``: ``header`` lines, the notes of keys left out, then the mapping with
    each key's notes above it. ``data`` must be plain (dicts, lists, str, int, bool)."""
    tree = _commented(data, notes, "", 0)
    left_out = [n for path, ns in notes.items() if not has(data, path) for n in ns if n]
    lines = [*header, *(["Left out:"] if left_out else []), *(f"- {n}" for n in left_out)]
    tree.yaml_set_start_comment("\n".join(_wrapped(lines)))
    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    text = io.StringIO()
    yaml.dump(tree, text)
    return _spaced(text.getvalue())


def _commented(
    data: Mapping[str, Any], notes: Mapping[str, Sequence[str]], prefix: str, indent: int
) -> CommentedMap:
    node = CommentedMap()
    for key, value in data.items():
        path = f"{prefix}{key}"
        node[key] = _node(value, notes, path, indent)
        said = [n for n in notes.get(path, ()) if n]
        if said:
            node.yaml_set_comment_before_after_key(
                key, before="\n".join(_wrapped(said, indent)), indent=indent
            )
    return node


def _node(value: Any, notes: Mapping[str, Sequence[str]], path: str, indent: int) -> Any:
    """A mapping with its notes; a list of mappings item by item; a list of scalars in flow style
    (``gpus: [0, 1]``)."""
    if isinstance(value, Mapping):
        return _commented(value, notes, f"{path}.", indent + 2)
    if isinstance(value, list):
        seq = CommentedSeq(_node(v, notes, path, indent + 4) if isinstance(v, Mapping) else v for v in value)
        if all(not isinstance(v, Mapping | list) for v in value):
            seq.fa.set_flow_style()
        return seq
    return value


def _wrapped(lines: Sequence[str], indent: int = 0) -> list[str]:
    width = WIDTH - indent - 2
    return [part for line in lines for part in (textwrap.wrap(line, width, subsequent_indent="  ") or [""])]


def _spaced(text: str) -> str:
    """A blank line before each top-level section (a key whose value is a mapping) and before a
    top-level key with comments, the comments kept with their key."""
    lines = text.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        top = not line.startswith((" ", "#", "-"))
        starts = top and (
            line.endswith(":") or (i > 0 and lines[i - 1].startswith("#") and out[-1] != lines[0])
        )
        if starts and out:
            j = len(out)
            while j > 0 and out[j - 1].startswith("#") and i > 0:
                j -= 1
            if j > 0 and out[j - 1] != "":
                out.insert(j, "")
        out.append(line)
    return "\n".join(out) + "\n"
