"""The spec's Python virtual environment and the PyTorch build in it, read without starting torch.

Sources: PEP 405 (``pyvenv.cfg``), PEP 503 (name normalisation), the ``*.dist-info`` layout of
PEP 376/627; torch's ``torch/version.py`` (``__version__``, ``cuda``).
"""

from __future__ import annotations

import ast
import re
from typing import Literal

from pydantic import Field

from provision.detect.collector import NOT_FOUND_RC
from provision.detect.fact import Derive, Fact, Parsed, Unknown, failure, first_line, is_count, sh
from provision.models import Frozen
from provision.spec.paths import VENV_ROOTS
from provision.versions import Dotted, DottedVersion

_LEADING_VERSION = re.compile(r"^\d+(\.\d+)*")
NOT_RECORDED = "(not recorded)"
NO_VENV = "no venv given (torch is read from the spec's python.venv)"


class Torch(Frozen):
    """PyTorch found in the spec's venv, read without importing torch where possible."""

    venv: str
    version: str = Field(description="torch.__version__, e.g. 2.11.0+cu130.")
    cuda: str | None = Field(None, description="torch.version.cuda, e.g. 13.0; None for CPU builds.")
    python: str | None = None
    arch_list: tuple[str, ...] | None = Field(None, description="torch.cuda.get_arch_list() when imported.")
    device_count: int | None = None


class Venv(Frozen):
    """A Python virtual environment: its interpreter and installed distributions.

    Read from ``pyvenv.cfg`` and the ``*.dist-info`` directory names in
    site-packages, without starting the interpreter.
    """

    path: str
    python: Dotted | None = Field(None, description="pyvenv.cfg 'version', e.g. 3.12.3.")
    distributions: dict[str, str] = Field(
        {},
        description="Normalised distribution name (PEP 503) -> version, e.g. torch -> 2.11.0+cu130; only "
        "distributions whose metadata and files agree (see ``incomplete``).",
    )
    interpreter: bool | None = Field(
        None, description="bin/python exists and is executable; None when not read (older captures)."
    )
    uv: bool = Field(False, description="pyvenv.cfg names uv as its maker (uv venvs carry no pip).")
    incomplete: dict[str, str] = Field(
        {},
        description="Distributions left half-installed (name -> version): a dist-info without METADATA "
        "or RECORD, or one whose RECORD names a top-level file or directory that is gone.",
    )

    def missing_parts(self) -> tuple[str, ...]:
        """What keeps this venv from working, e.g. ``("pip",)``; empty when complete or not read.

        A venv is whole when its interpreter is executable and, unless uv made it, pip is
        installed completely (``python -m venv`` installs pip last, through ensurepip, so an
        interrupted creation leaves a venv without pip: issue 13).
        """
        if self.interpreter is None:
            return ()
        parts = [] if self.interpreter else ["interpreter bin/python"]
        if "pip" in self.incomplete:
            parts.append("pip (half-installed)")
        elif not self.uv and "pip" not in self.distributions:
            parts.append("pip")
        return tuple(parts)


class NoVenv(Frozen):
    """Observed: no virtual environment at ``path`` (the venv probe found no ``pyvenv.cfg``).

    Not an :class:`~provision.detect.unknown.Unknown`: the planner creates a venv that is observed
    absent, and creates nothing where the venv was not read (no probe, a probe that failed).
    """

    path: str
    absent: Literal[True] = Field(True, description="Always true: tells this apart from a Venv in JSON.")


