"""The GPU is driven by the driver the spec names, and what boot reads makes it so.

Sources: NVIDIA Driver Installation Guide, "Disabling Nouveau"
(https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/); modprobe(8)
``--resolve-alias`` and modprobe.d(5) ``blacklist`` (https://man7.org/linux/man-pages/man8/modprobe.8.html,
https://man7.org/linux/man-pages/man5/modprobe.d.5.html); update-initramfs(8), initramfs-tools
(https://manpages.debian.org/bookworm/initramfs-tools/update-initramfs.8.en.html).
"""

from __future__ import annotations

from provision.catalog import Catalog
from provision.detect.facts import Facts, GpuHardware, Initramfs, LoadedDriver, Unknown
from provision.invariants.base import Invariant, Verdict
from provision.spec.models import Spec

NVIDIA_MODULES = frozenset({"nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia_peermem"})
"""NVIDIA's own kernel modules: never blacklisted."""
PASSTHROUGH_DRIVERS = frozenset({"vfio_pci", "pci_stub"})
"""Drivers an administrator binds on purpose (device assignment): named, never blacklisted."""

DIG_NOUVEAU = "NVIDIA Driver Installation Guide, Disabling Nouveau (https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/)"


def module(name: str) -> str:
    """A module or driver name as modprobe compares them (``vfio-pci`` -> ``vfio_pci``)."""
    return name.replace("-", "_")


def gpu_functions(facts: Facts) -> tuple[GpuHardware, ...] | Unknown:
    """The NVIDIA PCI functions that are GPUs (display or 3D controllers), or why unknown."""
    hw = facts.hardware
    return hw if isinstance(hw, Unknown) else hw.gpus


def holders(facts: Facts, expected: str) -> dict[str, str]:
    """GPU BDF -> the driver bound to it, for every GPU bound to another driver than ``expected``."""
    gpus = gpu_functions(facts)
    if isinstance(gpus, Unknown):
        return {}
    return {
        g.bdf: g.driver for g in gpus if isinstance(g.driver, str) and module(g.driver) != module(expected)
    }


def blacklist_modules(facts: Facts, expected: str) -> tuple[str, ...]:
    """The in-kernel drivers to blacklist so that only ``expected`` can claim the GPUs.

    Every module whose alias matches a GPU's modalias (the kernel's own ``modules.alias``, so
    nouveau, nova_core or a driver not known today) and every driver holding a GPU, less
    NVIDIA's modules, the expected driver and the passthrough drivers an administrator binds.
    """
    gpus = gpu_functions(facts)
    found: list[str] = []
    if not isinstance(gpus, Unknown):
        for g in gpus:
            found += list(g.claimants) if not isinstance(g.claimants, Unknown) else []
    found += list(holders(facts, expected).values())
    keep = NVIDIA_MODULES | PASSTHROUGH_DRIVERS | {module(expected)}
    return tuple(sorted({module(m) for m in found} - keep))


class GpuBound(Invariant):
    """Every GPU is bound to the spec's driver (nvidia, or vfio-pci for passthrough)."""

    id = "gpu-bound"
    title = "every GPU bound to its driver"
    layer = "pci"
    source = DIG_NOUVEAU
    reads = ("hardware", "driver", "driver_on_disk")
    severity = "warning"
    repaired_by_plan = True

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        gpus = gpu_functions(facts)
        if isinstance(gpus, Unknown):
            return self.unknown(gpus)
        known = [(g, g.driver) for g in gpus if not isinstance(g.driver, Unknown)]
        if not gpus:
            return self.not_applicable("no NVIDIA GPU function in sysfs")
        if not known:
            first = gpus[0].driver
            return self.unknown(first if isinstance(first, Unknown) else "bound driver not read")
        expected = spec.gpus.binding
        wrong = [(g.bdf, d) for g, d in known if module(d or "") != module(expected)]
        if not wrong:
            return self.holds(f"{len(known)} GPU(s) bound to {expected}")
        observed = ", ".join(f"{bdf} {d or 'unbound'}" for bdf, d in wrong)
        return self._violation(spec, facts, observed, wrong)

    def _violation(
        self, spec: Spec, facts: Facts, observed: str, wrong: list[tuple[str, str | None]]
    ) -> Verdict:
        expected = spec.gpus.binding
        held = sorted({module(d) for _, d in wrong if d})
        assigned = [d for d in held if d in PASSTHROUGH_DRIVERS]
        if assigned:
            return self.violated(
                observed,
                f"{', '.join(assigned)} holds the GPU (device assignment configured on this host)",
                f"remove the vfio-pci.ids=/driver_override binding, or set gpus.binding: {assigned[0]}",
            )
        ours = [d for d in held if d in NVIDIA_MODULES]
        if ours:  # only when the spec asks for passthrough: NVIDIA's modules are never blacklisted
            return self.violated(
                observed,
                f"{', '.join(ours)} holds the GPU meant for {expected}",
                f"bind it to {expected} (vfio-pci.ids=<vendor:device> on the kernel command line, or "
                "driver_override) and reboot; provision does not set up passthrough",
            )
        if held:
            return self.violated(
                observed,
                f"{', '.join(held)} claimed the GPU before {expected}",
                f"blacklist {', '.join(blacklist_modules(facts, expected))} in /etc/modprobe.d, rebuild the "
                "initramfs and reboot (apply does this)",
                reboots=True,
            )
        cause, fix, reboots = _unbound(facts, expected)
        return self.violated(observed, cause, fix, reboots=reboots)


