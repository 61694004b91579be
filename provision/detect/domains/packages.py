"""Installed packages of the NVIDIA stack, where they came from, and provision's package locks, as
facts: each OS family's probes (:class:`provision.os.base.FamilyProbes`) made into :class:`Fact`
classes, and the neutral ``Facts`` fields taken from the family ``/etc/os-release`` names.

Only names matching a pattern that some component declares are recorded (each component's
``provision/catalog/data/components/<name>.yaml``), so a name the plan installs is always seen again.
The commands and their parsers live in the families (:mod:`provision.os.debian.probes`).
"""

from __future__ import annotations

from typing import Any, cast

from provision.detect.domains.os_kernel import OsRelease, OsReleaseFact
from provision.detect.fact import Derive, Fact, FactType, Parsed, Unknown
from provision.os import FamilyProbe, family_ids, family_of, managers
from provision.os.models import Package, PackageLocks, PackageOrigins

__all__ = ["FACTS", "FIELDS", "Package", "PackageLocks", "PackageOrigins"]


def _fact(probe: FamilyProbe, name: str, family: str) -> FactType:
    """The :class:`Fact` class of one family probe (its parser bounded like every fact's), run only
    on hosts of ``family`` (its ``os_ids``)."""
    attrs: dict[str, Any] = {
        "__doc__": probe.doc,
        "__module__": __name__,
        "id": probe.id,
        "argv": probe.argv,
        "timeout": probe.timeout,
        "requires": probe.requires,
        "os_ids": family_ids(family),
        "parse": staticmethod(probe.parse),
    }
    return type(name, (Fact,), attrs)


def _name(family: str, field: str) -> str:
    return f"{family}{field.title()}Fact"


BY_FAMILY: dict[str, dict[str, FactType]] = {
    family: {
        field: _fact(getattr(pm.probes, field), _name(family, field), family)
        for field in ("packages", "locks", "origins")
    }
    for family, pm in managers().items()
}
"""OS family -> ``packages``/``locks``/``origins`` -> the Fact class of its probe."""

DpkgPackagesFact = BY_FAMILY["Debian"]["packages"]
AptLocksFact = BY_FAMILY["Debian"]["locks"]
PackageOriginsFact = BY_FAMILY["Debian"]["origins"]

FACTS: tuple[FactType, ...] = tuple(f for facts in BY_FAMILY.values() for f in facts.values())


def _family(parsed: Parsed) -> str | None:
    """The OS family ``/etc/os-release`` names, None when it was not read."""
    os = parsed.of(OsReleaseFact)
    return (family_of((os.id, *os.id_like)) or "") if isinstance(os, OsRelease) else None


def no_family(os: OsRelease) -> Unknown:
    """Why a host of no known OS family has no package facts: the collector ran no family's probes
    there (:func:`provision.detect.collector.for_this_os`)."""
    like = f", ID_LIKE {' '.join(os.id_like)}" if os.id_like else ""
    return Unknown(
        unknown=f"not probed: /etc/os-release ID {os.id}{like} is of no OS family provision knows "
        f"({', '.join(BY_FAMILY)}), so no package manager was asked"
    )


def _field(field: str, probed_only: bool) -> Derive:
    """A Facts field from the host's family's probe (the only one a live detection runs there); an
    explicit Unknown when ``/etc/os-release`` names no known family; when os-release is unread (a
    capture without it), the first family whose probe gave a value. ``probed_only``: None (the
    field's "not probed" default) when that probe's output is absent (captures older than the fact)."""

    def derive(parsed: Parsed) -> Any:
        family = _family(parsed)
        if family == "":
            return no_family(cast(OsRelease, parsed.of(OsReleaseFact)))
        order = [family] if family in BY_FAMILY else list(BY_FAMILY)
        facts = [BY_FAMILY[f][field] for f in order]
        ran = [f for f in facts if parsed.has(f)]
        if not ran:
            return None if probed_only else parsed.of(facts[0])
        return next((v for f in ran if not isinstance(v := parsed.of(f), Unknown)), parsed.of(ran[0]))

    return derive


FIELDS: dict[str, Derive] = {
    "packages": _field("packages", probed_only=False),
    "package_locks": _field("locks", probed_only=True),
    "origins": _field("origins", probed_only=True),
}
