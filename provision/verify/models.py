"""Typed results of ``provision verify``: one :class:`CheckResult` per check, and the report.

A check result carries what was measured (value and unit), the threshold it was held to, where
that threshold comes from (a catalog row of ``verify.yaml``, a spec override, or a derived
formula, each named) and, when it did not pass, a hint. The report round-trips through JSON
(``provision verify --json``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from provision.models import Frozen

Status = Literal["pass", "warn", "fail", "skip"]
"""pass: as required; warn: works but below the recommendation; fail: not as required; skip: not applicable
or not measurable here (the reason says which)."""

Op = Literal[">=", "<=", "==", "in", "all"]


class Measured(Frozen):
    """A measured value: a number with its unit, or a text such as a version."""

    value: float | str | None
    unit: str = ""

    def __str__(self) -> str:
        if self.value is None:
            return "-"
        text = f"{self.value:.4g}" if isinstance(self.value, float) else str(self.value)
        return f"{text} {self.unit}".strip()


class Threshold(Frozen):
    """What a check requires: ``op value unit`` and the named source of the value.

    Attributes:
        source: ``spec verify.min_h2d_gbps``,
            ``verify.yaml h200-sxm.min_h2d_gbps (docs/device-runs/verify.txt)`` or
            ``derived: 0.80 x PCIe Gen5 x16 (63.0 GB/s, 128b/130b)``.
    """

    op: Op
    value: float | str
    unit: str = ""
    source: str

    def __str__(self) -> str:
        text = f"{self.value:.4g}" if isinstance(self.value, float) else str(self.value)
        return f"{self.op} {text} {self.unit}".strip()


class CheckResult(Frozen):
    """The outcome of one check on one subject (a GPU, a GPU pair, or the machine).

    Attributes:
        id: Stable check id, e.g. ``pcie-h2d``; with ``subject`` it is unique in a report.
        subject: ``gpu0``, ``gpu0-gpu1`` or ``""`` for machine-wide checks.
        detail: What was seen, in one line (also the reason of a skip).
        hint: What to do when the check did not pass; None on pass.
    """

    id: str
    subject: str = ""
    title: str
    status: Status
    measured: Measured | None = None
    threshold: Threshold | None = None
    detail: str = ""
    hint: str | None = None

    @property
    def name(self) -> str:
        """``pcie-h2d[gpu0]``: the id with its subject, as tables and JUnit show it."""
        return f"{self.id}[{self.subject}]" if self.subject else self.id


class Report(Frozen):
    """Every check result of one verify run, in the order the checks ran."""

    host: str = "localhost"
    spec: str
    started_at: datetime | None = None
    seconds: float = Field(0.0, description="Wall time of the whole verify, seconds.")
    results: tuple[CheckResult, ...]

    @property
    def failed(self) -> bool:
        """Whether any check failed (the exit code is 1 then)."""
        return any(r.status == "fail" for r in self.results)

    def counts(self) -> dict[str, int]:
        """Results per status, e.g. ``{"pass": 20, "warn": 1, "fail": 0, "skip": 6}``."""
        return {s: sum(r.status == s for r in self.results) for s in ("pass", "warn", "fail", "skip")}
