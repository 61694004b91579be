"""The fact registry: every fact detection runs, and the one function that turns outputs into Facts.

Adding a fact: a Fact class in its domain module (:mod:`provision.detect.domains`), listed in
that module's ``FACTS``, and, if it feeds a :class:`~provision.detect.facts.Facts` field, an
entry in its ``FIELDS`` plus the field on ``Facts``. Nothing else names it: probes, raw files,
remote detection and the parser tests all iterate over :data:`FACTS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from provision.detect.domains import (
    containers,
    cuda,
    driver,
    gpu,
    gpu_runtime,
    hardware,
    identity,
    monitoring,
    os_kernel,
    packages,
    python,
    service,
)
from provision.detect.fact import Derive, FactType, Parsed, Probe
from provision.detect.facts import Facts
from provision.detect.raw import ProbeOutput

_DOMAINS = (
    os_kernel,
    driver,
    packages,
    gpu,
    cuda,
    python,
    hardware,
    service,
    monitoring,
    containers,
    gpu_runtime,
    identity,
)

FACTS: tuple[FactType, ...] = tuple(f for domain in _DOMAINS for f in domain.FACTS)
"""Every fact of a detection, in probe order. Probe ids are unique (a test checks it)."""

EXTRA_FACTS: tuple[FactType, ...] = (driver.FabricManagerVersionFact, python.VenvSearchFact)
"""Facts not part of :class:`Facts`, parsed by the same code: the fabric manager's version (read by
verify) and the venvs on the machine (read by ``provision import``)."""

FIELDS: dict[str, Derive] = {name: derive for domain in _DOMAINS for name, derive in domain.FIELDS.items()}
"""Each Facts field and how it is derived from the parsed outputs."""

CHECKLIST_FACTS: tuple[FactType, ...] = (
    gpu.QueryGpuFact,
    gpu.TopologyFact,
    gpu.SmiQueryFact,
    cuda.CudaDirsFact,
    cuda.NvccFact,
    *hardware.FACTS,
)
"""What ``provision checklist --host`` probes: GPUs, topology and hardware, not packages or the venv."""

BY_ID: dict[str, FactType] = {f.id: f for f in (*FACTS, *EXTRA_FACTS)}
"""Fact class per probe id (and per alias, for older captures)."""
BY_ID |= {alias: f for f in FACTS for alias in f.aliases}


def all_probes(venv: str | None = None) -> list[Probe]:
    """Every probe detection runs; the venv facts only when a venv is given."""
    return [probe for fact in FACTS if (probe := fact.probe(venv)) is not None]


def probes_of(facts: tuple[FactType, ...], venv: str | None = None) -> list[Probe]:
    """The probes of ``facts`` (a subset of the registry, e.g. for the checklist)."""
    return [probe for fact in facts if (probe := fact.probe(venv)) is not None]


def facts_from_outputs(
    outputs: Mapping[str, ProbeOutput],
    host: str = "localhost",
    collected_at: datetime | None = None,
    venv: str | None = None,
) -> Facts:
    """Parse probe outputs (keyed by probe id) into Facts: each output once, by its fact.

    ``venv`` names the venv a capture's torch output came from when the output itself does
    not say (captures that imported torch); the torch probe prints it. A field whose
    probes are absent keeps its "not probed" default (``driver_on_disk`` None, ``torch`` and
    ``venv`` Unknown "no venv given", the surroundings Unknown "not probed").
    """
    parsed = Parsed(outputs, FACTS, venv=venv)
    fields: dict[str, Any] = {name: derive(parsed) for name, derive in FIELDS.items()}
    present = {name: value for name, value in fields.items() if value is not None}
    return Facts(host=host, collected_at=collected_at, **present)