def parse_torch(output: str, rc: int, venv: str | None = None) -> Torch | Unknown:
    """Torch probe (or the fixture's real import) ``key value`` lines -> :class:`Torch`.

    Reads ``venv``, ``python``, ``torch``, ``cuda`` and, when torch was imported,
    ``arch_list`` and ``count``. Without a ``venv`` line (a capture made by importing
    torch) the venv is the ``venv`` argument, else ``"(not recorded)"``.
    """
    if rc == NOT_FOUND_RC:
        return Unknown(unknown=f"no python in the venv ({first_line(output)})")
    said = [line.strip() for line in output.splitlines() if line.startswith("torch: ")]
    if rc != 0 and said:
        return Unknown(unknown=said[0])
    if (bad := failure("torch probe", output, rc)) is not None:
        return bad
    values = dict(_key_values(output))
    if "torch" not in values:
        return Unknown(unknown=f"no torch version in probe output: {first_line(output)}")
    return Torch(
        venv=values.get("venv", venv or NOT_RECORDED),
        version=values["torch"],
        cuda=None if values.get("cuda", "None") == "None" else values["cuda"],
        python=values["python"].split()[0] if values.get("python") else None,
        arch_list=_literal_tuple(values.get("arch_list")),
        device_count=int(values["count"]) if is_count(values.get("count", "")) else None,
    )


def _key_values(output: str) -> list[tuple[str, str]]:
    return [(k, v.strip()) for k, _, v in (line.partition(" ") for line in output.splitlines()) if k]


def _literal_tuple(text: str | None) -> tuple[str, ...] | None:
    try:
        value = ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError):
        return None
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else None


def parse_venv(output: str, rc: int) -> Venv | NoVenv | Unknown:
    """Venv probe (``path X``, pyvenv.cfg, ``interpreter yes|no``, dist-info paths, ``incomplete
    <dist-info>`` lines) -> :class:`Venv`.

    The interpreter comes from pyvenv.cfg ``version`` (venv, uv) or ``version_info``
    (virtualenv writes ``3.12.3.final.0``); names are normalised as PEP 503 says. A distribution
    named on an ``incomplete`` line is left out of ``distributions`` (metadata and files disagree).
    Captures without the ``interpreter`` line (older probes) leave ``interpreter`` None. No
    ``pyvenv.cfg`` at the path: :class:`NoVenv`.
    """
    path = next((line[5:].strip() for line in output.splitlines() if line.startswith("path ")), "")
    absent = (  # ENOENT as the probes' C locale words it (dd today, cat in older captures)
        f"dd: failed to open '{path}/pyvenv.cfg': No such file or directory",
        f"cat: {path}/pyvenv.cfg: No such file or directory",
    )
    if rc == 1 and any(line in absent for line in output.splitlines()):
        return NoVenv(path=path)  # any other failure (a link, EACCES) is Unknown with its words
    error = "\n".join(line for line in output.splitlines() if not line.startswith("path "))
    if (bad := failure("venv probe", error, rc)) is not None:  # the error, not the echoed path
        return bad
    config = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in output.splitlines())}
    version = config.get("version") or config.get("version_info") or ""
    python = _LEADING_VERSION.match(version)
    lines = [line.strip() for line in output.splitlines()]
    found = dict(d for line in lines if line.endswith(".dist-info") and (d := _distribution(line)))
    broken = dict(
        d for line in lines if line.startswith("incomplete ") and (d := _distribution(line[11:].strip()))
    )
    said = next((line.split()[1:] for line in lines if line.startswith("interpreter ")), None)
    return Venv(
        path=path,
        python=DottedVersion(python.group(0)) if python else None,
        distributions={name: version for name, version in found.items() if name not in broken},
        interpreter=None if said is None else said == ["yes"],
        uv="uv" in config,
        incomplete=broken,
    )


def _distribution(path: str) -> tuple[str, str] | None:
    # ``<name>-<version>.dist-info`` (PEP 427: neither part holds '-'); split without a regex,
    # which took seconds on a long line without '/'.
    name, _, version = path.rpartition("/")[2].removesuffix(".dist-info").rpartition("-")
    if not name or not version:
        return None
    return re.sub(r"[-_.]+", "-", name).lower(), version


