"""Raw probe outputs and the raw directory format.

A raw directory holds one ``<probe id>.txt`` per probe, in the format of the
captured fixtures (``tests/fixtures/raw/*/``)::

    $ nvidia-smi topo -m
    <output, stdout and stderr interleaved>
    [exit 0]

``provision detect --save-raw DIR`` writes it; :func:`read_raw` reads it back, so
captured machines and bug reports can be replayed through the parsers.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import field_validator

from provision import trust
from provision.errors import FactsError
from provision.files import read_bytes, untrusted_message
from provision.models import Frozen
from provision.unknown import MISSING_RC as MISSING_RC  # re-exported: rc of a probe that never ran

_EXIT = re.compile(r"^\[exit (-?\d+)\]$")

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 and C1 control characters but tab and newline: ESC, CSI and OSC start the terminal sequences a
planted probe output (a support bundle, a remote host) could send to the user's terminal through a
message that quotes it (ECMA-48 sections 5.2-5.3: the C0 and C1 sets)."""


_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)")
"""A whole CSI (``ESC [`` parameters, intermediates, final byte) or OSC (``ESC ]`` ... BEL or ST)
sequence, ECMA-48 section 5.4 and 8.3.89: nvidia-smi topo -m underlines its header with CSI."""


def printable(text: str) -> str:
    """``text`` without CSI and OSC sequences, CR LF as LF, and every other control character but tab
    and newline replaced by U+FFFD, so that no output a machine printed reaches a terminal as a
    control sequence."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub("\ufffd", _SEQUENCE.sub("", text.replace("\r\n", "\n")))


class ProbeOutput(Frozen):
    """What one probe printed.

    Attributes:
        command: The command line as shown to a human (``shlex.join`` of the argv).
        output: Stdout and stderr interleaved; empty when the command printed nothing.
        rc: Exit status; 127 not found, 124 timed out, :data:`MISSING_RC` never ran.
    """

    command: str
    output: str
    rc: int

    @field_validator("command", "output")
    @classmethod
    def _printable(cls, value: str) -> str:
        return printable(value)

    @classmethod
    def missing(cls, probe_id: str) -> ProbeOutput:
        """A stand-in for a probe with no output, whose parse gives an Unknown."""
        return cls(command="", output=f"no output from the {probe_id} probe\n", rc=MISSING_RC)


def format_raw(out: ProbeOutput) -> str:
    """The text of one raw file: ``$ command``, the output, ``[exit N]``."""
    body = out.output if not out.output or out.output.endswith("\n") else out.output + "\n"
    command = out.command.replace("\n", " ")
    return f"$ {command}\n{body}[exit {out.rc}]\n"


def parse_raw(text: str, name: str = "<raw>") -> ProbeOutput:
    """Parse the text of one raw file; leading ``#`` lines (test-case notes) are skipped.

    Raises:
        FactsError: If the first line is not ``$ ...`` or the last is not ``[exit N]``.
    """
    # Found by offsets, not by splitting into lines: a fleet's package lists are long, and
    # splitting and joining them again was most of reading a raw directory.
    text = text.rstrip("\n")
    start = 0
    while text.startswith("#", start) and (end := text.find("\n", start)) >= 0:
        start = end + 1  # a note, and more lines after it
    first_end = text.find("\n", start)
    last_start = text.rfind("\n") + 1
    match = _EXIT.match(text[last_start:].strip()) if first_end >= 0 else None
    if not text.startswith("$", start) or match is None:
        raise FactsError(f"{name}: not a raw probe file (want '$ command' ... '[exit N]')")
    output = text[first_end + 1 : last_start - 1] + "\n" if last_start - 1 > first_end else ""
    command = text[start + 1 : first_end].strip()
    return ProbeOutput(command=command, output=output, rc=int(match.group(1)))


def write_raw(directory: Path, outputs: Mapping[str, ProbeOutput]) -> None:
    """Write one ``<id>.txt`` per probe into ``directory`` (created if needed), each atomically and
    mode 0600 (what root's probes read: :func:`provision.output.write_files`).

    Raises:
        ProvisionError: The directory or a file cannot be written, or the trust rule refuses it.
    """
    from provision.output import PRIVATE, write_files

    write_files(
        directory, {f"{probe_id}.txt": format_raw(out) for probe_id, out in outputs.items()}, mode=PRIVATE
    )


def read_raw(directory: Path) -> dict[str, ProbeOutput]:
    """Read every ``*.txt`` of a raw directory, keyed by file stem (the probe id).

    Raises:
        FactsError: If the directory is missing, or a ``*.txt`` is not a regular file (a directory,
            a FIFO), is too large, or is not in the raw format.
    """
    if not directory.is_dir():
        raise FactsError(f"{directory}: no such raw probe directory")
    try:
        fd = trust.open_directory(directory)  # one walk for the directory's many files
    except trust.Untrusted as exc:
        raise FactsError(untrusted_message(directory, exc, "the raw probe directory")) from None
    except OSError as exc:
        raise FactsError(f"{directory}: cannot read the raw probe directory: {exc.strerror or exc}") from None
    try:
        # Path.glob("*.txt") and its sort, without pathlib's per-entry objects: every name that
        # ends in .txt (a dot file too), in code point order.
        names = sorted(n for n in os.listdir(directory) if n.endswith(".txt"))
        owners = trust.trusted_owners()  # one rule for the directory's files
        return {(path := directory / n).stem: _read_one(path, fd, owners) for n in names}
    finally:
        os.close(fd)


def _read_one(path: Path, directory: int, owners: frozenset[int]) -> ProbeOutput:
    # Tools print any bytes; undecodable ones are replaced, as the collector does for live output.
    data = read_bytes(path, what="raw probe", error=FactsError, directory=directory, owners=owners)
    key = hashlib.blake2b(data, digest_size=16).digest()
    if (known := _READ.get(key)) is not None:
        return known
    found = parse_raw(data.decode("utf-8", errors="replace"), str(path))
    if len(_READ) >= READ_CACHE_SIZE:
        del _READ[next(iter(_READ))]
    _READ[key] = found
    return found


READ_CACHE_SIZE = 4096
"""Raw files kept by their digest: a fleet's hosts of one image saved mostly the same files, which
then share one ProbeOutput (and, by its output's identity, one parse: detect/fact.py)."""
_READ: dict[bytes, ProbeOutput] = {}
