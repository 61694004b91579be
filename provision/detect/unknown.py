"""Re-export of :class:`provision.unknown.Unknown` (what an unread fact is), where the detectors'
callers have always imported it, and :class:`NotRun`, verify's measurement that never started."""

from __future__ import annotations

from pydantic import Field

from provision.unknown import Unknown as Unknown

__all__ = ["NotRun", "Unknown"]


class NotRun(Unknown):
    """A measurement whose program was never started, and what lets it run (verify's GPU program
    when the venv is missing or refused by the trust rule). A check built on it shows :attr:`fix`
    as its hint instead of a guess at a hardware cause that nothing measured."""

    fix: str = Field(description="What to do so that the program runs (one line).")
