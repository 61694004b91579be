"""Which machine a host is: its systemd machine ID, so that one machine named twice in an inventory
(two ``ansible_connection=local`` entries, a hostname and its IP) is seen as one.

Source: machine-id(5), https://www.freedesktop.org/software/systemd/man/latest/machine-id.html:
``/etc/machine-id`` holds "a single newline-terminated, hexadecimal, 32-character, lowercase ID",
never all zeros; it reads ``uninitialized`` while the first boot has not completed; the D-Bus file
``/var/lib/dbus/machine-id`` has the same format (often a link to the former) and is read when
``/etc/machine-id`` gives none. The ID "should be considered confidential" and, where an
application needs a stable identifier of the machine, "hashed with a cryptographic, keyed hash
function, using a fixed, application-specific key" (the same page): the fact keeps that hash
(HMAC-SHA256, RFC 2104) to compare hosts by, and the first :data:`SHORT` hex characters to name
the machine to a person; the whole ID is in no Facts document.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

from pydantic import Field

from provision.detect.fact import Derive, Fact, Unknown, failure, if_probed
from provision.models import Frozen

SOURCE = "machine-id(5), https://www.freedesktop.org/software/systemd/man/latest/machine-id.html"
PATHS = ("/etc/machine-id", "/var/lib/dbus/machine-id")
"""Where the ID is read, in order: systemd's file, then D-Bus's (machine-id(5))."""
SHORT = 8
"""Hex characters of the ID shown to people (the rest stays on the machine)."""
APP_KEY = b"provision: one machine named twice"
"""The fixed, application-specific key of the ID's HMAC (machine-id(5))."""

_ID = re.compile(r"[0-9a-f]{32}")
_SCRIPT = 'for f in "$@"; do echo "$f: $(head -c 64 "$f" 2>&1 | head -n 1)"; done'


class MachineId(Frozen):
    """A host's machine ID.

    Attributes:
        digest: HMAC-SHA256 of the ID under :data:`APP_KEY`, 64 hex characters: equal for two hosts
            exactly when their IDs are equal.
        prefix: The ID's first :data:`SHORT` hex characters.
        path: The file it was read from (one of :data:`PATHS`).
    """

    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    prefix: str = Field(pattern=rf"^[0-9a-f]{{{SHORT}}}$")
    path: str

    @classmethod
    def of(cls, value: str, path: str) -> MachineId:
        """The fact of the ID ``value`` (32 lowercase hex characters) read from ``path``."""
        digest = hmac.new(APP_KEY, value.encode("ascii"), hashlib.sha256).hexdigest()
        return cls(digest=digest, prefix=value[:SHORT], path=path)

    @property
    def short(self) -> str:
        """The prefix and an ellipsis, what messages print: ``4f1c9a0e…``."""
        return f"{self.prefix}…"


def parse_machine_id(output: str, rc: int) -> MachineId | Unknown:
    """``PATH: first line`` per file of :data:`PATHS` -> the first valid ID, else Unknown with each
    file's reason (missing, empty, ``uninitialized``, not 32 lowercase hex characters)."""
    if (bad := failure("sh", output, rc)) is not None:
        return bad
    read = dict(_lines(output))
    for path in PATHS:
        if path in read and _valid(read[path]):
            return MachineId.of(read[path], path)
    why = "; ".join(f"{path} {_why_not(read[path])}" for path in PATHS if path in read)
    return Unknown(unknown=f"no machine ID: {why or 'no machine-id file was read'}")


def _lines(output: str) -> list[tuple[str, str]]:
    pairs = (line.partition(":") for line in output.splitlines())
    return [(path, value.strip()) for path, sep, value in pairs if sep and path in PATHS]


def _valid(value: str) -> bool:
    return _ID.fullmatch(value) is not None and value != "0" * 32


def _why_not(value: str) -> str:
    if not value:
        return "is empty"
    if value == "uninitialized":
        return "is uninitialized (first boot not complete)"
    if "No such file" in value:
        return "is absent"
    if "Permission denied" in value:
        return "is not readable"
    if value == "0" * 32:
        return "is all zeros"
    return "is not 32 lowercase hex characters"


class MachineIdFact(Fact[MachineId]):
    """The machine ID: the first line of ``/etc/machine-id``, and of ``/var/lib/dbus/machine-id``."""

    id = "machine-id"
    argv = ("sh", "-c", _SCRIPT, "sh", *PATHS)
    timeout = 5.0
    parse = staticmethod(parse_machine_id)


FACTS: tuple[type[Fact[Any]], ...] = (MachineIdFact,)

FIELDS: dict[str, Derive] = {"machine_id": if_probed(MachineIdFact)}
