"""Unknown: the value of a fact that could not be read, with the reason.

In a module of its own (re-exported by facts.py) so that every module defining fact models
can use it without importing facts.py.
"""

from __future__ import annotations

from pydantic import Field

from provision.models import Frozen


class Unknown(Frozen):
    """A fact that could not be read, with the reason (e.g. ``lspci: not found``)."""

    unknown: str = Field(description="Why the fact is unknown.")
