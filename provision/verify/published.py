"""Floors derived from a GPU model's published figures (``catalog/data/gpus.yaml`` ``peaks``, ``nvlink``).

Each floor is a fraction from ``verify.yaml`` (justified there by the H200 measurements) times a
figure from the model's datasheet; the source names both, e.g. ``derived: 0.60 x 989.5 TFLOP/s
dense bf16 (catalog gpus.yaml h200-sxm peaks: <datasheet URL>); bf16_peak_fraction: ...``.
"""

from __future__ import annotations

from provision.catalog import Catalog, GpuModel
from provision.catalog.models import Sourced
from provision.verify.limits import Limits, Resolved, fraction_of


def document(catalog: Catalog, row: Sourced) -> str:
    """The first source of ``row`` as a user opens it: its URL, else the document's name."""
    source = catalog.sources[row.source[0]]
    return source.url or source.cite.split(":")[0]


def bf16_floor(catalog: Catalog, limits: Limits, model: GpuModel) -> Resolved | None:
    """``bf16_peak_fraction`` x the published dense bf16 peak; None where none is published."""
    peak = model.peaks.bf16_dense_tflops
    if peak is None:
        return None
    what = f"dense bf16 (catalog gpus.yaml {model.id} peaks: {document(catalog, model.peaks)})"
    return fraction_of(limits, "bf16_peak_fraction", peak, "TFLOP/s", what)


def unpublished_bf16(model: GpuModel | None, model_id: str) -> str:
    """Why there is no bf16 floor: the catalog's reason, or the model is not in the catalog."""
    if model is None:
        return f"no floor: {model_id} is not in the catalog"
    return f"no published figure for {model.id}: {model.peaks.unpublished}"


def nvlink_floor(catalog: Catalog, limits: Limits, model: GpuModel, name: str) -> Resolved | None:
    """``defaults.<name>`` x the per-direction NVLink rate of a bridge or switch model, else None."""
    link = model.nvlink
    rate = link.per_direction_gbps
    if link.kind not in ("bridge", "switch") or rate is None:
        return None
    where = f"catalog gpus.yaml {model.id} nvlink: {document(catalog, link)}"
    what = f"per direction, NVLink {link.kind} ({where})"
    return fraction_of(limits, name, rate, "GB/s", what)


def c2c_floor(catalog: Catalog, limits: Limits, model: GpuModel) -> Resolved | None:
    """Host copies over NVLink-C2C (GH200): ``pcie_efficiency`` x its per-direction rate, else None."""
    link = model.nvlink
    rate = link.per_direction_gbps
    if link.kind != "c2c" or rate is None:
        return None
    what = f"per direction, NVLink-C2C (catalog gpus.yaml {model.id} nvlink: {document(catalog, link)})"
    return fraction_of(limits, "pcie_efficiency", rate, "GB/s", what)


def is_uncertain(model: GpuModel | None, limit: Resolved, derived: Resolved | None) -> bool:
    """Whether ``limit`` is the derived floor of a figure marked conf U (a miss then warns)."""
    return model is not None and limit is derived and model.peaks.conf == "U"
