"""Checklist items: shipped defaults merged with a spec's ``bios`` section, sizing numbers filled in.

The defaults live in ``provision/catalog/data/bios.yaml``. A spec's ``bios.items`` replace a
default with the same id (keeping its position) or are appended; ``bios.skip`` then removes ids.
GPU TDP and memory are passed in by the caller so that this module does not depend on the
catalog API.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import date
from functools import cache
from pathlib import Path

from pydantic import Field, ValidationError

from provision.catalog.prebuilt import read_data
from provision.checklist.observe import Observation, machine_summary, observe
from provision.detect.facts import Facts
from provision.detect.peer import PeerAccess
from provision.errors import CatalogError, SpecError, did_you_mean
from provision.models import Frozen
from provision.spec.models import BiosItem, Spec

DEFAULTS_PATH = Path(__file__).resolve().parents[1] / "catalog" / "data" / "bios.yaml"

PLATFORM_ALLOWANCE_W = 400
"""CPU, memory, disks and fans, in watts. This project's conservative default, not a vendor figure."""

PSU_MARGIN = 1.25
"""Headroom factor on the summed load. This project's conservative rule, not a vendor specification."""

HOST_MEMORY_RECOMMENDED_FACTOR = 2
"""Recommended host RAM as a multiple of total GPU memory (this project's rule; the minimum is 1x)."""

SPEC_ITEM_CHECK = "No Linux-side check is defined for this spec item; confirm by inspection."


class ChecklistItem(BiosItem):
    """A spec ``BiosItem`` plus how it is checked from Linux and where its claim comes from.

    Attributes:
        check: Commands or observations that confirm the step once Linux boots.
        source: Document or field-failure ids (FF-nn) backing ``why``.
        detail: Numbers computed for this spec (sizing items), or None.
        observation: What the host's facts show for this item; None when no facts were given.
    """

    check: str = Field(min_length=1)
    source: str = Field(min_length=1)
    detail: str | None = None
    observation: Observation | None = None


class Checklist(Frozen):
    """The checklist for one spec: header facts and the ordered items."""

    spec_name: str
    description: str = ""
    host: str | None = None
    gpu_model: str
    gpu_count: int
    generated: date
    items: tuple[ChecklistItem, ...]
    facts_from: str | None = None
    machine: tuple[str, ...] = ()


class _DefaultsFile(Frozen):
    items: tuple[ChecklistItem, ...] = Field(min_length=1)


def load_default_items(path: Path = DEFAULTS_PATH) -> tuple[ChecklistItem, ...]:
    """Load and validate the shipped default checklist items.

    Args:
        path: YAML file with a top-level ``items`` list; the shipped file by default.

    Returns:
        The items in file order.

    Raises:
        CatalogError: If the file is missing, is not YAML, fails validation or repeats an id.
    """
    return _load_cached(path.resolve())


@cache
def _load_cached(path: Path) -> tuple[ChecklistItem, ...]:
    try:
        items = _DefaultsFile.model_validate(read_data(path)).items
    except (CatalogError, ValidationError) as exc:
        raise CatalogError(f"{path}: cannot load the default checklist: {exc}") from None
    duplicates = _duplicates(item.id for item in items)
    if duplicates:
        raise CatalogError(f"{path}: duplicate checklist ids: {', '.join(duplicates)}")
    return items


def checklist_for(
    spec: Spec,
    gpu_tdp_w: int | None,
    gpu_memory_gib: float | None,
    *,
    host: str | None = None,
    today: date | None = None,
    facts: Facts | None = None,
    facts_from: str | None = None,
    peer: PeerAccess | None = None,
) -> Checklist:
    """Build the checklist for ``spec``: defaults, then ``bios.items``, minus ``bios.skip``.

    Args:
        spec: The validated spec.
        gpu_tdp_w: Board power of one GPU in watts from the catalog, or None if unknown.
        gpu_memory_gib: Memory of one GPU in GiB from the catalog, or None if unknown.
        host: Host name printed in the header, or None to leave a blank to fill in.
        today: Generation date; today's date by default.
        facts: The host's detected facts; each item then carries an :class:`Observation`.
        facts_from: Where ``facts`` came from, printed in the header (e.g. ``facts.json``).
        peer: Whether the GPUs do P2P at all (:func:`provision.detect.peer.peer_access`); the ACS/P2P
            item is tailored to it (no promise of P2P where the driver offers none).

    Returns:
        The merged checklist with sizing details for ``spec.gpus.count`` GPUs.

    Raises:
        SpecError: If ``bios.items`` repeats an id or ``bios.skip`` names an unknown id.
    """
    merged = merge_items(load_default_items(), spec)
    details = sizing_details(spec, gpu_tdp_w, gpu_memory_gib)
    items = tuple(_for_peers(_with_detail(item, details), spec.gpus.count, peer) for item in merged)
    return Checklist(
        spec_name=spec.name,
        description=spec.description,
        host=host or (facts.host if facts else None),
        gpu_model=spec.gpus.model,
        gpu_count=spec.gpus.count,
        generated=today or date.today(),
        items=items if facts is None else tuple(_observed(item, facts, peer) for item in items),
        facts_from=facts_from if facts else None,
        machine=machine_summary(facts) if facts else (),
    )