# pyvenv.cfg and the dist-info names tell the interpreter and installed wheels without starting python
# (nothing in the venv is executed: docs/security.md). The venv may be anyone's, and the probe runs as
# root: pyvenv.cfg is read with dd (O_NOFOLLOW, O_NONBLOCK, 64 KiB at most: a link to /dev/zero or to
# a root-only file is refused, a FIFO never waited on) and only its keys the parser reads are printed;
# RECORDs are read only where they are regular files of less than 16 MiB (find -type f: not a link).
# A dist-info is incomplete when METADATA or RECORD is missing (pip writes RECORD last) or a top-level
# entry that its RECORD names is gone (files deleted or never unpacked); one awk reads every RECORD,
# so a venv of hundreds of wheels costs one process (and the tab is computed once: a command
# substitution per line cost a fork each, 0.15 s on a torch venv).
_VENV_SCRIPT = r"""v=$1
echo "path $v"
cfg=$(dd if="$v/pyvenv.cfg" iflag=nofollow,nonblock bs=65536 count=1 status=none) || exit 1
printf '%s\n' "$cfg" | sed -n -E 's/^[[:space:]]*(home|version|version_info|uv|implementation)[[:space:]]*=/\1 =/p'
if [ -x "$v/bin/python" ]; then echo "interpreter yes"; else echo "interpreter no"; fi
for d in "$v"/lib*/python3*/site-packages/*.dist-info; do
  [ -d "$d" ] || continue
  echo "$d"
  { [ -f "$d/METADATA" ] && [ -f "$d/RECORD" ]; } || echo "incomplete $d"
done
tab=$(printf '\t')
find "$v"/lib*/python3*/site-packages/ -mindepth 2 -maxdepth 2 -path '*.dist-info/RECORD' -type f \
  -size -16M -exec awk -F, '{ sub(/^"/, "", $1); n = split($1, p, "/"); k = FILENAME SUBSEP p[1]
  if (n > 0 && p[1] != ".." && p[1] != "" && !(k in seen)) { seen[k]; print FILENAME "\t" p[1] } }' \
  {} + 2>/dev/null |
while IFS="$tab" read -r rec top; do
  [ -e "${rec%/*/RECORD}/$top" ] || echo "incomplete ${rec%/RECORD}"
done
exit 0
"""
# Reads the interpreter version from pyvenv.cfg and torch/version.py's two constants with sed:
# nothing in the venv is executed, so a venv a user could write cannot run code as root
# (docs/security.md). dd reads 64 KiB at most, never through a link (a link to /dev/zero or to a
# root-only file is refused) and never waiting on a FIFO.
# Prints the same `key value` lines as the fixture's torch.txt.
_TORCH_SCRIPT = """\
echo "venv $1"
[ -d "$1" ] || { echo "torch: no virtual environment at $1"; exit 1; }
dd if="$1/pyvenv.cfg" iflag=nofollow,nonblock bs=65536 count=1 status=none 2>/dev/null | sed -n -E 's/^version(_info)? *= *([0-9]+([.][0-9]+)*).*/python \\2/p' | head -n 1
for f in "$1"/lib*/python3*/site-packages/torch/version.py; do
  [ -f "$f" ] || continue
  dd if="$f" iflag=nofollow,nonblock bs=65536 count=1 status=none | sed -n -E \
    -e "s/^__version__ *(:[^=]*)?= *['\\"]([^'\\"]*)['\\"].*/torch \\2/p" \
    -e "s/^cuda *(:[^=]*)?= *['\\"]([^'\\"]*)['\\"].*/cuda \\2/p" \
    -e "s/^cuda *(:[^=]*)?= *None.*/cuda None/p"
  exit 0
done
echo "torch: not installed in $1"
exit 1
"""


class VenvFact(Fact[Venv | NoVenv]):
    """The venv's interpreter (pyvenv.cfg) and installed distributions (dist-info names)."""

    id = "venv"
    needs_venv = True
    parse = staticmethod(parse_venv)

    @classmethod
    def command(cls, venv: str) -> tuple[str, ...]:
        return sh(_VENV_SCRIPT, venv)


