"""The GPUs are what the catalog says the spec's model is: their memory, and a BAR1 that maps it.

Sources: the catalog's GPU rows (``provision/catalog/data/gpus.yaml``, each with its source);
nvidia-smi reports memory.total within about 1% below the SKU's nominal size (H200 "141GB":
143771 MiB, tests/fixtures/raw/h200-ubuntu2404-spec); BAR1 as in the checklist's items
above-4g-decoding and resizable-bar (``provision/catalog/data/bios.yaml``).
"""

from __future__ import annotations

from provision.catalog import Catalog
from provision.detect.facts import Facts, Unknown
from provision.invariants.base import Invariant, Verdict
from provision.spec.models import Spec

MEMORY_LOW = 0.97
"""Smallest memory.total / nominal accepted: the driver reserves a little (H200: 0.996). The same
fraction as verify's ``gpu-memory`` check (``verify.yaml`` defaults.memory_fraction; a test keeps
them equal), which proves this invariant after apply."""
MEMORY_HIGH = 1.01
SMALL_BAR1_MIB = 256
"""BAR1 of a GPU whose large aperture was not mapped above 4 GiB."""


class GpuMemory(Invariant):
    """Each GPU shows the memory of the spec's model."""

    id = "gpu-memory"
    title = "GPU memory as the catalog says"
    layer = "gpu"
    source = "catalog gpus.yaml memory_gib (per model, with its source); nvidia-smi memory.total"
    reads = ("gpus",)
    severity = "warning"
    verify_check = "gpu-memory"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        model = catalog.gpu(spec.gpus.model)
        if model is None:
            return self.not_applicable(f"{spec.gpus.model} is not in the catalog")
        if isinstance(facts.gpus, Unknown):
            return self.unknown(facts.gpus)
        nominal = model.memory_gib * 1024
        sizes = {g.index: g.memory_total_mib for g in facts.gpus if g.memory_total_mib is not None}
        if not sizes:
            return self.unknown("nvidia-smi reported no memory.total")
        off = {i: m for i, m in sizes.items() if not MEMORY_LOW * nominal <= m <= MEMORY_HIGH * nominal}
        seen = ", ".join(f"gpu{i} {m} MiB" for i, m in sorted((off or sizes).items()))
        if not off:
            return self.holds(f"{seen} (catalog: {model.name} {model.memory_gib} GB)")
        mig = [g.index for g in facts.gpus if g.mig_mode]
        cause = (
            f"MIG is enabled on gpu{mig[0]}" if mig else f"these are not {model.name} ({model.memory_gib} GB)"
        )
        return self.violated(
            seen,
            cause,
            "disable MIG (nvidia-smi -mig 0) and reset the GPU"
            if mig
            else f"set gpus.model to the installed model, or install {model.name}",
        )


class Bar1MapsMemory(Invariant):
    """Each GPU's BAR1 aperture covers its memory (large or resizable BAR mapped above 4 GiB)."""

    id = "bar1-maps-memory"
    title = "BAR1 at least the GPU memory"
    layer = "firmware"
    source = "checklist items above-4g-decoding and resizable-bar (provision/catalog/data/bios.yaml)"
    reads = ("hardware",)
    severity = "warning"
    checklist = ("above-4g-decoding", "resizable-bar")

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        hw = facts.hardware
        gpus = hw if isinstance(hw, Unknown) else hw.gpus
        if isinstance(gpus, Unknown):
            return self.unknown(gpus)
        pairs = [
            (g.bdf, g.bar1_total_mib, g.memory_total_mib)
            for g in gpus
            if isinstance(g.bar1_total_mib, int) and isinstance(g.memory_total_mib, int)
        ]
        if not pairs:
            reason = next((g.bar1_total_mib for g in gpus if isinstance(g.bar1_total_mib, Unknown)), None)
            return self.unknown(reason or "no GPU with BAR1 and memory totals")
        small = [(b, bar, mem) for b, bar, mem in pairs if bar < mem]
        if not small:
            return self.holds(", ".join(f"{b} BAR1 {bar} MiB >= {mem} MiB" for b, bar, mem in pairs))
        observed = ", ".join(f"{b} BAR1 {bar} MiB < memory {mem} MiB" for b, bar, mem in small)
        if any(bar <= SMALL_BAR1_MIB for _, bar, _ in small):
            return self.violated(
                observed,
                "the large BAR was not mapped above 4 GiB",
                "enable Above 4G decoding (and Resizable BAR) in the firmware: checklist items "
                "above-4g-decoding, resizable-bar",
            )
        return self.violated(
            observed,
            "BAR1 smaller than the memory: Resizable BAR off or limited by the firmware",
            "enable Resizable BAR in the firmware: checklist item resizable-bar",
        )
