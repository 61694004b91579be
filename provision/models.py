"""Base classes shared by every pydantic model in the project."""

from __future__ import annotations

from collections.abc import Sequence
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, strict model: unknown keys are errors, instances are hashable values.

    ``defer_build``: pydantic builds a model's validator and serializer when the model is first
    used, not when its module is imported, so a command pays only for the models it uses (start-up
    is most of a command's time; benchmarks/bench_startup.py). Pydantic >= 2.8 defers models.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def accepted_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys a mapping at ``loc`` inside ``model`` accepts (its model's field names), for a "did you
    mean" on an unknown key at ``(*loc, key)``; empty when ``loc`` leads to no model.

    ``loc`` is pydantic's error location less the union tags (a field name, a list index, a dict key).
    """
    types: list[Any] = [model]
    for part in loc:
        types = [inner for tp in types for inner in _step(tp, part)]
    return sorted({name for tp in types for m in _members(tp) if _is_model(m) for name in m.model_fields})


def _members(tp: Any) -> list[Any]:
    """``tp`` as its union's members, ``Annotated`` metadata left out."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _members(get_args(tp)[0])
    if origin is Union or origin is UnionType:
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _step(tp: Any, part: str | int) -> list[Any]:
    """The types one location part further: a model's field, a list's item or a dict's value."""
    found: list[Any] = []
    for member in _members(tp):
        if _is_model(member):
            field = member.model_fields.get(str(part))
            found += [field.annotation] if field is not None else []
        elif get_origin(member) in (list, tuple, dict) and get_args(member):
            found.append(get_args(member)[-1 if get_origin(member) is dict else 0])
    return found
