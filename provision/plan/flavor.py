"""Kernel module flavour against the GPUs the machine really has (FF-06, FF-07).

The spec rules check the flavour against the spec's GPU model; these rules check it against
what lspci and nvidia-smi show, so a box with a different or a second card is caught. Rules
from NVIDIA's Driver Installation Guide "Kernel Modules" via the catalog: open modules need
Turing or newer (a GSP), and Blackwell needs the open modules.
"""

from __future__ import annotations

from collections.abc import Iterator

from provision.catalog import Architecture, Catalog
from provision.detect.facts import Facts, Unknown
from provision.fieldfailures import ff_ref
from provision.invariants.architecture import pci_arch, pre_gsp_gpus, sysfs_gpus
from provision.plan.models import Finding

SOURCE = (
    "NVIDIA Driver Installation Guide, Kernel Modules "
    "(https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/); NVIDIA/open-gpu-kernel-modules "
    "README, Compatible GPUs (https://github.com/NVIDIA/open-gpu-kernel-modules#compatible-gpus); "
    f"field failures FF-06, FF-07 ({ff_ref(6, 7)})"
)


def detected_gpus(facts: Facts, catalog: Catalog) -> tuple[tuple[str, Architecture], ...]:
    """(label, architecture) of every GPU seen, from lspci (device id or chip name), else nvidia-smi."""
    found: list[tuple[str, Architecture]] = []
    if not isinstance(facts.nvidia_pci, Unknown):
        for dev in (d for d in facts.nvidia_pci if d.is_gpu):
            arch = pci_arch(dev.device_id, dev.description, catalog)
            if arch is not None:
                found.append((f"{dev.description} [10de:{dev.device_id}] at {dev.bdf}", arch))
    if not found:
        found.extend(sysfs_gpus(facts, catalog))
    if not found and not isinstance(facts.gpus, Unknown):
        for gpu in facts.gpus:
            model = catalog.gpu_by_smi_name(gpu.name)
            if model is not None:
                found.append((f"GPU {gpu.index} {gpu.name}", model.architecture))
    return tuple(found)


def flavor_findings(flavor: str, facts: Facts, catalog: Catalog) -> tuple[Finding, ...]:
    """Blockers when the detected GPUs cannot run ``flavor``, or no one flavour fits all (the branch
    against the GPUs is :mod:`provision.plan.lifecycle`'s)."""
    gpus = detected_gpus(facts, catalog)
    rules = catalog.kernel_modules
    open_only = [label for label, arch in gpus if arch in rules.open_required.archs]
    closed_only = [label for label, arch in gpus if arch in rules.proprietary_required.archs]
    # sysfs's device id catches a pre-Turing card that lspci (absent) or the catalog cannot name
    seen = " ".join(closed_only)
    closed_only += [label for bdf, label in pre_gsp_gpus(facts) if bdf not in seen]
    return tuple(_findings(flavor, open_only, closed_only))


def _findings(flavor: str, open_only: list[str], closed_only: list[str]) -> Iterator[Finding]:
    if open_only and closed_only:
        yield _block(
            "flavor-unsatisfiable",
            f"{open_only[0]} needs the open kernel modules and {closed_only[0]} "
            "needs the proprietary ones: no single driver serves both; remove one card",
        )
        return
    if open_only and flavor == "proprietary":
        yield _block(
            "flavor-open-required",
            f"Blackwell GPU ({open_only[0]}) requires flavor: open; the "
            "proprietary module fails with RmInitAdapter (FF-06)",
        )
    if closed_only and flavor == "open":
        yield _block(
            "flavor-proprietary-required",
            f"{closed_only[0]} has no GSP and cannot load the open "
            "kernel modules; set flavor: proprietary (FF-07)",
        )


def _block(rule: str, message: str) -> Finding:
    return Finding(rule=rule, severity="blocker", message=message, source=SOURCE)
