"""P2P between the GPUs, and the checklist's ACS/P2P item and the planner's ACS warning tailored to it.

GeForce cards from Ada on get no peer access from NVIDIA's driver (catalog source P2P-GEFORCE), so a
4x RTX 4090 box is never promised ``nvidia-smi topo -p2p r`` OK. The verdict comes from the
catalog's model for a GPU nvidia-smi names, else from nvidia-smi -q's Product Brand and
Architecture (a GeForce card the catalog does not list), else from the spec's model: the cases below
edit the synthesized two-GPU FF-14 host (ACS redirecting on both bridges) into each.
"""

from __future__ import annotations

from datetime import date

import pytest

from provision.checklist.items import checklist_for
from provision.detect.facts import Facts, Hardware
from provision.detect.peer import peer_access
from provision.detect.runner import facts_from_raw
from provision.plan.planner import make_plan
from provision.spec.models import Spec
from tests.unit.factories import CATALOG, ROOT, fresh_ubuntu, spec

SYNTH_FF14 = ROOT / "tests" / "fixtures" / "hardware" / "synth-2gpu-ff14"
PROMISE = "`nvidia-smi topo -p2p r` reports OK between GPUs"


def _host(name: str, brand: str | None, architecture: str | None) -> Facts:
    """The FF-14 host with its two GPUs renamed and their nvidia-smi -q product facts set."""
    facts = facts_from_raw(SYNTH_FF14).model_copy(update={"os": fresh_ubuntu().os})
    assert isinstance(facts.hardware, Hardware) and isinstance(facts.hardware.pci, tuple)
    assert isinstance(facts.gpus, tuple)
    pci = tuple(
        g.model_copy(update={"product_brand": brand, "product_architecture": architecture})
        for g in facts.hardware.pci
    )
    gpus = tuple(g.model_copy(update={"name": name}) for g in facts.gpus)
    return facts.model_copy(update={"hardware": facts.hardware.model_copy(update={"pci": pci}), "gpus": gpus})


def _acs_item(s: Spec, facts: Facts | None = None) -> tuple[str, str | None, str | None]:
    """(check, detail, observed status) of the acs-iommu item of ``s``'s checklist (its title says
    P2P only where the GPUs do it)."""
    peer = peer_access(facts, CATALOG, s.gpus.model)
    items = checklist_for(s, 450, 24, today=date(2026, 12, 1), facts=facts, peer=peer).items
    item = next(i for i in items if i.id == "acs-iommu")
    assert ("peer-to-peer bypass ACS" in item.title) is (PROMISE in item.check)
    return item.check, item.detail, item.observation.status if item.observation else None


def test_a_4x_rtx_4090_spec_gets_no_promise_of_p2p_on_paper() -> None:
    check, detail, _ = _acs_item(spec(gpus__model="rtx-4090", gpus__count=4))
    assert PROMISE not in check
    assert check.startswith("`nvidia-smi topo -p2p r` shows GNS (GPU not supported) between the GPUs")
    assert detail is not None and detail.startswith(
        "NVIDIA's driver offers no P2P on the NVIDIA GeForce RTX 4090"
    )
    assert "https://github.com/tinygrad/open-gpu-kernel-modules" in detail


@pytest.mark.parametrize(("model", "count"), [("a100x", 2), ("h200-sxm", 8), ("rtx-6000-ada", 2)])
def test_gpus_that_do_or_may_do_p2p_keep_the_item_as_written(model: str, count: int) -> None:
    check, detail, _ = _acs_item(spec(gpus__model=model, gpus__count=count))
    assert PROMISE in check and detail is None


def test_one_gpu_is_told_there_is_no_gpu_to_gpu_traffic() -> None:
    _, detail, _ = _acs_item(spec(gpus__model="h200-sxm", gpus__count=1))
    assert detail is not None and detail.startswith(
        "One GPU: there is no GPU-to-GPU traffic for ACS to redirect"
    )


@pytest.mark.parametrize(
    ("name", "brand", "architecture", "supported"),
    [
        ("NVIDIA GeForce RTX 4090", "GeForce", "Ada Lovelace", False),  # the catalog's model says so
        ("NVIDIA GeForce RTX 4080 SUPER", "GeForce", "Ada Lovelace", False),  # not in the catalog: its brand
        ("NVIDIA GeForce RTX 5080", "GeForce", "Blackwell", False),
        ("NVIDIA GeForce RTX 3090", "GeForce", "Ampere", None),  # reports disagree (NVIDIA/nccl#1127)
        ("NVIDIA L40S", "NVIDIA", "Ada Lovelace", True),  # the catalog's data center model
        ("NVIDIA H200", "NVIDIA", "Hopper", True),
    ],
)
def test_p2p_is_judged_from_the_model_then_the_product_facts(
    name: str, brand: str, architecture: str, supported: bool | None
) -> None:
    assert peer_access(_host(name, brand, architecture), CATALOG, None).supported is supported


def test_the_product_facts_decide_for_a_geforce_card_the_catalog_does_not_know() -> None:
    facts = _host("NVIDIA GeForce RTX 4080 SUPER", "GeForce", "Ada Lovelace")
    peer = peer_access(facts, CATALOG, "l40s")  # the spec's model is not what the machine has
    assert peer.why == "NVIDIA's driver offers no P2P on GeForce Ada Lovelace GPUs (0000:01:00.0)"
    check, detail, status = _acs_item(spec(gpus__model="l40s", gpus__count=2), facts)
    assert PROMISE not in check and detail is not None
    assert status == "observed"  # ACS redirecting is no P2P problem where there is no P2P


def test_the_planner_warns_of_acs_only_where_the_gpus_do_p2p() -> None:
    for name, brand, arch, warned in (
        ("NVIDIA L40S", "NVIDIA", "Ada Lovelace", True),
        ("NVIDIA GeForce RTX 4080 SUPER", "GeForce", "Ada Lovelace", False),
    ):
        rules = [f.rule for f in make_plan(spec(), _host(name, brand, arch), CATALOG).warnings]
        assert ("acs-redirects-p2p" in rules) is warned, name


def test_nvidia_smi_q_product_facts_reach_the_pci_devices() -> None:
    facts = facts_from_raw(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01")
    assert isinstance(facts.hardware, Hardware) and isinstance(facts.hardware.pci, tuple)
    assert {(g.product_brand, g.product_architecture) for g in facts.hardware.pci} == {("NVIDIA", "Hopper")}
