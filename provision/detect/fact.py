"""The fact base: one probe command plus one pure parser, and what an unread fact is.

A fact (pyinfra's idea, typed) is a class naming the command that reads it (``argv``, run
without a shell), how long it may take (``timeout``), the binary it needs (``requires``, named
in the reason when it is missing) and a pure ``parse(output, rc)`` returning the typed value or
an :class:`Unknown` with the reason. Parsers never raise: odd, truncated or foreign output
gives an Unknown.

The registry (:mod:`provision.detect.registry`) lists every fact; :class:`Parsed` holds each
raw output parsed exactly once, and the Facts fields are derived from it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from provision.detect.raw import ProbeOutput
from provision.memo import by_identity
from provision.models import Frozen
from provision.unknown import Unknown as Unknown  # re-exported: parsers return it
from provision.unknown import failure as failure
from provision.unknown import first_line as first_line

T = TypeVar("T")


class Probe(Frozen):
    """One command whose output one parser reads.

    Attributes:
        id: Probe id and raw file stem, e.g. ``query-gpu``.
        argv: The command; run without a shell.
        timeout: Seconds before the collector kills it (rc 124).
        os_ids: For an OS family's probe (dpkg, rpm), the ``/etc/os-release`` IDs of that family: the
            collector runs it only on a host of that family; empty for a probe every host runs.
    """

    id: str
    argv: tuple[str, ...]
    timeout: float = 10.0
    os_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The collector's input form: ``{"id", "argv", "timeout"}``, and ``"os_ids"`` when set."""
        data: dict[str, Any] = {"id": self.id, "argv": list(self.argv), "timeout": self.timeout}
        return data | ({"os_ids": list(self.os_ids)} if self.os_ids else {})


def sh(script: str, *args: str) -> tuple[str, ...]:
    """argv running our own fixed ``script`` with ``sh``; values travel as separate ``args``."""
    return ("sh", "-c", script, "sh", *args)


MAX_LINE = 4096
"""Longest line a parser sees: longer ones are cut (no tool the parsers read prints lines over 1 KB)."""


def bounded_lines(output: str) -> str:
    """``output`` with every line cut to :data:`MAX_LINE` characters, so parsing time stays bounded."""
    if all(len(line) <= MAX_LINE for line in output.split("\n")):
        return output
    return "\n".join(line[:MAX_LINE] for line in output.split("\n"))


def _with_bounded_lines(parse: Callable[[str, int], Any]) -> Callable[[str, int], Any]:
    @functools.wraps(parse)
    def parse_bounded(output: str, rc: int) -> Any:
        return parse(bounded_lines(output), rc)

    return parse_bounded


def is_count(text: str) -> bool:
    """Whether ``text`` is a plain ASCII decimal that ``int()`` reads (``"²".isdigit()`` is true)."""
    return text.isascii() and text.isdigit() and len(text) <= 18


class Fact(Generic[T]):
    """One fact: its probe and its pure parser. Subclasses set the class attributes.

    Attributes:
        id: Probe id and raw file stem (``--save-raw`` writes ``<id>.txt``).
        argv: The command, run without a shell; empty for facts that need a venv (see
            :meth:`probe`).
        timeout: Seconds before the collector kills the command (rc 124).
        requires: The binary the command needs, when it is not ``argv[0]``.
        aliases: Older file stems of captures this parser also reads (e.g. ``lspci-nv``).
        needs_venv: The command reads the spec's venv and only runs when one is given.
        os_ids: An OS family's fact: the ``/etc/os-release`` IDs of the hosts it runs on (see
            :class:`Probe`).
    """

    id: ClassVar[str]
    argv: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Every parser sees bounded lines, whoever calls it (Parsed, tests, verify).
        super().__init_subclass__(**kwargs)
        if "parse" in cls.__dict__:
            cls.parse = staticmethod(_with_bounded_lines(cls.__dict__["parse"].__func__))  # type: ignore[method-assign,assignment]

    timeout: ClassVar[float] = 10.0
    os_ids: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[str | None] = None
    aliases: ClassVar[tuple[str, ...]] = ()
    needs_venv: ClassVar[bool] = False

    @staticmethod
    def parse(output: str, rc: int) -> T | Unknown:  # pragma: no cover - every fact overrides it
        """The typed value of ``output`` (exit status ``rc``), or an Unknown with the reason."""
        raise NotImplementedError

    @classmethod
    def command(cls, venv: str) -> tuple[str, ...]:
        """argv for a venv fact; facts with ``needs_venv`` override it."""
        return cls.argv

    @classmethod
    def probe(cls, venv: str | None = None) -> Probe | None:
        """The probe to run, or None for a venv fact when no venv is given."""
        if cls.needs_venv:
            return None if venv is None else Probe(id=cls.id, argv=cls.command(venv), timeout=cls.timeout)
        return Probe(id=cls.id, argv=cls.argv, timeout=cls.timeout, os_ids=cls.os_ids)


