"""How long the planner takes: pure, so it should be instant next to detection (~76 ms on the H200).

Plans the real H200 capture and a fresh dual-A100X Ubuntu box, 200 times each after a warm-up,
and prints the median. Not part of the test suite:

    python benchmarks/bench_plan.py
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from provision.catalog import load_catalog
from provision.detect.runner import facts_from_raw
from provision.plan.planner import make_plan
from provision.spec.loader import load_spec
from tests.unit.factories import fresh_ubuntu

ROOT = Path(__file__).resolve().parents[1]


def median_ms(fn: object, runs: int = 200) -> float:
    fn()  # type: ignore[operator]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    catalog = load_catalog()
    h200 = load_spec(ROOT / "specs" / "h200-ubuntu2404.yaml")
    h200_facts = facts_from_raw(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec")
    dual = load_spec(ROOT / "specs" / "dual-a100x.yaml")
    box = fresh_ubuntu()
    print(f"plan h200 (no changes):       {median_ms(lambda: make_plan(h200, h200_facts, catalog)):.2f} ms")
    print(f"plan dual-a100x (fresh box):  {median_ms(lambda: make_plan(dual, box, catalog)):.2f} ms")


if __name__ == "__main__":
    main()
