"""Every GPU function bound to nvidia.ko is a GPU the driver serves.

The kernel binds nvidia.ko to a PCI function at probe time; the driver initialises the GPU when it
is first opened (RmInitAdapter). A GPU whose initialisation failed, or that fell off the bus
(Xid 79), stays bound in sysfs while ``nvidia-smi`` no longer lists it, or lists no device at all.
Only its bus address tells which card it is. Sources: NVIDIA XID Errors (Xid 79, "GPU has fallen
off the bus", https://docs.nvidia.com/deploy/xid-errors/index.html); nvidia-smi(1) ``pci.bus_id``
(https://docs.nvidia.com/deploy/nvidia-smi/index.html).
"""

from __future__ import annotations

from provision.catalog import Architecture, Catalog
from provision.detect.domains.pci import normalize_bdf
from provision.detect.facts import Facts, LoadedDriver, Unknown
from provision.invariants.architecture import arch_by_bdf, pre_gsp_gpus
from provision.invariants.base import Invariant, Verdict
from provision.invariants.binding import gpu_functions, module
from provision.spec.models import Spec

FLAVOR_SOURCE = (
    "NVIDIA Driver Installation Guide, Kernel Modules "
    "(https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/)"
)


ALL_ONES_SOURCE = (
    "Linux PCI_ERROR_RESPONSE: a read from a device that does not respond returns ~0 "
    "(https://github.com/torvalds/linux/commit/57bdeef4716689d9b0e3571034d65cf420f6efcd)"
)


def _reading_all_ones(bound: list[str], facts: Facts) -> list[str]:
    """The bound GPU functions whose config space lspci reads as all ones (``rev ff``); empty when
    lspci was not read."""
    devices = facts.nvidia_pci
    if isinstance(devices, Unknown):
        return []
    dead = {normalize_bdf(d.bdf) for d in devices if d.reads_all_ones}
    return [bdf for bdf in bound if bdf in dead]


class GpuAttached(Invariant):
    """Every GPU function sysfs shows bound to nvidia is listed by nvidia-smi (same bus address)."""

    id = "gpu-attached"
    title = "every bound GPU served by the driver"
    layer = "driver"
    source = (
        "NVIDIA XID Errors, Xid 79 (https://docs.nvidia.com/deploy/xid-errors/index.html); "
        "nvidia-smi pci.bus_id (https://docs.nvidia.com/deploy/nvidia-smi/index.html)"
    )
    reads = ("hardware", "gpus", "driver", "nvidia_pci")
    severity = "warning"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        functions = gpu_functions(facts)
        if isinstance(functions, Unknown):
            return self.unknown(functions)
        if module(spec.gpus.binding) != "nvidia":
            return self.not_applicable(f"the spec binds the GPUs to {spec.gpus.binding}")
        unread = next((g.driver for g in functions if isinstance(g.driver, Unknown)), None)
        if unread is not None:
            return self.unknown(unread)
        bound = [g.bdf for g in functions if isinstance(g.driver, str) and module(g.driver) == "nvidia"]
        if not bound:
            return self.not_applicable("no GPU function is bound to nvidia (gpu-bound judges that)")
        off_bus = _reading_all_ones(bound, facts)
        if off_bus:
            return self.violated(
                f"{', '.join(off_bus)} bound to nvidia in sysfs; lspci reads its config space as all "
                "ones (rev ff)",
                "the GPU no longer answers on the PCIe bus: it has fallen off the bus (Xid 79)",
                f"confirm in the kernel log (`dmesg | grep -e NVRM -e Xid` for {off_bus[0]}); reseat the "
                "card, check its power cables, slot and PCIe link, then power-cycle (a GPU reset cannot "
                "reach it)",
            ).model_copy(update={"source": f"{self.source}; {ALL_ONES_SOURCE}"})
        if not isinstance(facts.driver, LoadedDriver):
            return self.not_applicable("nvidia.ko is not loaded")
        listed = facts.gpus
        if isinstance(listed, Unknown):
            return self.unknown(listed)
        if any(g.pci_bus_id is None for g in listed):
            return self.unknown("nvidia-smi gave no bus address for a GPU")
        seen = {normalize_bdf(g.pci_bus_id or "") for g in listed}
        missing = [bdf for bdf in bound if bdf not in seen]
        if not missing:
            return self.holds(f"{len(bound)} bound GPU(s), each listed by nvidia-smi")
        shown = ", ".join(sorted(seen)) if seen else "no device ('No devices were found')"
        flavored = _flavor_cause(missing, facts, facts.driver, catalog)
        if flavored is not None:
            return self.violated(
                f"{', '.join(missing)} bound to nvidia in sysfs; nvidia-smi lists {shown}", *flavored
            ).model_copy(update={"source": FLAVOR_SOURCE})
        return self.violated(
            f"{', '.join(missing)} bound to nvidia in sysfs; nvidia-smi lists {shown}",
            f"nvidia.ko {facts.driver.version} bound {'them' if len(missing) > 1 else 'it'} but does not "
            "serve it: its initialisation failed (RmInitAdapter) or the GPU fell off the bus (Xid 79)",
            f"read the kernel log for {missing[0]}: `dmesg | grep -e NVRM -e Xid`; RmInitAdapter failed: "
            "check the module flavour and the GSP firmware for this GPU; Xid 79: reseat the card, check its "
            "power and slot (PCIe link), then reboot",
        )


def _flavor_cause(
    missing: list[str], facts: Facts, driver: LoadedDriver, catalog: Catalog
) -> tuple[str, str] | None:
    """(cause, fix) when the loaded module's flavour cannot initialise a missing GPU's architecture:
    proprietary on Blackwell and later, open on a GPU without a GSP (before Turing); else None.

    Source: NVIDIA Driver Installation Guide, "Kernel Modules" (the catalog's kernel_modules rules).
    """
    archs, pre_gsp = arch_by_bdf(facts, catalog), dict(pre_gsp_gpus(facts))
    for bdf in missing:
        problem = _flavor_problem(driver, catalog, archs.get(bdf), pre_gsp.get(bdf), bdf)
        if problem is not None:
            what, why, needs = problem
            return (
                f"{what}, and the loaded nvidia.ko {driver.version} is the {driver.flavor} flavour: {why}",
                f"install the {needs} flavour of driver {driver.version.branch} (driver.flavor: {needs}) "
                "and reboot",
            )
    return None


def _flavor_problem(
    driver: LoadedDriver, catalog: Catalog, arch: Architecture | None, name: str | None, bdf: str
) -> tuple[str, str, str] | None:
    """(what the GPU at ``bdf`` is, why the loaded flavour cannot initialise it, the flavour it needs),
    or None when the loaded flavour can (or the GPU's architecture is not known). ``arch``: its
    architecture, if known; ``name``: its name when it is a GPU without a GSP, else None."""
    rules = catalog.kernel_modules
    if driver.flavor == "open" and name is not None:
        return (
            f"{name} has no GSP",
            "the open kernel modules do not initialise GPUs without a GSP",
            "proprietary",
        )
    if arch is None:
        return None
    if driver.flavor == "proprietary" and arch in rules.open_required.archs:
        why = f"{arch.value} GPUs are initialised only by the open kernel modules (RmInitAdapter fails)"
        return f"{bdf} is a {arch.value} GPU", why, "open"
    if driver.flavor == "open" and arch in rules.proprietary_required.archs:
        why = "the open kernel modules do not initialise GPUs without a GSP"
        return f"{bdf} is a {arch.value} GPU, which has no GSP", why, "proprietary"
    return None
