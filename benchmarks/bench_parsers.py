"""How long each fact parser takes: on its captured cases, and on the worst of its mutated cases.

The unit tests only bound the work of one parse (tests/unit/test_parser_properties.py, CPU time of
the test's thread); speed is measured here. For every fact of the registry: the median over its
cases of one parse (microseconds), and the slowest parse of 200 mutated outputs (the property
test's own strategy: cut, repeated, odd tokens, shuffled lines). Not part of the test suite:

    python benchmarks/bench_parsers.py [--mutations N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from provision.detect.fact import FactType
from tests.unit.test_facts import _mutate
from tests.unit.test_parser_properties import ALL, case_texts


def _micros(fact: FactType, text: str, runs: int = 50) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fact.parse(text, 0)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=int, default=200)
    args = parser.parse_args()
    print(f"{'fact':24} {'cases':>5} {'median us':>10} {'worst mutated us':>17}")
    for fact in ALL:
        texts = case_texts(fact)
        median = statistics.median(_micros(fact, t) for t in texts)
        rng = random.Random(fact.id)
        worst = max(_micros(fact, _mutate(rng, rng.choice(texts)), runs=3) for _ in range(args.mutations))
        print(f"{fact.id:24} {len(texts):5} {median:10.1f} {worst:17.1f}")


if __name__ == "__main__":
    main()
