"""Memoization by identity, for pure functions a fleet calls with the same objects for every host.

A fleet's hosts share one validated spec, one catalog and, where their outputs were the same, one
parsed fact (:func:`provision.detect.fact.parse_once`). Frozen pydantic models with dict fields are
not hashable, and hashing a whole spec would cost what the call saves, so the cache keys on the
arguments' identities and keeps the arguments themselves alive beside the result (an ``id`` is only
unique while its object lives).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def by_identity(maxsize: int = 64) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Cache a pure function of positional arguments on their identities (at most ``maxsize``
    entries, the oldest dropped first). The result is shared: return only immutable values."""

    def decorate(fn: Callable[..., R]) -> Callable[..., R]:
        cache: dict[tuple[int, ...], tuple[tuple[Any, ...], R]] = {}

        @functools.wraps(fn)
        def cached(*args: Any) -> R:
            key = tuple(map(id, args))
            hit = cache.get(key)
            if hit is not None and all(a is b for a, b in zip(hit[0], args, strict=True)):
                return hit[1]
            value = fn(*args)
            if len(cache) >= maxsize:
                del cache[next(iter(cache))]
            cache[key] = (args, value)
            return value

        return cached

    return decorate
