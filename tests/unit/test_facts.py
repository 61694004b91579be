"""The fact registry: every fact's parser over its data cases, and properties every fact keeps.

Each ``tests/fixtures/facts/<fact id>/<case>.txt`` is a raw probe file (the ``--save-raw``
format; a leading ``#`` line says where it came from: ``# real: ...`` for captures from a real
machine, ``# synthesized: ...`` for outputs written in the tool's documented format) and
``<case>.json`` is the expected parse. Regenerate a missing expectation with
``python -m tests.unit.test_facts`` and read it before committing.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from provision.detect.fact import FactType
from provision.detect.facts import Facts
from provision.detect.registry import BY_ID, EXTRA_FACTS, FACTS, FIELDS, all_probes
from tests.unit.factories import case_files, case_id, expected, jsonable, probe

CASES = Path(__file__).parents[1] / "fixtures" / "facts"
ALL = (*FACTS, *EXTRA_FACTS)


def parse(case: Path) -> Any:
    fact = BY_ID[case.parent.name]
    out = probe(case)
    return jsonable(fact.parse(out.output, out.rc))


@pytest.mark.parametrize("case", case_files(CASES), ids=case_id)
def test_case(case: Path) -> None:
    first = case.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(("# real:", "# synthesized:")), "the first line says where the case comes from"
    assert parse(case) == expected(case)


@pytest.mark.parametrize("fact", ALL, ids=lambda f: f.id)
def test_every_fact_has_a_real_or_documented_case(fact: FactType) -> None:
    assert list((CASES / fact.id).glob("*.txt")), f"add a case under tests/fixtures/facts/{fact.id}/"


def test_case_directories_name_registered_facts() -> None:
    assert {d.name for d in CASES.iterdir() if d.is_dir()} <= set(BY_ID)


def test_probe_ids_are_unique_and_every_probe_runs_once() -> None:
    ids = [f.id for f in ALL] + [a for f in ALL for a in f.aliases]
    assert len(ids) == len(set(ids))
    probes = all_probes("/opt/venv")
    assert [p.id for p in probes] == [f.id for f in FACTS]
    assert {p.id for p in all_probes(None)} == {f.id for f in FACTS if not f.needs_venv}


def test_every_facts_field_is_derived_once() -> None:
    assert set(FIELDS) == set(Facts.model_fields) - {"format_version", "host", "collected_at"}


def test_venv_travels_as_an_argument_never_inside_a_script() -> None:
    venv = "/srv/x'; touch /tmp/pwned; '"
    for p in all_probes(venv):
        embedded = [a for a in p.argv if venv in a and a != venv]
        assert embedded == [], p.id


GARBAGE = ["", "\x00\xff garbage \t\t\n", "Segmentation fault\n" * 3, "a\tb\tc\n", "GPU 0000:\n Fabric\n"]


@pytest.mark.parametrize("fact", ALL, ids=lambda f: f.id)
@pytest.mark.parametrize("output", GARBAGE, ids=range(len(GARBAGE)))
def test_parsers_never_raise(fact: FactType, output: str) -> None:
    for rc in (0, 1, 124, 127, -1):
        fact.parse(output, rc)


@pytest.mark.parametrize("fact", ALL, ids=lambda f: f.id)
def test_parsers_never_raise_or_hang_on_mutated_cases(fact: FactType) -> None:
    """Every case cut, duplicated and byte-flipped: the parser returns (a value or an Unknown) quickly."""
    rng = random.Random(fact.id)
    texts = [probe(c).output for c in (CASES / fact.id).glob("*.txt")]
    for text in texts:
        for _ in range(60):
            mutated = _mutate(rng, text)
            started = time.thread_time()  # this thread's CPU: other processes' load does not count
            fact.parse(mutated, rng.choice((0, 0, 1)))
            assert time.thread_time() - started < 1.0, "parser used over 1 s of CPU"


def _mutate(rng: random.Random, text: str) -> str:
    if not text:
        return "\x00"
    i, j = sorted(rng.randrange(len(text) + 1) for _ in range(2))
    choice = rng.randrange(4)
    if choice == 0:
        return text[:i]
    if choice == 1:
        return text[:i] + text[i:j] * 50 + text[j:]
    if choice == 2:
        return text[:i] + chr(rng.randrange(1, 0x2FF)) + text[i + 1 :]
    return "\n".join(rng.sample(text.splitlines(), k=len(text.splitlines())))


def write_missing_expectations() -> None:
    """Write ``<case>.json`` from the current parse where it is missing; read it before committing."""
    for case in case_files(CASES):
        target = case.with_suffix(".json")
        if not target.exists():
            target.write_text(json.dumps(parse(case), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            print("wrote", target)


if __name__ == "__main__":
    write_missing_expectations()
