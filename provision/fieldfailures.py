"""Where the field failures (FF-01 ... FF-16) are documented, for sources a user can open.

Each entry of ``docs/field-failures.md`` has the anchor ``ff-NN``; :func:`ff_ref` builds the
reference that plan findings, verify thresholds and checklist items print.
"""

from __future__ import annotations

FIELD_FAILURES_DOC = "docs/field-failures.md"


def ff_ref(*numbers: int) -> str:
    """``docs/field-failures.md#ff-01`` for ``ff_ref(1)``; several numbers give one link each.

    Raises:
        ValueError: No number, or one outside 1-16.
    """
    if not numbers or any(not 1 <= n <= 16 for n in numbers):
        raise ValueError(f"field failures are FF-01 to FF-16, got {numbers}")
    return ", ".join(f"{FIELD_FAILURES_DOC}#ff-{n:02d}" for n in numbers)
