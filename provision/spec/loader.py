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

from provision.errors import SpecError, did_you_mean
from provision.files import locate, plain_data, read_text
from provision.models import accepted_keys
from provision.serving.modelconfig import parse_config_json
from provision.spec.document import read_spec_document
from provision.spec.models import Spec


def load_spec(path: Path) -> Spec:
    """Read and validate the spec at ``path``.

    Raises:
        SpecError: File missing, unreadable or not a regular file (see :mod:`provision.files`),
            YAML malformed (duplicate keys, unknown tags, alias bombs, deep nesting), a key
            that is not a name, or validation failed; one ``file:line:column: field: message``
            line per problem.
    """
    return spec_from_document(path, read_spec_document(path))


def spec_from_document(path: Path, data: Any) -> Spec:
    """Validate ``data``, the spec document :func:`read_spec_document` read from ``path``.

    Raises:
        SpecError: As :func:`load_spec`, for the problems found after reading.
    """
    try:
        spec = Spec.model_validate(plain_data(data))
    except ValidationError as exc:
        errors = exc.errors()
        raise SpecError([_format_error(path, data, err, errors) for err in errors]) from None
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
    line, col = locate(data, ("serve", key))
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


def _format_error(path: Path, data: Any, err: Any, errors: list[Any]) -> str:
    loc = _plain_loc(err)
    line, col = locate(data, loc)
    field = ".".join(str(p) for p in loc) or "(top level)"
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        hint = _unknown_key_hint(data, loc, errors) if loc else ""
        message = f"unknown key (not part of spec v1; see `provision schema`){hint}"
    quotes = err["type"] == "string_type" or message.startswith("write the version in quotes")
    if quotes and (written := _number_as_written(data, loc)) is not None:
        message = f'write it in quotes, "{written}": YAML reads an unquoted {written} as a number'
    return f"{path}:{line}:{col}: {field}: {message}"


def _plain_loc(err: Any) -> tuple[Any, ...]:
    return tuple(part for part in err["loc"] if not _is_union_tag(part))


def _unknown_key_hint(data: Any, loc: tuple[Any, ...], errors: list[Any]) -> str:
    """The "did you mean" for the unknown key at ``loc``: the closest required key missing beside it
    (``gpuz:`` is ``gpus``, which is missing, not the optional ``gpu``), else the closest key its
    mapping accepts and does not already have; empty when none is close.
    """
    parent, word = loc[:-1], str(loc[-1])
    missing = [
        str(p[-1]) for e in errors if e["type"] == "missing" and (p := _plain_loc(e))[:-1] == parent and p
    ]
    present = {str(k) for k in _mapping_at(data, parent)}
    absent = [k for k in accepted_keys(Spec, parent) if k not in present]
    return did_you_mean(word, missing) or did_you_mean(word, absent)


def _mapping_at(data: Any, loc: tuple[Any, ...]) -> dict[Any, Any]:
    """The mapping at ``loc`` in the document (empty when there is none there)."""
    node = data
    for part in loc:
        in_map = isinstance(node, dict) and part in node
        in_seq = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if not (in_map or in_seq):
            return {}
        node = node[part]
    return node if isinstance(node, dict) else {}


def _number_as_written(data: Any, loc: tuple[Any, ...]) -> str | None:
    """The number at ``loc`` as the file writes it (``13.10``, not ``13.1``), or None for anything else.

    YAML reads an unquoted ``24.04`` as a float, so a version field gets a number; the round-trip
    loader keeps the scalar's written form, which dumping it alone gives back.
    """
    import io

    from ruamel.yaml import YAML

    node = data
    for part in loc:
        in_map = isinstance(node, CommentedMap) and part in node
        in_seq = isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node)
        if not (in_map or in_seq):
            return None
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    text = io.StringIO()
    YAML(typ="rt").dump(node, text)
    return text.getvalue().splitlines()[0]


def _is_union_tag(part: Any) -> bool:
    # pydantic inserts the union member's type name into locations (e.g. 'function-plain[...]').
    return isinstance(part, str) and ("[" in part or part in {"str", "int", "float", "bool"})
