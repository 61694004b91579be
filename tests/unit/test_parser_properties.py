"""Every fact parser is total: any text and exit status give a value or an Unknown, in bounded work.

One hypothesis property per parser, with a fixed seed and budget so that the suite is
deterministic; texts are built from the parser's own captured cases (cut, repeated, spliced with
odd tokens such as ``inf``, ``-1``, ``٣`` or a very long line) as well as from arbitrary text.
``tests/fuzz/test_fuzz_parsers.py`` runs the same properties with a far larger budget; their speed is
measured by ``benchmarks/bench_parsers.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from provision.detect.fact import FactType
from provision.detect.registry import EXTRA_FACTS, FACTS
from tests.unit.factories import probe

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
ALL = (*FACTS, *EXTRA_FACTS)
EXAMPLES = 60
"""Examples per parser in the suite (the fuzz script runs thousands)."""
CPU_SECONDS = 1.0
"""Most CPU time one parse may use on one input, counted on this thread only (``time.thread_time``):
other processes' load does not add to it, as it does to wall-clock time. It catches what the
property is about, work that explodes with the input (backtracking regexes, quadratic splits: a
parse here takes milliseconds); how fast parsers are is measured in benchmarks/, not here."""

ODD = [
    "inf", "-inf", "nan", "1e999", "-1", "٣", "²", "0x1F", " ", "\t", ":", "::", "|", "[N/A]",
    "N/A", "GPU 00000000:01:00.0", "\x00", "\r", "9" * 400, "a" * 20000, "-" * 5000, "\n" * 50,
]  # fmt: skip
"""Tokens that broke parsers: inf/1e999 (OverflowError), Unicode digits (isdigit vs int), long lines."""


def case_texts(fact: FactType) -> list[str]:
    """The captured outputs of ``fact``'s cases, the examples the strategy mutates."""
    return [probe(c).output for c in sorted((CASES / fact.id).glob("*.txt"))] or [""]


@st.composite
def outputs(draw: st.DrawFn, texts: list[str]) -> str:
    """A captured output, mutated: cut, a span repeated, odd tokens spliced in, lines shuffled."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, len(text)))
        choice = draw(st.integers(0, 4))
        if choice == 0:
            text = text[:i]
        elif choice == 1:
            text = text[:i] + text[i:j] * draw(st.integers(2, 50)) + text[j:]
        elif choice == 2:
            text = text[:i] + draw(st.sampled_from(ODD)) + text[j:]
        elif choice == 3:
            text = text[:i] + draw(st.text(max_size=40)) + text[i:]
        else:
            lines = text.splitlines()
            text = "\n".join(draw(st.permutations(lines))) if len(lines) < 200 else text
    return text


def check_total(fact: FactType, text: str, rc: int) -> None:
    """The property: parse returns (never raises) within :data:`CPU_SECONDS` of this thread's CPU."""
    started = time.thread_time()
    fact.parse(text, rc)
    used = time.thread_time() - started
    assert used < CPU_SECONDS, f"{fact.id} used {used:.2f} s of CPU on one input"


RCS = st.sampled_from((0, 0, 0, 1, 2, 124, 127, -1))


@pytest.mark.parametrize("fact", ALL, ids=lambda f: f.id)
def test_parser_is_total_on_mutated_cases(fact: FactType) -> None:
    @seed(11)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(text=st.one_of(outputs(case_texts(fact)), st.text(max_size=2000)), rc=RCS)
    def prop(text: str, rc: int) -> None:
        check_total(fact, text, rc)

    prop()


FOUND = [
    ("venv", "a" * 20000, 0),
    ("venv", "path /opt/v\n" + "x-" * 10000 + ".dist-info\n", 0),
    ("iommu", "groups:²", 0),
    ("iommu", "groups: " + "9" * 5000, 0),
    ("query-gpu", "index, name, memory.total [MiB]\n0, H200, inf MiB\n", 0),
    ("query-gpu", "index, name, power.draw [W]\n0, H200, 1e999 W\n", 0),
    ("torch", "torch 2.11.0\ncount ²\n", 0),
]
"""Inputs the fuzz run found (crashes and multi-second parses), kept as regressions."""


@pytest.mark.parametrize(
    ("fact_id", "text", "rc"), FOUND, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(FOUND)]
)
def test_inputs_the_fuzzer_found_stay_fixed(fact_id: str, text: str, rc: int) -> None:
    check_total(next(f for f in ALL if f.id == fact_id), text, rc)


def test_nvidia_smi_q_cut_anywhere_parses() -> None:
    fact = next(f for f in ALL if f.id == "nvidia-smi-q")
    text = case_texts(fact)[0]
    for cut in range(0, len(text), max(1, len(text) // 400)):
        check_total(fact, text[:cut], 0)
