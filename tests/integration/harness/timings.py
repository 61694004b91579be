"""Wall-clock figures the harness collects, printed at the end of a pytest session."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

#: label -> every measured duration in seconds.
TIMINGS: dict[str, list[float]] = defaultdict(list)


def record(label: str, seconds: float) -> None:
    """Add one measurement under ``label``."""
    TIMINGS[label].append(seconds)


@contextmanager
def timed(label: str) -> Iterator[None]:
    """Record how long the ``with`` body takes under ``label``."""
    started = time.monotonic()
    try:
        yield
    finally:
        record(label, time.monotonic() - started)


def summary_lines() -> list[str]:
    """One line per label: count, mean and max, in seconds."""
    return [
        f"{label:<60} n={len(values):<3} mean={sum(values) / len(values):7.3f}s max={max(values):7.3f}s"
        for label, values in sorted(TIMINGS.items())
    ]
