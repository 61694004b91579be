"""The parser properties of ``tests/unit/test_parser_properties.py`` with a far larger budget.

Skipped unless ``PROVISION_FUZZ`` gives the examples per parser (CI leaves it unset):

    PROVISION_FUZZ=5000 python3 -m pytest tests/fuzz -q -p no:cacheprovider

Each run draws from a new random seed (printed by hypothesis on a failure, to reproduce it).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provision.detect.fact import FactType
from tests.unit.test_parser_properties import ALL, RCS, case_texts, check_total, outputs

BUDGET = int(os.environ.get("PROVISION_FUZZ", "0"))

pytestmark = pytest.mark.skipif(not BUDGET, reason="set PROVISION_FUZZ=<examples per parser> to fuzz")


@pytest.mark.parametrize("fact", ALL, ids=lambda f: f.id)
def test_parser_is_total_under_fuzzing(fact: FactType) -> None:
    @settings(
        max_examples=BUDGET,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(text=st.one_of(outputs(case_texts(fact)), st.text(max_size=20000)), rc=RCS)
    def prop(text: str, rc: int) -> None:
        check_total(fact, text, rc)

    prop()
