"""Files users keep from earlier versions still load and mean the same: saved facts and verify inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.detect.facts import Facts, Unknown
from provision.detect.runner import facts_from_raw
from provision.verify.runs import VerifyInputs

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.mark.parametrize("capture", ["h200-ubuntu2404-spec", "h200x2-ubuntu2404-spec"])
def test_facts_saved_by_0_1_load_equal_and_keep_their_fingerprint(capture: str) -> None:
    saved = Facts.model_validate_json((FIXTURES / "saved" / f"facts-{capture}-v0.1.json").read_text())
    fresh = facts_from_raw(FIXTURES / "raw" / capture)
    assert saved == fresh
    # A plan saved with `plan --out` before the registry is not refused as stale for that alone.
    assert saved.fingerprint() == fresh.fingerprint()


@pytest.mark.parametrize("run", ["h200-ubuntu2404", "h200x2-ubuntu2404"])
def test_verify_inputs_saved_by_0_1_load_and_read_the_same_fabric(run: str) -> None:
    inputs = VerifyInputs.model_validate_json((FIXTURES / "verify" / run / "inputs.json").read_text())
    states = inputs.fabric_states()
    assert not isinstance(states, Unknown) and states
    if not isinstance(inputs.fabric, Unknown):
        assert states == inputs.fabric
