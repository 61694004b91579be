"""One exception tree for every error the user should see as a single line.

The CLI catches :class:`ProvisionError` only; anything else keeps its traceback
because it is a bug. Each class carries the process exit code documented in
README.md ("Exit codes").
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pydantic import ValidationError


class ProvisionError(Exception):
    """Base of every user-facing error. ``str(err)`` is the one line printed."""

    exit_code: int = 1


class SpecError(ProvisionError):
    """The spec file is missing, is not valid YAML, or fails validation.

    Attributes:
        problems: One ``file:line:column: field.path: message`` line per problem.
    """

    exit_code = 2

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else problems
        super().__init__("\n".join(self.problems))


class CatalogError(ProvisionError):
    """The shipped compatibility catalog failed to load or validate (a packaging bug)."""


class RefusedError(ProvisionError):
    """The planner refused the spec on these facts; the message names rule and source."""


class FactsError(ProvisionError):
    """Saved facts (``detect --json``) or a raw probe directory could not be read."""


class DriftError(ProvisionError):
    """A saved plan no longer matches the machine: its facts changed since planning."""


class ApplyError(ProvisionError):
    """Ansible ran but the run failed; the message names the failed task and host."""


def first_error(exc: ValidationError) -> str:
    """``field.path: message`` of pydantic's first error, and how many more there are (one line for
    a user: never pydantic's own multi-line text with its model class names)."""
    errors = exc.errors()
    if not errors:
        return str(exc).splitlines()[0]
    where = ".".join(str(p) for p in errors[0]["loc"])
    more = f"; {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{where + ': ' if where else ''}{errors[0]['msg']}{more}"


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``; did you mean 'x'?`` naming the closest of ``known`` to ``word`` (difflib's ratio of at
    least 0.6, its default), or an empty string when none is close: a typo, not a different name."""
    close = difflib.get_close_matches(word, [str(k) for k in known], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def name_list(names: Sequence[str], most: int = 8) -> str:
    """``a, b, c`` for a message, the first ``most`` names and ``(and N more)`` after them: one
    line even for an inventory of a thousand hosts."""
    shown = ", ".join(names[:most]) or "none"
    return f"{shown} (and {len(names) - most} more)" if len(names) > most else shown


class UntrustedError(ProvisionError):
    """A path the trust rule refuses (:mod:`provision.trust`): nothing was read from it, run or written."""


class Interrupted(ProvisionError):
    """Ctrl-C stopped the command; an Ansible run it started ended ``canceled`` (every process of
    it ended). Exit 130, as a shell reports SIGINT (README, "Exit codes").

    ``left_running``: processes of the run that could not be ended (``pid <n>: <command line>``,
    :attr:`provision.ansible.PlayResult.left_running`); the message names them when there are any.
    """

    exit_code = 130

    def __init__(self, message: str | None = None, left_running: Sequence[str] = ()) -> None:
        self.left_running = tuple(left_running)
        if message is None:
            message = "Ctrl-C stopped the run; " + (
                f"still running, could not be ended: {'; '.join(self.left_running)}"
                if self.left_running
                else "nothing of it is left running"
            )
        super().__init__(message)
