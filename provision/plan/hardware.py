"""Hardware facts that Linux can measure but not fix: ACS/IOMMU, NUMA placement, PCIe link, topology.

They become warnings with the measured value and the checklist item that says what to change
in the firmware or the chassis (field failures FF-14 to FF-16).
"""

from __future__ import annotations

from collections.abc import Iterator

from provision.catalog import Catalog
from provision.detect.facts import Facts, Unknown
from provision.detect.peer import peer_access
from provision.fieldfailures import ff_ref
from provision.plan.models import Finding
from provision.spec.models import Spec

"""nvidia-smi topo -m path classes from best to worst (its legend)."""


def hardware_findings(spec: Spec, facts: Facts, catalog: Catalog) -> tuple[Finding, ...]:
    """Warnings for ACS redirection, GPUs across NUMA nodes, degraded links and slow GPU paths."""
    return (*_acs(spec, facts, catalog), *_numa(facts), *_links(facts), *_paths(spec, facts))


def _acs(spec: Spec, facts: Facts, catalog: Catalog) -> Iterator[Finding]:
    """ACS redirection on the bridges above two or more GPUs that do P2P (where NVIDIA's driver offers
    the GPUs no P2P, GeForce from Ada on, traffic goes through host memory whatever ACS says)."""
    hw = facts.hardware
    if isinstance(hw, Unknown) or isinstance(hw.acs, Unknown) or isinstance(hw.pci, Unknown):
        return
    if peer_access(facts, catalog, spec.gpus.model).supported is False:
        return
    upstream = {b for g in hw.pci if g.is_gpu and not isinstance(g.upstream, Unknown) for b in g.upstream}
    redirecting = sorted(b for b in upstream if b in hw.acs and hw.acs[b].redirecting)
    if len([g for g in hw.pci if g.is_gpu]) >= 2 and redirecting:
        yield _warn(
            "acs-redirects-p2p",
            f"ACS must be disabled on bridges {', '.join(redirecting)}: ReqRedir/"
            "CmpltRedir send GPU peer-to-peer traffic through the IOMMU and NCCL can hang or crawl; "
            "disable ACS in the firmware or boot with iommu=pt (checklist item acs-iommu)",
            "FF-14",
        )


def _numa(facts: Facts) -> Iterator[Finding]:
    hw = facts.hardware
    if isinstance(hw, Unknown) or isinstance(hw.pci, Unknown):
        return
    nodes = sorted({g.numa_node for g in hw.pci if g.is_gpu and g.numa_node is not None and g.numa_node >= 0})
    if len(nodes) > 1:
        yield _warn(
            "gpus-span-numa-nodes",
            f"the GPUs sit on NUMA nodes {', '.join(map(str, nodes))}: traffic "
            "between them crosses the SMP interconnect (SYS); move the cards to one root complex or "
            "adjust NPS in the firmware (checklist item slot-placement)",
            "FF-15",
        )


def _links(facts: Facts) -> Iterator[Finding]:
    if isinstance(facts.gpus, Unknown):
        return
    for gpu in facts.gpus:
        now, best = gpu.pcie_width_current, gpu.pcie_width_max
        if now is not None and best is not None and now < best:
            yield _warn(
                "pcie-link-degraded",
                f"GPU {gpu.index} ({gpu.pci_bus_id}) trained at x{now} of x{best}: "
                "reseat the card, remove risers, check bifurcation and M.2 lane sharing "
                "(checklist item pcie-link-speed); link generation is checked under load by verify",
                "FF-16",
            )


def _paths(spec: Spec, facts: Facts) -> Iterator[Finding]:
    topo = facts.topology
    if spec.gpus.max_path is None or isinstance(topo, Unknown):
        return
    worse = topo.pairs_worse_than(spec.gpus.max_path)
    if worse:
        yield _warn(
            "topology-path",
            f"GPU pairs worse than max_path {spec.gpus.max_path}: {', '.join(worse)}; "
            "the path is set by slot placement and firmware NUMA settings (checklist item "
            "slot-placement)",
            "FF-15",
        )


def _warn(rule: str, message: str, ff: str) -> Finding:
    source = f"field failures {ff} ({ff_ref(int(ff[3:]))})"
    return Finding(rule=rule, severity="warning", message=message, source=source)
