"""Concurrent vs sequential collector runs over sleep-based fake probes.

Latencies are the medians measured on the H200 machine
(``docs/device-runs/h200-measurements.md#probes``); torch is the light probe (one python
start, 81 ms), not the 4 s import. Run either way, not part of the test suite:

    python benchmarks/bench_detect.py
    python -m pytest benchmarks/bench_detect.py --benchmark-enable
"""

from __future__ import annotations

import time
from typing import Any

from provision.detect import collector

LATENCY_MS = {
    "driver-version": 2,
    "os-release": 2,
    "uname": 2,
    "proc-version": 2,
    "modinfo": 3,
    "query-gpu": 26,
    "topo-m": 50,
    "dpkg-nvidia": 9,
    "nvcc": 3,
    "cuda-dirs": 3,
    "venv": 3,
    "torch": 81,
}
"""Median ms per probe on the H200 (docs/device-runs/h200-measurements.md#probes; unlisted cat/ls-like
probes taken as 2-3 ms)."""


def fake_probes() -> list[dict[str, Any]]:
    """One ``sleep`` per probe, with its measured latency."""
    return [
        {"id": pid, "argv": ["sleep", f"{ms / 1000:.3f}"], "timeout": 10} for pid, ms in LATENCY_MS.items()
    ]


def run_concurrent() -> dict[str, dict[str, Any]]:
    return collector.collect(fake_probes())


def run_sequential() -> dict[str, dict[str, Any]]:
    return collector.collect(fake_probes(), workers=1)


def test_bench_concurrent(benchmark: Any) -> None:
    benchmark(run_concurrent)


def test_bench_sequential(benchmark: Any) -> None:
    benchmark(run_sequential)


def _median_ms(func: Any, rounds: int = 5) -> float:
    func()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        func()
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)[rounds // 2]


if __name__ == "__main__":
    concurrent, sequential = _median_ms(run_concurrent), _median_ms(run_sequential)
    print(
        f"{len(LATENCY_MS)} probes, sum of latencies {sum(LATENCY_MS.values())} ms, "
        f"slowest {max(LATENCY_MS.values())} ms"
    )
    print(f"concurrent: {concurrent:.0f} ms (median of 5)")
    print(f"sequential: {sequential:.0f} ms (median of 5)")
