"""Every kernel the machine can boot has an nvidia.ko.

A kernel package installed beside the running one (an automatic update, an HWE kernel) is the
next boot's kernel; without a module built for it (DKMS needs that kernel's headers, installed
before the kernel) or a precompiled module package for exactly its ABI, the machine comes back
with no GPU ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"):
GoogleCloudPlatform/compute-gpu-installation PR #18; field failure FF-12.
"""

from __future__ import annotations

from provision.catalog import Catalog
from provision.detect.domains.driver import DkmsStatus
from provision.detect.facts import Facts, Unknown
from provision.fieldfailures import ff_ref
from provision.invariants.base import Invariant, Verdict
from provision.spec.models import Spec

PRECOMPILED = "linux-modules-nvidia-"
"""Ubuntu's signed precompiled modules: ``linux-modules-nvidia-<branch>[-server][-open]-<kernel>``
for one kernel ABI (source package linux-restricted-modules)."""


NOT_BOOTED = ("-dbg", "-unsigned")
"""Debian's kernel packages that are not a kernel to boot: debug symbols, and the unsigned image
beside the signed one (``linux-image-6.1.0-37-amd64-unsigned``)."""


class ModuleForEveryKernel(Invariant):
    """DKMS ``installed``, or a precompiled module package, for every packaged kernel other than the
    running one (whose module :class:`~provision.invariants.loaded.DriverLoaded` judges)."""

    id = "module-for-every-kernel"
    title = "an nvidia.ko for every installed kernel"
    layer = "boot"
    source = (
        "GoogleCloudPlatform/compute-gpu-installation PR #18 "
        "(https://github.com/GoogleCloudPlatform/compute-gpu-installation/pull/18); Ubuntu "
        "linux-restricted-modules (https://launchpad.net/ubuntu/+source/linux-restricted-modules); "
        f"field failures FF-12 ({ff_ref(12)})"
    )
    reads = ("packages", "dkms", "kernel")
    severity = "warning"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        if isinstance(facts.packages, Unknown):
            return self.unknown(facts.packages)
        packaged = facts.package_manager().packaged_kernels(facts.packages)
        # the running kernel's module is driver-loaded's and gpu-bound's to judge
        running = "" if isinstance(facts.kernel, Unknown) else facts.kernel.release
        kernels = [k for k in packaged if not k.endswith(NOT_BOOTED) and k != running]
        dkms = facts.dkms if isinstance(facts.dkms, DkmsStatus) else DkmsStatus()
        names = [p.name for p in facts.packages if p.installed]
        precompiled = [n for n in names if n.startswith(PRECOMPILED)]
        if not kernels or not (dkms.modules or precompiled):
            return self.not_applicable("no other packaged kernel, or no DKMS or precompiled nvidia module")
        bare = [k for k in kernels if not _has_module(k, dkms, precompiled)]
        if not bare:
            return self.holds(f"nvidia.ko for {', '.join(kernels)}")
        return self.violated(*_explain(bare, dkms, names))


def _has_module(kernel: str, dkms: DkmsStatus, precompiled: list[str]) -> bool:
    return dkms.state_for(kernel) == "installed" or any(n.endswith(f"-{kernel}") for n in precompiled)


def _explain(bare: list[str], dkms: DkmsStatus, names: list[str]) -> tuple[str, str, str]:
    """(observed, cause, fix) for the kernels with no module."""
    built = sorted({k for _, k, s in dkms.modules if k and s == "installed"})
    headless = [k for k in bare if f"linux-headers-{k}" not in names]
    cause = (
        f"the next boot into {bare[0]} will have no GPU: DKMS built nvidia for "
        f"{', '.join(built) or 'no kernel'} and no precompiled module package is installed for it"
    )
    if headless:
        cause += f"; linux-headers-{headless[0]} is not installed, so DKMS cannot build one"
    return (
        f"kernels without nvidia.ko: {', '.join(bare)}",
        cause,
        f"install linux-headers-{bare[0]} (DKMS then builds the module) and the headers meta-package of "
        f"the kernel's flavour, or the precompiled {PRECOMPILED}<branch>-server[-open]-{bare[0]}",
    )
