"""Whether NVIDIA's driver offers GPU peer-to-peer (P2P) access between the machine's GPUs.

One judgment for the checklist's ACS/P2P item and the planner's ACS warning: ACS redirection only
matters where the driver would do P2P at all. Read, per GPU, from the catalog's model
(``gpus.yaml`` ``p2p``, each with its source) for the GPUs nvidia-smi names; for a GPU the catalog
does not know, from ``nvidia-smi -q``'s product facts (Product Brand, Product Architecture) against
:data:`NO_P2P_FROM`; without facts, from the spec's model. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field

from provision.catalog import Architecture, Catalog
from provision.catalog.models import GpuModel
from provision.detect.facts import Facts, Unknown
from provision.models import Frozen

ARCHITECTURES = {
    "Maxwell": Architecture.MAXWELL,
    "Pascal": Architecture.PASCAL,
    "Volta": Architecture.VOLTA,
    "Turing": Architecture.TURING,
    "Ampere": Architecture.AMPERE,
    "Ada Lovelace": Architecture.ADA,
    "Hopper": Architecture.HOPPER,
    "Blackwell": Architecture.BLACKWELL,
}
"""``nvidia-smi -q`` Product Architecture -> the catalog's architecture."""

NO_P2P_FROM: dict[str, tuple[Architecture, tuple[str, ...]]] = {
    "GeForce": (Architecture.ADA, ("P2P-GEFORCE",))
}
"""Product Brand -> the first architecture from which NVIDIA's driver offers that brand no P2P, and
the source keys: GeForce from Ada on (RTX 4060 Ti, 4090, 5090 report no peer access with NVIDIA's
driver). Earlier GeForce generations are left unknown: reports on the RTX 3090 disagree
(NVIDIA/nccl#1127)."""


class PeerAccess(Frozen):
    """The verdict: P2P offered (True), not offered (False) or not known (None), why, and its source."""

    supported: bool | None
    why: str
    source: str = Field("", description="The documents behind the verdict, each with its URL.")


def peer_access(facts: Facts | None, catalog: Catalog, model_id: str | None) -> PeerAccess:
    """P2P between the GPUs of ``facts`` (each GPU judged; one without P2P decides), else of the
    spec's ``model_id``."""
    verdicts = list(_seen(facts, catalog)) if facts is not None else []
    if not verdicts and (model := catalog.gpu(model_id or "")) is not None:
        verdicts = [_of_model(model, catalog)]
    denied = [v for v in verdicts if v.supported is False]
    if denied:
        return denied[0]
    if verdicts and all(v.supported for v in verdicts):
        return verdicts[0]
    unknown = [v for v in verdicts if v.supported is None]
    return unknown[0] if unknown else PeerAccess(supported=None, why="no GPU model known")


def _seen(facts: Facts, catalog: Catalog) -> Iterator[PeerAccess]:
    """One verdict per GPU nvidia-smi names with a catalog model, and per GPU whose product facts say."""
    named = [] if isinstance(facts.gpus, Unknown) else facts.gpus
    for gpu in named:
        model = catalog.gpu_by_smi_name(gpu.name)
        if model is not None and model.p2p.supported is not None:
            yield _of_model(model, catalog)
    hardware = facts.hardware
    pci = () if isinstance(hardware, Unknown) or isinstance(hardware.gpus, Unknown) else hardware.gpus
    for device in pci:
        arch = ARCHITECTURES.get(device.product_architecture or "")
        rule = NO_P2P_FROM.get(device.product_brand or "")
        if arch is not None and rule is not None and arch.rank >= rule[0].rank:
            yield PeerAccess(
                supported=False,
                why=f"NVIDIA's driver offers no P2P on {device.product_brand} {device.product_architecture} "
                f"GPUs ({device.bdf})",
                source=_opened(catalog, rule[1]),
            )


def _of_model(model: GpuModel, catalog: Catalog) -> PeerAccess:
    said = {
        True: "NVIDIA's driver offers",
        False: "NVIDIA's driver offers no",
        None: "no public statement on",
    }
    return PeerAccess(
        supported=model.p2p.supported,
        why=f"{said[model.p2p.supported]} P2P on the {model.name}",
        source=_opened(catalog, model.p2p.source),
    )


def _opened(catalog: Catalog, keys: tuple[str, ...]) -> str:
    """The sources as a user opens them: each document's name and its URL."""
    found = [catalog.sources[k] for k in keys if k in catalog.sources]
    return "; ".join(f"{s.cite} ({s.url})" if s.url else s.cite for s in found)
