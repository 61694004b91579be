"""A reason handed up through layers reads as one clause: ``not observed: no venv given; torch is read
from the spec's python.venv``, never ``not observed (no venv given (torch is read ...))``.

Every composition goes through :func:`provision.unknown.because`; the sweep plans and verifies the
shipped specs against the captures and finds no aside inside an aside in anything they print.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provision.cli import cli
from provision.detect.domains.python import NO_VENV
from provision.unknown import because, flat_reason

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
RAW = ROOT / "tests" / "fixtures" / "raw"
CAPTURES = [
    RAW / "h200-ubuntu2404-2026-12-01",
    RAW / "h200x2-ubuntu2404-spec",
    RAW / "rocky9-dual-a100x-fresh",
]
INPUTS = sorted((ROOT / "tests" / "fixtures" / "verify").glob("*/inputs.json"))


@pytest.mark.parametrize(
    ("reason", "flat"),
    [
        (NO_VENV, "no venv given; torch is read from the spec's python.venv"),
        ("A (B (C))", "A; B; C"),
        ("x (y) (z)", "x; y; z"),
        ("see nvidia-smi(1)", "see nvidia-smi(1)"),  # a manual page, not an aside
        ("lspci (10de:20b8) lists it", "lspci (10de:20b8) lists it"),  # inside the text: one level stays
        ("either (a) or (b)", "either (a) or (b)"),  # an enumeration's last item
        ("unbalanced (b", "unbalanced (b"),
        ("", ""),
    ],
)
def test_a_reasons_trailing_asides_become_clauses(reason: str, flat: str) -> None:
    assert flat_reason(reason) == flat


def test_not_observed_because_no_venv_is_one_clause() -> None:
    assert (
        because("not observed", NO_VENV)
        == "not observed: no venv given; torch is read from the spec's python.venv"
    )


def _asides_nest(text: str) -> bool:
    """An aside (a parenthesis after a space, or opening the text) inside another; ``f(1)`` is none."""
    stack: list[bool] = []
    for i, ch in enumerate(text):
        if ch == "(":
            stack.append(i == 0 or text[i - 1] == " ")
            if sum(stack) >= 2:
                return True
        elif ch == ")" and stack:
            stack.pop()
    return False


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_no_plan_or_verify_text_nests_an_aside_in_an_aside() -> None:
    runs = [["plan", str(s), "--from-raw", str(c), "--json"] for s in SPECS for c in CAPTURES]
    runs += [["verify", str(s), "--inputs", str(i), "--json"] for s in SPECS[:4] for i in INPUTS]
    nested: set[str] = set()
    for args in runs:
        doc = json.loads(CliRunner().invoke(cli, args).stdout)
        nested |= {s for s in _strings(doc) if _asides_nest(s)}
    assert not nested, sorted(nested)
    assert _asides_nest("not observed (no venv given (torch is read from the spec's python.venv))")
