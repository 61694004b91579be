"""The spec's driver branch against its lifecycle and the GPUs the machine really has.

A branch that does not support a GPU lspci or nvidia-smi shows is refused, naming the branch that
does (the last one for an architecture NVIDIA dropped: Maxwell, Pascal and Volta end at R580; the
first one for a newer architecture). A branch past its end of life, or within the catalog's notice
period before it, is a warning naming the supported branches that serve the same GPUs.

The end of life is judged as of a date the caller gives (:func:`lifecycle_findings`' ``as_of``),
recorded in the plan (``Plan.as_of``): applying a saved plan plans again as of that same date, so
the comparison of the two plans never depends on the day it runs. Sources: NVIDIA Data Center
Drivers, "Driver Lifecycle", "Supported Drivers and CUDA Toolkit Versions" and "CUDA Toolkit,
Driver, and Architecture Matrix" (catalog ``drivers.yaml``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

from provision.catalog import Architecture, Catalog
from provision.catalog.lifecycle import DriverBranch
from provision.detect.facts import Facts
from provision.findings import Finding
from provision.plan.flavor import detected_gpus
from provision.spec.models import Spec


def lifecycle_findings(spec: Spec, facts: Facts, catalog: Catalog, as_of: date | None) -> tuple[Finding, ...]:
    """Blockers for GPUs present that ``spec.driver.branch`` does not support; a warning when the
    branch is past or near its end of life as of ``as_of`` (None: dated ends are not judged, a
    branch NVIDIA lists as ended without a date still warns)."""
    gpus = detected_gpus(facts, catalog)
    return (
        *_unsupported(spec.driver.branch, gpus, catalog),
        *_end_of_life(spec, gpus, catalog, as_of),
    )


def _unsupported(
    branch: int, gpus: tuple[tuple[str, Architecture], ...], catalog: Catalog
) -> Iterator[Finding]:
    seen: set[Architecture] = set()
    for label, arch in gpus:
        if arch in seen:
            continue
        seen.add(arch)
        last, first = catalog.last_branch_for(arch), catalog.min_branch_for(arch)
        if last is not None and branch > last.branch:
            yield Finding(
                rule="driver-branch-too-new-for-gpu",
                severity="blocker",
                message=f"{label} is a {arch.title} GPU: R{last.branch} is the last driver branch that "
                f"supports it, branch {branch} ignores it; set driver.branch: {last.branch}",
                source=catalog.cite(last.source),
            )
        if first is not None and branch < first.branch:
            yield Finding(
                rule="driver-branch-too-old-for-gpu",
                severity="blocker",
                message=f"{label} is a {arch.title} GPU: R{first.branch} is the first driver branch that "
                f"supports it, branch {branch} has no driver for it; set driver.branch: {first.branch} "
                "or newer",
                source=catalog.cite(first.source),
            )


def _end_of_life(
    spec: Spec, gpus: tuple[tuple[str, Architecture], ...], catalog: Catalog, as_of: date | None
) -> Iterator[Finding]:
    row = catalog.driver_branch(spec.driver.branch)
    if row is None:
        return  # the spec rule driver-branch-unknown says so
    state = row.state(as_of, catalog.lifecycle.notice_days)
    if state not in ("ended", "ending"):
        return
    archs = {a for _, a in gpus} or _spec_arch(spec, catalog)
    instead = _alternatives(catalog, archs, as_of)
    move = (
        f"move to a supported branch: {instead}"
        if instead
        else "no supported branch in the catalog serves these GPUs"
    )
    kind = f" ({row.type})" if row.type else ""
    when = f" (as of {as_of}, the date this plan was made)" if as_of else ""
    if state == "ended":
        ended = (
            f"reached its end of life in {row.eol_text}"
            if row.eol != "ended"
            else "is past its end of life (NVIDIA lists it among ended branches)"
        )
        when = when if row.eol != "ended" else ""  # a branch listed as ended is ended on any day
        message = f"driver branch {row.branch}{kind} {ended}{when}: no more bug or security fixes; {move}"
        rule = "driver-branch-end-of-life"
    else:
        message = (
            f"driver branch {row.branch}{kind} reaches its end of life in {row.eol_text}{when}; "
            f"plan the {move}"
        )
        rule = "driver-branch-near-end-of-life"
    yield Finding(
        rule=rule,
        severity="warning",
        message=message,
        source=catalog.cite(tuple(dict.fromkeys((*row.source, *catalog.lifecycle.source)))),
    )


def _spec_arch(spec: Spec, catalog: Catalog) -> set[Architecture]:
    model = catalog.gpu(spec.gpus.model)
    return {model.architecture} if model is not None else set()


def _alternatives(catalog: Catalog, archs: set[Architecture], as_of: date | None) -> str:
    """Production and long-term branches supported as of ``as_of`` that serve every one of ``archs``."""
    rows = [
        b
        for b in catalog.driver_branches.values()
        if b.type in ("LTSB", "PB")
        and _current(b, catalog, as_of)
        and archs <= set(catalog.branch_architectures(b.branch))
    ]
    return ", ".join(_describe(b) for b in rows)


def _current(row: DriverBranch, catalog: Catalog, as_of: date | None) -> bool:
    """Supported as of ``as_of``; without a date, any branch with an end-of-life month to come."""
    state = row.state(as_of, catalog.lifecycle.notice_days)
    return state == "supported" or (as_of is None and row.eol not in (None, "ended"))


def _describe(row: DriverBranch) -> str:
    return f"{row.branch} ({row.type}, to {row.eol_text})"
