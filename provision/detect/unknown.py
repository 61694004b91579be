"""What an unread fact is, in a module of its own so that code which only tests for it
(``isinstance(value, Unknown)``: the components, the package managers) does not load the detectors.
:mod:`provision.detect.fact` and :mod:`provision.detect.facts` re-export it."""

from __future__ import annotations

from pydantic import Field

from provision.models import Frozen


class Unknown(Frozen):
    """A fact that could not be read, with the reason (e.g. ``lspci: not found``)."""

    unknown: str = Field(description="Why the fact is unknown.")


class NotRun(Unknown):
    """A measurement whose program was never started, and what lets it run (verify's GPU program
    when the venv is missing or refused by the trust rule). A check built on it shows :attr:`fix`
    as its hint instead of a guess at a hardware cause that nothing measured."""

    fix: str = Field(description="What to do so that the program runs (one line).")
