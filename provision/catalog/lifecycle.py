"""Driver branch lifecycle rows: end-of-life months, the last branch per architecture, and the
kernel series each branch's releases build on.

Every row names its sources (``data/sources.yaml``). Dates are kept as the strings the YAML holds
(``"2028-06"``, ``"2025-08-04"``) and parsed where judged, so that the catalog snapshot holds no
``datetime`` value (its unpickler resolves only the catalog's own classes).
"""

from __future__ import annotations

import calendar
import re
from datetime import date
from typing import Annotated, Literal

from pydantic import Field

from provision.catalog.models import Architecture, Sourced
from provision.versions import Dotted, DottedVersion, Driver, DriverVersion

YearMonth = Annotated[str, Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$")]
"""``2028-06``: a month, as NVIDIA's lifecycle table gives an end of life ("June 2028")."""
IsoDate = Annotated[str, Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$")]

State = Literal["ended", "ending", "supported", "undated"]
"""A branch as of a date: past its end of life, within the notice period before it, supported, or
no end-of-life date to judge by."""

_SERIES = re.compile(r"^(\d+)\.(\d+)")


def month_text(month: str) -> str:
    """``2028-06`` -> ``June 2028``."""
    year, number = month.split("-")
    return f"{calendar.month_name[int(number)]} {year}"


def month_end(month: str) -> date:
    """The last day of ``2028-06``: the day a branch whose end of life is that month is last supported."""
    year, number = (int(p) for p in month.split("-"))
    return date(year, number, calendar.monthrange(year, number)[1])


def kernel_series(release: str) -> DottedVersion | None:
    """The upstream series of a kernel release: ``6.8.0-60-generic`` -> ``6.8``; None when the
    release does not start with ``major.minor``.

    Enterprise kernels (RHEL's ``5.14.0-570...el9``) carry backports from later series, so their
    number understates what they changed; rows keyed by upstream series do not describe them.
    """
    match = _SERIES.match(release)
    return DottedVersion(f"{match[1]}.{match[2]}") if match else None


class LifecycleRule(Sourced):
    """How far ahead of a branch's end of life the plan warns.

    Attributes:
        notice_days: Days before the end of life from which a branch is ``ending``.
    """

    notice_days: int = Field(ge=0)


class ArchLastBranch(Sourced):
    """The last driver branch that supports an architecture (Volta -> 580)."""

    arch: Architecture
    branch: int


class KernelBuild(Sourced):
    """Which releases of a branch build their kernel module on a kernel series and newer.

    Attributes:
        branch: 580.
        kernel: The upstream kernel series whose interface changes broke older releases (``6.19``).
        first: The first release of the branch known to build on it; None when no release of the
            branch in the sources does.
        fails: A release seen failing to build on it (``580.126.09``), where the source names one.
    """

    branch: int
    kernel: Dotted
    first: Driver | None
    fails: str | None = None


class BranchDates(Sourced):
    """The dates of one branch (DC-DRV's lifecycle table; a release's redistributable manifest).

    Attributes:
        eol: End-of-life month (``2028-06``), ``ended`` where NVIDIA lists the branch as ended
            without a date, None where no source states one (New Feature Branches have none).
        released: A release date of the branch, where a manifest gives one; ``released_as`` names
            that release (the earliest release found, not necessarily the branch's first).
    """

    eol: YearMonth | Literal["ended"] | None
    released: IsoDate | None = None
    released_as: str | None = None

    @property
    def eol_text(self) -> str | None:
        """``June 2028``, ``ended`` or None."""
        if self.eol is None or self.eol == "ended":
            return self.eol
        return month_text(self.eol)

    def state(self, as_of: date | None, notice_days: int) -> State:
        """The branch as of ``as_of``: ``ended`` after its end-of-life month (or when listed as
        ended), ``ending`` within ``notice_days`` before that, ``supported``; ``undated`` without a
        month, or a month and no date to judge it on."""
        if self.eol == "ended":
            return "ended"
        if self.eol is None or as_of is None:
            return "undated"
        left = (month_end(self.eol) - as_of).days
        if left < 0:
            return "ended"
        return "ending" if left <= notice_days else "supported"


def build_floor(rows: tuple[KernelBuild, ...], branch: int, series: DottedVersion) -> KernelBuild | None:
    """The row that decides whether ``branch`` builds on kernel ``series``: among the branch's rows
    for ``series`` or an older one, one without a building release if any, else the one asking
    the newest release. None when no row applies (the catalog knows of no break)."""
    applying = [r for r in rows if r.branch == branch and r.kernel <= series]
    if not applying:
        return None
    blocked = [r for r in applying if r.first is None]
    if blocked:
        return max(blocked, key=lambda r: r.kernel)
    return max(applying, key=lambda r: r.first or DriverVersion("0.0"))


def builds(
    rows: tuple[KernelBuild, ...], version: DriverVersion, series: DottedVersion
) -> KernelBuild | None:
    """The row by which ``version`` does not build on kernel ``series``; None when it builds as far
    as the catalog knows."""
    floor = build_floor(rows, version.branch, series)
    if floor is None or (floor.first is not None and version >= floor.first):
        return None
    return floor


def known_building(rows: tuple[KernelBuild, ...], kernel: DottedVersion) -> tuple[DriverVersion, ...]:
    """The first releases known to build on kernel series ``kernel`` itself (rows for exactly that
    series, no older row blocking them), ascending: what the catalog can vouch for, nothing more."""
    firsts = {r.first for r in rows if r.kernel == kernel and r.first is not None}
    return tuple(sorted(v for v in firsts if builds(rows, v, kernel) is None))


class DriverBranch(BranchDates):
    """A driver branch's lifecycle (DC-DRV).

    Attributes:
        branch: 580.
        type: LTSB, PB or NFB; None where unverified (R615).
        max_cuda_major: Newest CUDA major without the forward-compatibility package.
    """

    branch: int
    type: Literal["LTSB", "PB", "NFB"] | None
    max_cuda_major: int | None


class GspFirmwarePackage(Sourced):
    """The package that carries the GSP firmware for a driver source and distribution.

    Attributes:
        driver_source: ``distro`` (the distribution's archive).
        distro: os-release ID (``ubuntu``, ``debian``).
        name: Package name template with ``{branch}`` and ``{version}``.
        version: Version template the package must have (``{version}``), where the name lacks it.
    """

    driver_source: Literal["distro", "nvidia-repo"]
    distro: str
    name: str
    version: str | None = None

    def request(self, branch: int, version: str) -> str:
        """``nvidia-firmware-580-server-580.178.04`` or ``firmware-nvidia-gsp (= 550.163.01)``."""
        name = self.name.format(branch=branch, version=version)
        return f"{name} (= {self.version.format(version=version)})" if self.version else name


class GspFirmwareRule(Sourced):
    """Where the open kernel modules find their GSP firmware, and the packages that carry it."""

    path: str
    packages: tuple[GspFirmwarePackage, ...]

    def package(self, driver_source: str, distro: str) -> GspFirmwarePackage | None:
        return next(
            (p for p in self.packages if (p.driver_source, p.distro) == (driver_source, distro)), None
        )