class TorchFact(Fact[Torch]):
    """torch's version and CUDA build from ``torch/version.py``, read without running the venv."""

    id = "torch"
    needs_venv = True
    timeout = 15.0
    parse = staticmethod(parse_torch)

    @classmethod
    def command(cls, venv: str) -> tuple[str, ...]:
        return sh(_TORCH_SCRIPT, venv)


class VenvCandidate(Frozen):
    """A virtual environment found by :class:`VenvSearchFact`: its directory and torch's dist-info."""

    path: str
    torch: str | None = Field(
        None, description="torch's version from its dist-info name (2.11.0+cu130); None: torch not installed."
    )


class VenvSearch(Frozen):
    """The virtual environments under ``roots`` (each one's ``pyvenv.cfg``, PEP 405), sorted by path."""

    roots: tuple[str, ...]
    found: tuple[VenvCandidate, ...] = ()

    def with_torch(self) -> tuple[VenvCandidate, ...]:
        """The venvs that hold torch."""
        return tuple(c for c in self.found if c.torch is not None)


def parse_venv_search(output: str, rc: int) -> VenvSearch | Unknown:
    """Venv search probe (``roots R...``, then ``venv <dir>`` and ``torch <dist-info>`` lines) ->
    :class:`VenvSearch`; a ``torch`` line belongs to the ``venv`` line before it."""
    if (bad := failure("find", output, rc)) is not None:
        return bad
    lines = output.splitlines()
    roots = next((tuple(line.split()[1:]) for line in lines if line.startswith("roots ")), None)
    if roots is None:
        return Unknown(unknown=f"venv search printed no roots line: {first_line(output)}")
    found: list[VenvCandidate] = []
    for line in lines:
        if line.startswith("venv /"):
            found.append(VenvCandidate(path=line[5:]))
        elif line.startswith("torch ") and found and (named := _distribution(line[6:].strip())):
            found[-1] = found[-1].model_copy(update={"torch": named[1]})
    unique = {c.path: c for c in found}
    return VenvSearch(roots=roots, found=tuple(unique[p] for p in sorted(unique)))


# Every pyvenv.cfg at most three directories below a root (/opt/torch/.venv is two), found without
# following symbolic links, and torch's dist-info in its site-packages; nothing in a venv is run.
_VENV_SEARCH_SCRIPT = r"""echo "roots $*"
command -v find >/dev/null || { echo "find: not found"; exit 127; }
find "$@" -maxdepth 4 -name pyvenv.cfg -type f 2>/dev/null | head -n 64 | while IFS= read -r cfg; do
  v=${cfg%/pyvenv.cfg}
  echo "venv $v"
  for d in "$v"/lib*/python3*/site-packages/torch-*.dist-info; do
    [ -d "$d" ] && echo "torch ${d##*/}"
  done
done
exit 0
"""


class VenvSearchFact(Fact[VenvSearch]):
    """The virtual environments under the directories a spec's venv may lie in
    (:data:`provision.spec.paths.VENV_ROOTS`): ``provision import`` reads it to find the machine's
    venv; plan and detect do not run it."""

    id = "venv-search"
    argv = sh(_VENV_SEARCH_SCRIPT, *VENV_ROOTS)
    parse = staticmethod(parse_venv_search)


FACTS = (VenvFact, TorchFact)


def _torch(p: Parsed) -> Torch | Unknown:
    if not p.has(TorchFact):
        return Unknown(unknown=NO_VENV)
    torch = p.of(TorchFact)
    if isinstance(torch, Torch) and torch.venv == NOT_RECORDED and p.venv:
        return torch.model_copy(update={"venv": p.venv})
    return torch


FIELDS: dict[str, Derive] = {
    "torch": _torch,
    "venv": lambda p: p.of(VenvFact) if p.has(VenvFact) else Unknown(unknown=NO_VENV),
}
