"""The operating system and the running kernel: ``/etc/os-release``, ``uname -a``, ``/proc/version``.

Sources: os-release(5); the compiler in ``/proc/version`` is the one the kernel was built with,
which DKMS must match (docs/field-failures.md#ff-13).
"""

from __future__ import annotations

import re
import shlex

from pydantic import Field

from provision.detect.fact import Derive, Fact, Parsed, Unknown, failure, first_line, value_of
from provision.models import Frozen

_COMPILER = re.compile(r"\b(gcc|clang)\b.*?(\d+\.\d+(?:\.\d+)*)")


class OsRelease(Frozen):
    """/etc/os-release fields."""

    id: str
    version_id: str
    codename: str | None = None
    pretty_name: str | None = None
    id_like: tuple[str, ...] = ()


class Kernel(Frozen):
    """Running kernel from ``uname -r`` / ``/proc/version``."""

    release: str = Field(description="uname -r, e.g. 6.8.0-60-generic.")
    machine: str | None = Field(None, description="uname -m, e.g. x86_64.")
    compiler: str | None = Field(None, description="Compiler the kernel was built with, from /proc/version.")


def parse_os_release(output: str, rc: int) -> OsRelease | Unknown:
    """``cat /etc/os-release`` -> :class:`OsRelease` (needs ``ID`` and ``VERSION_ID``)."""
    if (bad := failure("cat /etc/os-release", output, rc)) is not None:
        return bad
    fields = dict(_os_release_pairs(output))
    if "ID" not in fields or "VERSION_ID" not in fields:
        return Unknown(unknown="/etc/os-release has no ID or VERSION_ID")
    return OsRelease(
        id=fields["ID"],
        version_id=fields["VERSION_ID"],
        codename=fields.get("VERSION_CODENAME"),
        pretty_name=fields.get("PRETTY_NAME"),
        id_like=tuple(fields.get("ID_LIKE", "").split()),
    )


def _os_release_pairs(output: str) -> list[tuple[str, str]]:
    pairs = []
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            try:
                pairs.append((key.strip(), " ".join(shlex.split(value))))
            except ValueError:
                continue
    return pairs


def parse_uname(output: str, rc: int) -> Kernel | Unknown:
    """``uname -a`` -> :class:`Kernel` with release and machine (no compiler)."""
    if (bad := failure("uname", output, rc)) is not None:
        return bad
    words = output.split()
    if len(words) < 4 or words[0] != "Linux":
        return Unknown(unknown=f"unexpected uname -a output: {first_line(output)}")
    machine = words[-2] if words[-1] == "GNU/Linux" else words[-1]
    return Kernel(release=words[2], machine=machine)


def parse_proc_version(output: str, rc: int) -> Kernel | Unknown:
    """``cat /proc/version`` -> :class:`Kernel` with release and compiler (docs/field-failures.md#ff-13)."""
    if (bad := failure("cat /proc/version", output, rc)) is not None:
        return bad
    match = re.match(r"Linux version (\S+)", output.strip())
    if match is None:
        return Unknown(unknown=f"unexpected /proc/version: {first_line(output)}")
    compiler = _COMPILER.search(output[match.end() :])
    return Kernel(release=match.group(1), compiler=" ".join(compiler.groups()) if compiler else None)


def merge_kernel(uname: Kernel | Unknown, proc: Kernel | Unknown) -> Kernel | Unknown:
    """Combine uname's release and machine with /proc/version's compiler."""
    if isinstance(uname, Unknown):
        return proc
    if isinstance(proc, Unknown):
        return uname
    return uname.model_copy(update={"compiler": proc.compiler})


class OsReleaseFact(Fact[OsRelease]):
    """The distribution: os-release(5)."""

    id = "os-release"
    argv = ("cat", "/etc/os-release")
    parse = staticmethod(parse_os_release)


class UnameFact(Fact[Kernel]):
    """Kernel release and machine: ``uname -a``."""

    id = "uname"
    argv = ("uname", "-a")
    parse = staticmethod(parse_uname)


class ProcVersionFact(Fact[Kernel]):
    """Kernel release and the compiler that built it: ``/proc/version``."""

    id = "proc-version"
    argv = ("cat", "/proc/version")
    parse = staticmethod(parse_proc_version)


FACTS = (OsReleaseFact, UnameFact, ProcVersionFact)


def _kernel(p: Parsed) -> Kernel | Unknown:
    uname, proc = p.of(UnameFact), p.of(ProcVersionFact)
    return merge_kernel(uname, proc)


FIELDS: dict[str, Derive] = {"os": value_of(OsReleaseFact), "kernel": _kernel}
