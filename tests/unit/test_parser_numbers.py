"""Numbers are where parsers break: every number of every captured output, replaced by each hostile
form (5000 digits, ``1.2.3``, ``1e999``, Unicode digits...), parses to a value or an Unknown, and
the whole detection (parse, derive, build Facts) of a real capture so mutated never raises.

Deterministic and exhaustive over the captures' number positions (a sample of them per case),
unlike the random mutations of test_parser_properties.py: a malformed PCIe link speed
(``1.2.3 GT/s``) and a 5000-digit integer are each one of these cases.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from provision.detect.fact import FactType
from provision.detect.raw import ProbeOutput, read_raw
from provision.detect.registry import EXTRA_FACTS, FACTS, facts_from_outputs
from tests.unit.factories import probe

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
CAPTURES = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "raw").glob("h200*"))
ALL = (*FACTS, *EXTRA_FACTS)
NUMBER = re.compile(r"\d+(?:[.:]\d+)*")
HOSTILE = ["9" * 5000, "1.2.3", "1..2", ".", "1e999", "-0", "٣", "²", "0x", "9" * 25, "-9" * 30]
"""What a number may become in a tool's output (or an attacker's)."""
POSITIONS = 12
"""Number positions per case replaced one at a time (spread over the text), besides all at once."""


def mutations(text: str) -> list[str]:
    """``text`` with all its numbers, then each of :data:`POSITIONS` of them, replaced by each form."""
    spans = [m.span() for m in NUMBER.finditer(text)]
    picked = spans[:: max(1, len(spans) // POSITIONS)][:POSITIONS]
    out = [NUMBER.sub(form, text) for form in HOSTILE]
    out += [text[:i] + form + text[j:] for i, j in picked for form in HOSTILE]
    return out


def _cases() -> list[tuple[FactType, Path]]:
    return [(f, case) for f in ALL for case in sorted((CASES / f.id).glob("*.txt"))]


@pytest.mark.parametrize(("fact", "case"), _cases(), ids=lambda v: v.id if hasattr(v, "id") else v.stem)
def test_every_number_of_a_case_may_be_anything(fact: FactType, case: Path) -> None:
    captured = probe(case)
    for text in mutations(captured.output):
        fact.parse(text, captured.rc)  # never raises


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_detection_of_a_capture_with_hostile_numbers_never_raises(capture: Path) -> None:
    outputs = read_raw(capture)
    for probe_id, out in outputs.items():
        for text in mutations(out.output)[: len(HOSTILE) + 4]:
            changed = {**outputs, probe_id: ProbeOutput(command=out.command, output=text, rc=out.rc)}
            facts_from_outputs(changed, host="mutated")  # parse, derive and validate: never raises
