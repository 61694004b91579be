"""The MIG catalog (``data/mig.yaml``): each MIG-capable GPU product's GPU instance profiles, with
the slices each takes and how many fit, keyed by PCI device id and by the catalog's GPU ids.

Public API::

    from provision.catalog.mig import load_mig
    mig = load_mig()                                  # cached; raises CatalogError naming the problem
    mig.for_device("2335").profile("1g.18gb").max    -> 7
    mig.for_model("a100-pcie-80gb").id               -> "a100-h100-80gb"
    product.layout_problem({"3g.40gb": 2, "1g.10gb": 1})
        -> "needs 9 of the 8 memory slices"

Sources: NVIDIA MIG User Guide "Supported MIG Profiles" and "Supported GPUs"; NVIDIA/mig-parted
deployments/systemd/config-default.yaml (``data/sources.yaml``: MIG-PROFILES, MIG-GPUS, MIG-PARTED).
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import Field

from provision.catalog.models import Sourced
from provision.catalog.tables import DATA_DIR, SourcesFile, _check_sources, _load
from provision.errors import CatalogError
from provision.models import Frozen
from provision.versions import Dotted


class MigProfile(Frozen):
    """One GPU instance profile: its compute and memory slices and how many instances fit."""

    name: str
    compute: int = Field(ge=1, le=8)
    memory: int = Field(ge=1, le=8)
    max: int = Field(ge=1, le=8)


class MigProduct(Sourced):
    """One MIG-capable GPU product and its profiles."""

    id: str
    name: str
    gpus: tuple[str, ...]
    pci_device_ids: tuple[str, ...]
    compute_slices: int = Field(ge=1, le=8)
    memory_slices: int = Field(ge=1, le=8)
    profiles: tuple[MigProfile, ...]
    balanced: dict[str, int] = Field(description="mig-parted's all-balanced layout for this product.")

    def named(self, config: str) -> dict[str, int] | None:
        """A mig-parted layout name as this product's layout (profile -> count), None when the
        product has no such layout: ``all-balanced``, ``all-enabled`` (no instances),
        ``all-<profile>`` (as many as the product has), ``all-<profile>.me`` (its one +me)."""
        if config == "all-balanced":
            return dict(self.balanced)
        if config == "all-enabled":
            return {}
        name = config.removeprefix("all-")
        name = f"{name.removesuffix('.me')}+me" if name.endswith(".me") else name
        found = self.profile(name)
        return {found.name: found.max} if found is not None else None

    def profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.profiles if p.name == name), None)

    def names(self) -> str:
        """The profile names, comma separated, in the catalog's order."""
        return ", ".join(p.name for p in self.profiles)

    def layout_problem(self, layout: dict[str, int]) -> str | None:
        """Why ``layout`` (profile -> count) cannot be made on this product, None when it can.

        Checks what holds for every placement: each profile known and within its instances
        available, and the compute and memory slices summed within the GPU's. Where slices fit
        but the placement does not (NVML's possible placements), nvidia-smi refuses at apply.
        """
        for name, count in layout.items():
            found = self.profile(name)
            if found is None:
                return f"{name} is not a MIG profile of the {self.name}; its profiles: {self.names()}"
            if count > found.max:
                return (
                    f"{count} x {name} is more than the {found.max} instance(s) of {name} the {self.name} has"
                )
        compute = sum(self._of(n).compute * c for n, c in layout.items())
        memory = sum(self._of(n).memory * c for n, c in layout.items())
        if compute > self.compute_slices:
            return f"needs {compute} of the {self.compute_slices} compute slices of the {self.name}"
        if memory > self.memory_slices:
            return f"needs {memory} of the {self.memory_slices} memory slices of the {self.name}"
        return None

    def _of(self, name: str) -> MigProfile:
        found = self.profile(name)
        assert found is not None
        return found


class MigCatalog(Frozen):
    """Every MIG-capable product."""

    min_compute_capability: Dotted
    unsourced: dict[str, str] = Field(default_factory=dict)
    products: tuple[MigProduct, ...]

    def for_device(self, device_id: str | None) -> MigProduct | None:
        """The product of a PCI device id (lower-case hex, ``2335``), None when it has no MIG here."""
        return next((p for p in self.products if device_id in p.pci_device_ids), None)

    def for_model(self, model: str) -> MigProduct | None:
        """The product of a catalog GPU id (spec ``gpus.model``), None when it has no MIG here."""
        return next((p for p in self.products if model in p.gpus), None)


@functools.cache
def load_mig(directory: Path = DATA_DIR) -> MigCatalog:
    """The MIG catalog, validated and its source keys checked once per process.

    Raises:
        CatalogError: If the file is invalid, names an undefined source or repeats a device id.
    """
    data = _load(directory, "mig.yaml", MigCatalog)
    sources = _load(directory, "sources.yaml", SourcesFile).sources
    _check_sources("mig.yaml", data, sources)
    ids = [d for p in data.products for d in p.pci_device_ids]
    if len(ids) != len(set(ids)):
        raise CatalogError("catalog file mig.yaml: a PCI device id in two products")
    return data
