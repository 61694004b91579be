"""dumps_indented writes what json.dumps(indent=2, default=str) writes, byte for byte."""

from __future__ import annotations

import json
import math
from datetime import date
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provision.jsonfast import dumps_indented


class Colour(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
)
keys = st.one_of(st.text(), st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(keys, inner, max_size=5),
    ),
    max_leaves=40,
)


@given(documents)
@settings(max_examples=150, deadline=None)
def test_any_json_document_is_written_as_the_standard_library_writes_it(value: Any) -> None:
    assert dumps_indented(value, default=str) == json.dumps(value, indent=2, default=str)


@pytest.mark.parametrize(
    "value",
    [
        {"path": Path("/etc/x"), "day": date(2026, 12, 3), "set": {"a"}},
        [Colour.RED, Level.HIGH, {Level.HIGH: Colour.RED}, "\u00e9\u2603\U0001f600", '\x00\n\t"'],
        {"nan": math.nan, "inf": [math.inf, -math.inf], 1.5: 0.1, 10**20: -0.0},
        [[], {}, [[]], {"a": {}}],
    ],
    ids=["default-str", "enums-and-escapes", "floats", "empties"],
)
def test_what_plans_hold_is_written_the_same(value: Any) -> None:
    assert dumps_indented(value, default=str) == json.dumps(value, indent=2, default=str)


def test_a_key_json_cannot_write_is_refused_as_json_refuses_it() -> None:
    with pytest.raises(TypeError, match="keys must be str, int, float, bool or None"):
        dumps_indented({(1, 2): 3}, default=str)
    with pytest.raises(TypeError):
        json.dumps({(1, 2): 3}, indent=2, default=str)
