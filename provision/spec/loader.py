"""Load a spec file with line-aware errors.

ruamel.yaml's round-trip loader keeps the line and column of every mapping key
and sequence item, so a pydantic error location (``driver.branch``) can be
printed as ``specs/x.yaml:7:11: driver.branch: ...``, the way compilers do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from provision.errors import SpecError
from provision.files import parse_yaml, read_text
from provision.serving.modelconfig import parse_config_json
from provision.spec.models import Spec

Location = tuple[int, int]  # 1-based line, 1-based column


def load_spec(path: Path) -> Spec:
    """Read and validate the spec at ``path``.

    Raises:
        SpecError: File missing, unreadable or not a regular file (see :mod:`provision.files`),
            YAML malformed (duplicate keys, unknown tags, alias bombs, deep nesting), a key
            that is not a name, or validation failed; one ``file:line:column: field: message``
            line per problem.
    """
    data = _read_yaml(path)
    try:
        spec = Spec.model_validate(_plain(data))
    except ValidationError as exc:
        raise SpecError([_format_error(path, data, err) for err in exc.errors()]) from None
    return _with_model_architecture(path, data, spec)


def _with_model_architecture(path: Path, data: Any, spec: Spec) -> Spec:
    """``spec`` with ``serve.architecture`` read from the model's config.json when the spec names one.

    Raises:
        SpecError: The config.json is missing, unreadable or not a model configuration this arithmetic
            reads; located at ``serve.model`` or ``serve.config_json``.
    """
    serve = spec.serve
    config = serve.config_path() if serve is not None else None
    if serve is None or config is None:
        return spec
    key = "config_json" if serve.config_json else "model"
    line, col = _locate(data, ("serve", key))
    try:
        text = read_text(Path(config), what="model config.json", error=SpecError)
    except SpecError as exc:
        raise SpecError(f"{path}:{line}:{col}: serve.{key}: {exc}") from None
    arch = parse_config_json(text, config)
    if isinstance(arch, str):
        raise SpecError(f"{path}:{line}:{col}: serve.{key}: {arch}")
    return spec.model_copy(
        update={"serve": serve.model_copy(update={"architecture": arch, "config_json": None})}
    )


def _read_yaml(path: Path) -> Any:
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
                return key, _key_position(node, key)
            if (found := _non_string_key(value)) is not None:
                return found
    if isinstance(node, CommentedSeq):
        return next((found for v in node if (found := _non_string_key(v)) is not None), None)
    return None


def _plain(node: Any) -> Any:
    """Convert ruamel's round-trip containers to dicts and lists for pydantic."""
    if isinstance(node, CommentedMap):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, CommentedSeq):
        return [_plain(v) for v in node]
    if hasattr(node, "value") and type(node).__module__.startswith("ruamel"):
        return node.value if not isinstance(node, str) else str(node)
    return node


def _format_error(path: Path, data: Any, err: Any) -> str:
    loc = tuple(part for part in err["loc"] if not _is_union_tag(part))
    line, col = _locate(data, loc)
    field = ".".join(str(p) for p in loc) or "(top level)"
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key (not part of spec v1; see `provision schema`)"
    return f"{path}:{line}:{col}: {field}: {message}"


def _is_union_tag(part: Any) -> bool:
    # pydantic inserts the union member's type name into locations (e.g. 'function-plain[...]').
    return isinstance(part, str) and ("[" in part or part in {"str", "int", "float", "bool"})


def _locate(data: Any, loc: tuple[Any, ...]) -> Location:
    """Line and column of the deepest node of ``loc`` that exists in the YAML."""
    node, best = data, (1, 1)
    for part in loc:
        if isinstance(node, CommentedMap) and part in node:
            best = _key_position(node, part)
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
            line, col = node.lc.item(part)
            best, node = (line + 1, col + 1), node[part]
        else:
            if isinstance(node, (CommentedMap, CommentedSeq)) and best == (1, 1):
                best = (node.lc.line + 1, node.lc.col + 1)
            break
    return best


def _key_position(node: CommentedMap, key: Any) -> Location:
    line, col = node.lc.key(key)
    return line + 1, col + 1