FactType = type[Fact[Any]]

PARSE_CACHE_SIZE = 4096
"""Parsed outputs kept by :func:`parse_once`: a fleet's hosts mostly print the same outputs."""

_parse_cache: OrderedDict[tuple[FactType, int, bytes], Any] = OrderedDict()


@by_identity(PARSE_CACHE_SIZE)
def _digest(output: str) -> bytes:
    """The output's 128-bit BLAKE2b digest, once per output object (raw files of the same bytes share
    one ProbeOutput, detect/raw.py, so a fleet's hosts hand the same object again)."""
    return hashlib.blake2b(output.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def parse_once(fact: FactType, output: str, rc: int) -> Any:
    """``fact.parse(output, rc)``, computed once per distinct output in this process.

    Parsers are pure functions of ``(output, rc)`` returning immutable values, so hosts that
    printed the same output (most probes of a fleet built from one image) share one parse. The
    cache keys on a 128-bit BLAKE2b digest of the output, never the text itself, and keeps the
    :data:`PARSE_CACHE_SIZE` most recent values.
    """
    key = (fact, rc, _digest(output))
    if key in _parse_cache:
        _parse_cache.move_to_end(key)
        return _parse_cache[key]
    value = fact.parse(output, rc)
    _parse_cache[key] = value
    if len(_parse_cache) > PARSE_CACHE_SIZE:
        _parse_cache.popitem(last=False)
    return value


class Parsed:
    """Every probe output parsed once, by the fact that owns its id.

    Args:
        outputs: Probe outputs keyed by probe id (a fact's ``id`` or one of its ``aliases``).
        facts: The facts of the registry.
        venv: The venv detection was asked about, for captures that do not name it.
    """

    def __init__(
        self, outputs: Mapping[str, ProbeOutput], facts: Iterable[FactType], venv: str | None = None
    ) -> None:
        self.venv = venv
        self._values: dict[str, Any] = {}
        self._own = frozenset(outputs)
        for fact in facts:
            out = next((outputs[i] for i in (fact.id, *fact.aliases) if i in outputs), None)
            if out is not None:
                self._values[fact.id] = parse_once(fact, out.output, out.rc)

    def has(self, fact: FactType) -> bool:
        """True when ``fact``'s probe output was there (run, captured or saved)."""
        return fact.id in self._values

    def of(self, fact: type[Fact[T]]) -> T | Unknown:
        """``fact``'s parsed value; a fact whose output is absent parses as never run."""
        if fact.id not in self._values:
            missing = ProbeOutput.missing(fact.id)
            self._values[fact.id] = fact.parse(missing.output, missing.rc)
        value: T | Unknown = self._values[fact.id]
        return value

    def any_ran(self, facts: Iterable[FactType]) -> bool:
        """True when at least one of ``facts`` has an output under its own id (not an older alias)."""
        return any(f.id in self._own for f in facts)


Derive = Callable[[Parsed], Any]
"""How one Facts field is derived from the parsed outputs (see each domain's ``FIELDS``)."""


def value_of(fact: FactType) -> Derive:
    """A Facts field that is ``fact``'s value (an Unknown "never ran" when its output is absent)."""
    return lambda parsed: parsed.of(fact)


def if_probed(fact: FactType) -> Derive:
    """A Facts field that is ``fact``'s value, or its "not probed" default when the output is absent
    (captures older than the fact)."""
    return lambda parsed: parsed.of(fact) if parsed.has(fact) else None


def colon_pairs(text: str) -> Iterator[tuple[str, str]]:
    """``key: value`` pairs of ``text``, both stripped; lines without a colon are skipped."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            yield key.strip(), value.strip()


def int_or_none(text: str | None) -> int | None:
    """``text`` as an int, or None when absent or not a plain ASCII decimal of at most 18 digits
    (``int()`` would also take ``٣``, ``1_000`` and raise on 5000 digits)."""
    stripped = text.strip() if text is not None else ""
    return int(stripped) if re.fullmatch(r"[-+]?[0-9]{1,18}", stripped) else None


def first_text(output: str) -> str:
    """The first non-blank line of ``output``, stripped; empty when there is none."""
    return next((line.strip() for line in output.splitlines() if line.strip()), "")
