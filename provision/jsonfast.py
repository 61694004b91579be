"""``json.dumps(value, indent=2, default=...)``, byte for byte, at a fraction of its cost.

With ``indent`` the standard library gives up its C encoder for a tree of Python generators, which
took a fifth of a 1000-host ``plan --json`` (issue 31). This writer keeps the standard library's
output exactly (ASCII escapes by its C string encoder, ``int.__repr__``, its float text with NaN and
Infinity, keys of str, int, float, bool or None, ``,`` and ``: `` as separators) and builds one list
of pieces, scalars written inline rather than through a generator each.
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import INFINITY
from json.encoder import encode_basestring_ascii as _string
from typing import Any

Default = Callable[[Any], Any]


def dumps_indented(value: Any, default: Default) -> str:
    """What ``json.dumps(value, indent=2, default=default)`` returns.

    Raises:
        TypeError: A dict key is not a str, int, float, bool or None (as ``json.dumps``); ``default``'s
            own errors pass through.
    """
    parts: list[str] = []
    _value(value, "\n", parts, default)
    return "".join(parts)


def _scalar(value: Any) -> str | None:
    """The text of a JSON scalar as ``json.dumps`` writes it; None for anything else."""
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    return None


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == INFINITY:
        return "Infinity"
    if value == -INFINITY:
        return "-Infinity"
    return float.__repr__(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return _string(key)
    if isinstance(key, float):
        return _string(_float(key))
    if key is True or key is False or key is None:
        return _string({True: "true", False: "false", None: "null"}[key])
    if isinstance(key, int):
        return _string(int.__repr__(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


def _value(value: Any, newline: str, parts: list[str], default: Default) -> None:
    text = _scalar(value)
    if text is not None:
        parts.append(text)
    elif isinstance(value, list | tuple):
        _list(value, newline, parts, default)
    elif isinstance(value, dict):
        _dict(value, newline, parts, default)
    else:
        _value(default(value), newline, parts, default)


def _list(items: list[Any] | tuple[Any, ...], newline: str, parts: list[str], default: Default) -> None:
    if not items:
        parts.append("[]")
        return
    inner = newline + "  "
    separator = "[" + inner
    for item in items:
        parts.append(separator)
        separator = "," + inner
        _item(item, inner, parts, default)
    parts.append(newline + "]")


def _dict(mapping: dict[Any, Any], newline: str, parts: list[str], default: Default) -> None:
    if not mapping:
        parts.append("{}")
        return
    inner = newline + "  "
    separator = "{" + inner
    for key, item in mapping.items():
        parts.append(separator + (_string(key) if type(key) is str else _key(key)) + ": ")
        separator = "," + inner
        _item(item, inner, parts, default)
    parts.append(newline + "}")


def _item(item: Any, newline: str, parts: list[str], default: Default) -> None:
    # The exact types first: nearly every value of a plan is one of these four.
    kind = type(item)
    if kind is str:
        parts.append(_string(item))
    elif kind is dict:
        _dict(item, newline, parts, default)
    elif kind is list:
        _list(item, newline, parts, default)
    elif item is None:
        parts.append("null")
    else:
        _value(item, newline, parts, default)