def _observed(item: ChecklistItem, facts: Facts, peer: PeerAccess | None) -> ChecklistItem:
    seen = observe(item.id, facts)
    if (
        item.id == ACS_ITEM
        and peer is not None
        and peer.supported is False
        and seen.status != "not-observable"
    ):
        # No P2P to redirect: the ACS and IOMMU readings are a decision for VMs and isolation.
        seen = Observation(
            status="observed", value=f"{peer.why}, so ACS does not decide P2P here; {seen.value}"
        )
    return item.model_copy(update={"observation": seen})


ACS_ITEM = "acs-iommu"
"""The checklist item whose promise (P2P between the GPUs) depends on the GPUs."""


def _for_peers(item: ChecklistItem, count: int, peer: PeerAccess | None) -> ChecklistItem:
    """The ACS/P2P item as it applies to these GPUs: one GPU has no P2P traffic, and GPUs whose
    driver offers no P2P (GeForce from Ada on) get no promise of ``topo -p2p r`` OK."""
    if item.id != ACS_ITEM:
        return item
    if count == 1:
        return item.model_copy(
            update={
                "detail": "One GPU: there is no GPU-to-GPU traffic for ACS to redirect; the IOMMU part "
                "applies to VMs and passthrough only."
            }
        )
    if peer is None or peer.supported is not False:
        return item
    return item.model_copy(
        update={
            "title": "Set ACS and the IOMMU for isolation only: these GPUs do no peer-to-peer",
            "how": "Keep ACS and the IOMMU (VT-d / AMD-Vi) as VMs, passthrough or device isolation need "
            "them; no firmware setting gives these GPUs P2P with NVIDIA's driver.",
            "detail": f"{peer.why} (source: {peer.source}): no GPU-to-GPU P2P whatever ACS and the IOMMU "
            "say; copies and NCCL go through host memory.",
            "check": "`nvidia-smi topo -p2p r` shows GNS (GPU not supported) between the GPUs, as expected "
            "on these GPUs; a 2-GPU `all_reduce_perf` finishes under a timeout (NCCL over host memory); "
            "`sudo lspci -vvv -s <bridge> | grep ACSCtl` for the record.",
        }
    )


def merge_items(defaults: tuple[ChecklistItem, ...], spec: Spec) -> tuple[ChecklistItem, ...]:
    """Replace defaults by id with the spec's items, append new ids, drop skipped ids.

    A replacing item keeps the default's ``check`` (the observable state of that id does not
    change with the wording); a new item gets :data:`SPEC_ITEM_CHECK`.

    Raises:
        SpecError: If ``bios.items`` repeats an id or ``bios.skip`` names an unknown id.
    """
    if problems := bios_problems(spec, defaults):
        raise SpecError([f"{_dotted(loc)}: {message}" for loc, message in problems])
    by_id = {item.id: item for item in defaults}
    for item in spec.bios.items:
        by_id[item.id] = _from_spec(item, by_id.get(item.id), spec.name)
    return tuple(item for item_id, item in by_id.items() if item_id not in spec.bios.skip)


def check_bios(spec: Spec, path: Path) -> None:
    """Refuse, located, what :func:`merge_items` would refuse in the ``bios:`` of the spec read from
    ``path``, so that ``validate`` says so, not only ``checklist``. Reads the file again only to
    locate a problem.

    Raises:
        SpecError: One ``file:line:column: bios...: message`` line per problem.
    """
    from provision.files import locate
    from provision.spec.document import read_spec_document

    problems = bios_problems(spec, load_default_items()) if spec.bios.items or spec.bios.skip else []
    if problems:
        document = read_spec_document(path)
        lines = []
        for loc, message in problems:
            line, col = locate(document, loc)
            lines.append(f"{path}:{line}:{col}: {_dotted(loc)}: {message}")
        raise SpecError(lines)


