"""What the kernel needs around the NVIDIA module: DKMS, headers, compiler, nouveau, Secure Boot.

Sources: field failures FF-11 (Secure Boot rejects an unenrolled DKMS module:
canonical/nvidia-graphics-drivers#62), FF-12 (no headers for a newly installed kernel, so no
module after reboot: GoogleCloudPlatform/compute-gpu-installation PR #18), FF-13 (the DKMS build
must use the kernel's own compiler; open modules need g++: aws-parallelcluster-cookbook PR #2852,
NVIDIA/open-gpu-kernel-modules#805); NVIDIA Driver Installation Guide (DIG) on disabling nouveau.
"""

from __future__ import annotations

import re

from provision.detect.domains.driver import DKMS_MOK
from provision.detect.facts import Facts, Kernel, Unknown
from provision.fieldfailures import ff_ref
from provision.plan.models import Action, Component, Finding, Step
from provision.plan.steps import installed, noop
from provision.spec.models import Spec

_IMAGE = re.compile(r"^linux-image-(\d\S*)$")
_META = {
    "linux-image-generic": "linux-headers-generic",
    "linux-image-amd64": "linux-headers-amd64",
    "linux-image-cloud-amd64": "linux-headers-cloud-amd64",
    "linux-image-arm64": "linux-headers-arm64",
}


def dkms_step(spec: Spec, facts: Facts, flavor: str, driver_changes: bool) -> Step | Finding | None:
    """DKMS, headers for the running and every installed kernel, the headers meta and the kernel's
    compiler, in the driver's transaction; None when no module is built here."""
    if spec.driver.source != "nvidia-repo" or isinstance(facts.kernel, Unknown):
        return None
    kernels = _packaged_kernels(facts)
    if facts.kernel.release not in kernels:
        return _custom_kernel(facts.kernel, driver_changes)
    wanted = (
        "dkms",
        *(f"linux-headers-{k}" for k in kernels),
        *_header_metas(facts),
        *_compilers(facts.kernel, flavor),
    )
    missing = tuple(p for p in wanted if installed(facts, p) is None)
    if not missing:
        return noop(
            Component.DKMS,
            reason=f"dkms, headers for {', '.join(kernels)} and the kernel's compiler are installed",
        )
    return Step(
        component=Component.DKMS,
        action=Action.INSTALL,
        current="absent" if "dkms" in missing else "partial",
        target="dkms + headers",
        packages=missing,
        tags=("repository", "packages"),
        reason="DKMS builds the module for the running and every installed kernel, with the kernel's "
        "own compiler; without headers the next boot into a new kernel has no GPU (FF-12, FF-13)",
    )


def _packaged_kernels(facts: Facts) -> tuple[str, ...]:
    if isinstance(facts.packages, Unknown):
        return ()
    found = (_IMAGE.match(p.name) for p in facts.packages if p.installed)
    return tuple(sorted({m[1] for m in found if m}))


def _header_metas(facts: Facts) -> tuple[str, ...]:
    return tuple(headers for image, headers in _META.items() if installed(facts, image) is not None)


def _compilers(kernel: Kernel, flavor: str) -> tuple[str, ...]:
    """gcc-N matching the compiler the kernel was built with (/proc/version); g++-N for open modules."""
    match = re.search(r"gcc(?:-(\d+))?\b[^\d]*(\d+)\.\d+", kernel.compiler or "")
    if not match:
        return ()
    major = match[1] or match[2]
    return (f"gcc-{major}", *((f"g++-{major}",) if flavor == "open" else ()))


def _custom_kernel(kernel: Kernel, driver_changes: bool) -> Finding | None:
    if not driver_changes:
        return None
    return Finding(
        rule="kernel-not-packaged",
        severity="warning",
        source=f"field failures FF-12 ({ff_ref(12)})",
        message=f"the running kernel {kernel.release} does not come from a distribution package: "
        "provision cannot install its headers; DKMS needs them from wherever the kernel came from",
    )


def nouveau_step(facts: Facts) -> Step:
    """Blacklist nouveau and regenerate the initramfs when it is loaded (it claims the GPU first)."""
    state = facts.nouveau
    if isinstance(state, Unknown):
        return noop(Component.KERNEL_MODULES, reason=f"nouveau state not observable ({state.unknown})")
    if not state.loaded:
        return noop(Component.KERNEL_MODULES, reason="nouveau is not loaded")
    if state.blacklisted_by:
        return noop(
            Component.KERNEL_MODULES,
            current="loaded, blacklisted",
            reason=f"nouveau is blacklisted ({', '.join(state.blacklisted_by)}); it goes at the reboot",
        )
    return Step(
        component=Component.KERNEL_MODULES,
        action=Action.CONFIGURE,
        current="nouveau loaded",
        target="nouveau blacklisted",
        tags=("kernel",),
        reason="blacklist nouveau, regenerate the initramfs and reboot: the in-kernel driver claims the "
        "GPU before nvidia.ko can (NVIDIA Driver Installation Guide)",
    )


def secure_boot_step(spec: Spec, facts: Facts, driver_changes: bool) -> Step | Finding | None:
    """Under Secure Boot a DKMS-built module loads only when signed by an enrolled MOK (FF-11)."""
    hw = facts.hardware
    sb = None if isinstance(hw, Unknown) or isinstance(hw.secure_boot, Unknown) else hw.secure_boot
    if sb is None or not sb.enabled or spec.driver.source != "nvidia-repo":
        return None
    mok = facts.mok
    if not isinstance(mok, Unknown) and mok.enrolled:
        return noop(Component.SECURE_BOOT, reason=f"Secure Boot on; DKMS signing key {DKMS_MOK} is enrolled")
    if not driver_changes and isinstance(mok, Unknown):
        return None
    if not spec.driver.console:
        return Finding(
            rule="secure-boot-needs-console",
            severity="blocker",
            source=f"field failures FF-11 ({ff_ref(11)})",
            message="Secure Boot is enabled and the DKMS signing key is not enrolled; enrolling it "
            "needs the firmware console at the next boot, and driver.console is false (headless). "
            "Enroll a key out of band, or disable Secure Boot (checklist item secure-boot)",
        )
    return Step(
        component=Component.SECURE_BOOT,
        action=Action.MANUAL,
        target="MOK enrolled",
        reason=f"Secure Boot is on: DKMS signs nvidia.ko with {DKMS_MOK}; run `mokutil --import "
        f"{DKMS_MOK}` (choose a one-time password), then confirm MOK enrollment at the console on the "
        "next boot (checklist item secure-boot)",
    )
