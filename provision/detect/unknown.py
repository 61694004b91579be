"""Re-export of :class:`provision.unknown.Unknown` (what an unread fact is), where the detectors'
callers have always imported it."""

from provision.unknown import Unknown as Unknown

__all__ = ["Unknown"]
