"""Version types used across spec, catalog, facts and plan.

Three orderings exist in this domain and each has its own type:

* NVIDIA driver versions (``580.95.05``): dotted integers; the text is kept as
  written because package versions and ``/proc/driver/nvidia/version`` use the
  zero-padded form. :class:`DriverVersion`.
* Release prefixes (CUDA ``13.0``, cuDNN ``9.14`` or ``9.14.0.64``, NCCL
  ``2.28.3``): dotted integers that match every longer version starting with
  them. :class:`DottedVersion`.
* Package versions (``2.28.3-1+cuda13.0``): the package manager's ordering and syntax,
  behind :class:`provision.os.PackageManager` (dpkg's in :mod:`provision.os.apt`).

PEP 440 versions (torch wheels) use :class:`packaging.version.Version` directly.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any

from packaging.version import InvalidVersion, Version
from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

_DOTTED = re.compile(r"^\d+(\.\d+)*$")


@functools.total_ordering
class DottedVersion:
    """A dotted-integer version compared numerically, text kept as written.

    Args:
        text: For example ``"13.0"``, ``"580.95.05"`` or ``"9.14.0.64"``.

    Raises:
        ValueError: If ``text`` is not dot-separated decimal integers.
    """

    __slots__ = ("parts", "text")

    def __init__(self, text: str) -> None:
        text = str(text).strip()
        if not _DOTTED.match(text):
            raise ValueError(f"{text!r} is not a dotted version such as 13.0 or 580.95.05")
        self.text = text
        self.parts: tuple[int, ...] = tuple(int(p) for p in text.split("."))

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"

    def __hash__(self) -> int:
        return hash(self.parts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DottedVersion):
            return NotImplemented
        return self.parts == other.parts

    def __lt__(self, other: DottedVersion) -> bool:
        return self.parts < other.parts

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0

    def matches(self, full: DottedVersion | str) -> bool:
        """Whether ``full`` starts with this version (``9.14`` matches ``9.14.0.64``)."""
        other = full if isinstance(full, DottedVersion) else DottedVersion(str(full))
        return other.parts[: len(self.parts)] == self.parts


class DriverVersion(DottedVersion):
    """An exact NVIDIA driver version such as ``580.95.05``; ``branch`` is its first field."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        if len(self.parts) < 2:
            raise ValueError(f"{text!r} is not a full driver version such as 580.95.05")

    @property
    def branch(self) -> int:
        return self.parts[0]


def _to_dotted(cls: type[DottedVersion]) -> Any:
    def convert(value: Any) -> DottedVersion:
        if isinstance(value, cls):
            return value
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"expected a version string such as 13.0, got {type(value).__name__}")
        if isinstance(value, float):
            raise ValueError(f"write the version in quotes (YAML read {value!r} as a number)")
        return cls(str(value))

    return convert


Dotted = Annotated[
    DottedVersion,
    PlainValidator(_to_dotted(DottedVersion)),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "pattern": r"^\d+(\.\d+)*$"}),
]
"""Pydantic field type for :class:`DottedVersion` (serialises to its text)."""

Driver = Annotated[
    DriverVersion,
    PlainValidator(_to_dotted(DriverVersion)),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "pattern": r"^\d+\.\d+(\.\d+)*$"}),
]
"""Pydantic field type for :class:`DriverVersion` (serialises to its text)."""


def _pep440(value: object) -> Version:
    if isinstance(value, Version):
        return value
    if not isinstance(value, str):
        raise ValueError('write the version in quotes, e.g. "2.11.0"')
    try:
        return Version(value)
    except InvalidVersion:
        raise ValueError(f"{value!r} is not a PEP 440 version") from None


Pep440 = Annotated[
    Version,
    PlainValidator(_pep440),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string"}),
]
"""Pydantic field type for a PEP 440 version (torch wheels); must be written as a string."""