def bios_problems(spec: Spec, defaults: tuple[ChecklistItem, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """What :func:`merge_items` refuses in ``spec.bios``, each with its location in the spec (the
    spec loader prints it ``file:line:column``): an id that ``bios.items`` repeats, and an id in
    ``bios.skip`` that neither the defaults nor ``bios.items`` define. Empty when there is none."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    seen: set[str] = set()
    for n, item in enumerate(spec.bios.items):
        if item.id in seen:
            problems.append((("bios", "items", n, "id"), f"duplicate checklist item id {item.id!r}"))
        seen.add(item.id)
    known = list(dict.fromkeys([*(item.id for item in defaults), *seen]))
    for n, item_id in enumerate(spec.bios.skip):
        if item_id not in known:
            hint = did_you_mean(item_id, known) or f"; valid ids: {', '.join(known)}"
            problems.append((("bios", "skip", n), f"unknown checklist item id {item_id!r}{hint}"))
    return problems


def _dotted(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _from_spec(item: BiosItem, replaced: ChecklistItem | None, spec_name: str) -> ChecklistItem:
    check = replaced.check if replaced else SPEC_ITEM_CHECK
    return ChecklistItem(**item.model_dump(), check=check, source=f"spec {spec_name}")


def _duplicates(ids: Iterable[str]) -> list[str]:
    return sorted(item_id for item_id, n in Counter(ids).items() if n > 1)


def _with_detail(item: ChecklistItem, details: Mapping[str, str]) -> ChecklistItem:
    detail = details.get(item.id)
    return item if detail is None else item.model_copy(update={"detail": detail})


def psu_watts(gpu_count: int, gpu_tdp_w: int) -> int:
    """Minimum PSU rating in watts: ``ceil((count x TDP + 400 W) x 1.25)``.

    The 400 W platform allowance and the 1.25 margin are this project's conservative rule,
    not a vendor specification. Example: 2 x 300 W gives (600 + 400) x 1.25 = 1250 W.
    """
    return math.ceil((gpu_count * gpu_tdp_w + PLATFORM_ALLOWANCE_W) * PSU_MARGIN)


def sizing_details(spec: Spec, gpu_tdp_w: int | None, gpu_memory_gib: float | None) -> dict[str, str]:
    """Computed text for the sizing items, keyed by item id (``psu-sizing``, ``host-memory``, ``cooling``)."""
    details = {
        "psu-sizing": _psu_detail(spec.gpus.count, gpu_tdp_w),
        "host-memory": _memory_detail(spec.gpus.count, gpu_memory_gib),
    }
    cooling = _cooling_detail(spec)
    if cooling:
        details["cooling"] = cooling
    return details


def _psu_detail(count: int, tdp_w: int | None) -> str:
    if tdp_w is None:
        return (
            f"{count} x {_gpu_word(count)}: TDP unknown in catalog; take the board power from the "
            f"GPU's product brief and apply (count x TDP + {PLATFORM_ALLOWANCE_W} W) x {PSU_MARGIN}."
        )
    gpus_w = count * tdp_w
    return (
        f"{count} x {tdp_w} W = {gpus_w} W GPUs + {PLATFORM_ALLOWANCE_W} W platform = "
        f"{gpus_w + PLATFORM_ALLOWANCE_W} W; x {PSU_MARGIN} = {psu_watts(count, tdp_w)} W minimum PSU rating."
    )


def _memory_detail(count: int, memory_gib: float | None) -> str:
    if memory_gib is None:
        return f"{count} x {_gpu_word(count)}: memory unknown in catalog; use the product brief's figure."
    total = count * memory_gib
    recommended = total * HOST_MEMORY_RECOMMENDED_FACTOR
    return (
        f"{count} x {memory_gib:g} GiB = {total:g} GiB GPU memory: install at least {total:g} GiB "
        f"host RAM, {recommended:g} GiB recommended."
    )


def _cooling_detail(spec: Spec) -> str | None:
    limits = [
        f"{label} ≤ {value:g} °C"
        for label, value in (("GPU", spec.verify.max_gpu_temp_c), ("memory", spec.verify.max_memory_temp_c))
        if value is not None
    ]
    return f"Spec verify thresholds: {', '.join(limits)}." if limits else None


def _gpu_word(count: int) -> str:
    return "GPU" if count == 1 else "GPUs"