def _unbound(facts: Facts, expected: str) -> tuple[str, str, bool]:
    """Cause, fix, and whether a reboot binds them, for GPUs no driver holds, from the driver facts."""
    if module(expected) != "nvidia":
        return f"{expected} is not bound", f"bind the GPU to {expected} (driver_override) or reboot", False
    if isinstance(facts.driver, LoadedDriver):
        return (
            f"nvidia.ko {facts.driver.version} is loaded but did not take the GPU",
            "read `dmesg | grep NVRM` (RmInitAdapter failed?); check the flavour supports this GPU",
            False,
        )
    on_disk = facts.on_disk_driver()
    if on_disk is not None:
        return f"nvidia.ko {on_disk} is installed but not loaded", "reboot (or `modprobe nvidia`)", True
    return "no nvidia kernel module is installed for the running kernel", "provision apply installs it", True


DRACUT_SOURCE = "dracut(8) (https://man.archlinux.org/man/dracut.8); " + DIG_NOUVEAU
"""The RHEL family's initramfs tool (dracut, lsinitrd) in place of initramfs-tools."""


class BootEffect(Invariant):
    """Module blacklists in /etc/modprobe.d are inside the initramfs the next boot reads."""

    id = "blacklist-in-initramfs"
    title = "module blacklists in the initramfs"
    layer = "boot"
    source = (
        "update-initramfs(8), initramfs-tools "
        "(https://manpages.debian.org/bookworm/initramfs-tools/update-initramfs.8.en.html); " + DIG_NOUVEAU
    )
    reads = ("initramfs", "nouveau")
    repaired_by_plan = True

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        verdict = self._judge(spec, facts)
        if facts.os_family(spec.os.distro) == "RedHat":
            return verdict.model_copy(update={"source": DRACUT_SOURCE})
        return verdict

    def _judge(self, spec: Spec, facts: Facts) -> Verdict:
        image = facts.initramfs
        if isinstance(image, Unknown):
            return self.unknown(image)
        if image.image is None:
            return self.not_applicable("the running kernel boots without an initramfs")
        files = blacklist_files(facts, image)
        if not files:
            return self.holds("no module blacklist in /etc/modprobe.d to carry")
        stale = [f for f in files if image.in_effect(f) is False]
        if stale:
            return self.violated(
                f"{', '.join(stale)} not in {image.image} (built before it)",
                "the blacklist was written after the initramfs was built",
                f"rebuild the initramfs ({facts.package_manager(spec.os.distro).initramfs_command}) "
                "and reboot (apply does this)",
            )
        return self.holds(f"{', '.join(files)} in {image.image}")


def blacklist_files(facts: Facts, image: Initramfs) -> list[str]:
    """The /etc/modprobe.d files that blacklist a driver of the GPUs, as far as facts show them."""
    state = facts.nouveau
    named = set() if isinstance(state, Unknown) else set(state.blacklisted_by)
    blacklists = {} if isinstance(state, Unknown) else state.module_blacklists or {}
    named |= {f for files in blacklists.values() for f in files}
    return sorted(f for f in named if f in image.confs)
