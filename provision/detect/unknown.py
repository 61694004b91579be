"""Re-export of :class:`provision.unknown.Unknown` (what an unread fact is) and
:class:`provision.unknown.NotRun`, where the detectors' callers have always imported them."""

from provision.unknown import NotRun as NotRun
from provision.unknown import Unknown as Unknown

__all__ = ["NotRun", "Unknown"]
