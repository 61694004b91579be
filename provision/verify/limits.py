"""Thresholds of ``provision verify``: ``catalog/data/verify.yaml``, spec overrides, derived formulas.

Resolution order for each threshold (the report names the one used): the spec's ``verify:``
section, then the GPU model's row in ``verify.yaml``, then its ``defaults`` (a fixed value, or a
fraction of a derived figure such as the PCIe link rate).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from provision.catalog.prebuilt import read_data
from provision.errors import CatalogError
from provision.models import Frozen
from provision.spec.models import ThresholdName, VerifySpec

VERIFY_YAML = Path(__file__).parents[1] / "catalog" / "data" / "verify.yaml"

PCIE_GT_PER_LANE = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
"""Transfer rate per lane in GT/s per PCIe generation (PCI-SIG Base Specification)."""

PCIE_ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}
"""Payload fraction of the line code: 8b/10b (Gen1-2), 128b/130b (Gen3-5), 242B/256B FLITs (Gen6)."""

ModelKey = ThresholdName
"""A per-GPU-model threshold: the same keys the spec's ``verify.sources`` may explain."""


class Row(Frozen):
    """One sourced threshold value."""

    value: float
    source: tuple[str, ...] = Field(min_length=1)
    conf: Literal["P", "S", "U"]
    note: str | None = None


class Cite(Frozen):
    """A source: what it holds (``cite``) and what the report prints so a user can open it (``ref``:
    a public URL, a ``docs/`` path of this repository, or a named public document)."""

    cite: str
    ref: str = Field(min_length=1)


class Defaults(Frozen):
    """Fractions and fixed values used when neither the spec nor the model row gives one."""

    pcie_efficiency: Row
    p2p_efficiency: Row
    allreduce_efficiency: Row
    bf16_peak_fraction: Row
    nvlink_p2p_fraction: Row
    nvlink_allreduce_fraction: Row
    host_copy_efficiency: Row
    allreduce_host_efficiency: Row
    memory_fraction: Row
    max_gpu_temp_c: Row
    max_memory_temp_c: Row
    max_fp32_rel_error: Row
    max_bf16_rel_error: Row


class ModelRows(Frozen):
    """Per-GPU-model thresholds (keys as in :data:`ModelKey`); absent means "use the default"."""

    min_h2d_gbps: Row | None = None
    min_d2h_gbps: Row | None = None
    min_bf16_tflops: Row | None = None
    min_p2p_gbps: Row | None = None
    min_allreduce_busbw_gbps: Row | None = None
    max_gpu_temp_c: Row | None = None
    max_memory_temp_c: Row | None = None


class Limits(Frozen):
    """The parsed ``verify.yaml``; every source key a row names is defined in ``sources``."""

    sources: dict[str, Cite]
    defaults: Defaults
    models: dict[str, ModelRows] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sources_defined(self) -> Limits:
        rows = [*self.defaults.__dict__.values()]
        rows += [r for m in self.models.values() for r in m.__dict__.values() if r is not None]
        missing = sorted({k for r in rows for k in r.source} - set(self.sources))
        if missing:
            raise ValueError(f"source key(s) {missing} not defined under sources")
        return self

    def model_row(self, model: str, key: ModelKey) -> Row | None:
        """The row of GPU ``model`` for ``key``, or None."""
        rows = self.models.get(model)
        row: Row | None = getattr(rows, key) if rows is not None else None
        return row


class Resolved(Frozen):
    """A threshold value with the named origin, e.g. ``spec verify.min_h2d_gbps``."""

    value: float
    source: str


def load_limits(path: Path = VERIFY_YAML) -> Limits:
    """Read and validate ``verify.yaml``.

    Raises:
        CatalogError: Unreadable YAML, a row failing its model, or an undefined source key.
    """
    data = read_data(path)
    try:
        return Limits.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CatalogError(f"catalog file {path}: {problems}") from None


@functools.cache
def shipped_limits() -> Limits:
    """The shipped ``verify.yaml``, loaded once per process."""
    return load_limits()


def pcie_gbps(gen: int, width: int) -> float:
    """Per-direction PCIe payload rate in GB/s: GT/s per lane x lanes x encoding / 8 bits.

    Gen5 x16: 32 x 16 x 128/130 / 8 = 63.0 GB/s (before TLP headers); Gen4 x16: 31.5 GB/s.

    Raises:
        KeyError: For a generation outside 1-6.
    """
    return PCIE_GT_PER_LANE[gen] * width * PCIE_ENCODING[gen] / 8


def _cite(limits: Limits, row: Row) -> str:
    return "; ".join(limits.sources[key].ref for key in row.source)


def resolve(
    limits: Limits,
    verify: VerifySpec,
    model: str,
    key: ModelKey,
    derived: Resolved | None = None,
) -> Resolved | None:
    """The threshold ``key``: spec override, else the model's row, else ``derived``.

    Args:
        derived: The fallback (a default or a formula) with its description; None: no threshold.
    """
    spec = spec_override(verify, key)
    if spec is not None:
        return spec
    row = limits.model_row(model, key)
    if row is not None:
        return Resolved(value=row.value, source=f"verify.yaml {model}.{key} ({_cite(limits, row)})")
    return derived


def default(limits: Limits, name: str) -> Resolved:
    """A fixed default from ``verify.yaml`` ``defaults``, named with its sources."""
    row: Row = getattr(limits.defaults, name)
    return Resolved(value=row.value, source=f"verify.yaml defaults.{name} ({_cite(limits, row)})")


def link_fraction(limits: Limits, name: str, gen: int, width: int) -> Resolved:
    """``defaults.<name>`` x the PCIe Gen ``gen`` x ``width`` rate, with the formula as source:
    ``derived: 0.80 x PCIe Gen4 x16 31.5 GB/s; pcie_efficiency: <its sources>``, as
    :func:`fraction_of` writes it (a source's own aside, ``(PCI-SIG)``, is never inside another)."""
    row: Row = getattr(limits.defaults, name)
    rate = pcie_gbps(gen, width)
    formula = f"{row.value:.2f} x PCIe Gen{gen} x{width} {rate:.1f} GB/s"
    source = f"derived: {formula}; {name}: {_cite(limits, row)}"
    return Resolved(value=row.value * rate, source=source)


def spec_override(verify: VerifySpec, key: ModelKey) -> Resolved | None:
    """The spec's ``verify.<key>``, named with the derivation the spec gives in ``verify.sources``."""
    value: float | None = getattr(verify, key)
    if value is None:
        return None
    why = verify.sources.get(key)
    return Resolved(value=value, source=f"spec verify.{key}" + (f": {why}" if why else ""))


def fraction_of(limits: Limits, name: str, figure: float, unit: str, what: str) -> Resolved:
    """``defaults.<name>`` x a published ``figure``, with the derivation as source.

    ``what`` names the figure and its document, e.g. ``dense bf16 (catalog gpus.yaml h200-sxm: <url>)``;
    the source reads ``derived: 0.60 x 989.5 TFLOP/s dense bf16 (...); fraction: <its sources>``.
    """
    row: Row = getattr(limits.defaults, name)
    source = f"derived: {row.value:.2f} x {figure:g} {unit} {what}; {name}: {_cite(limits, row)}"
    return Resolved(value=row.value * figure, source=source)
