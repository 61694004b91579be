"""One lock for the NVIDIA stack: apt pins, dpkg holds and an unattended-upgrades guard.

The pins make one apt transaction resolve every package of a family to the spec's version
(apt otherwise takes the newest candidate for dependencies, the FF-02 drift); the holds stop
``apt upgrade``; the guard stops unattended-upgrades, which changed userspace under a loaded
module in FF-01. The guard's patterns come from pando85/homelab PR #4110 (FF-01).
"""

from __future__ import annotations

from typing import Any

from provision.plan.steps import CUDNN_VERSION_PARTS, NCCL_VERSION_PARTS, version_glob
from provision.spec.models import Spec


def apt_pins(spec: Spec) -> list[dict[str, str]]:
    """Package families pinned at priority 1001: driver (not when preinstalled), cuDNN, NCCL."""
    pins: list[dict[str, str]] = []
    if spec.driver.source == "nvidia-repo":
        driver = f"{spec.driver.version}-*" if spec.driver.version else f"{spec.driver.branch}.*"
        pins.append(
            {
                "packages": "nvidia-* libnvidia-* cuda-drivers* xserver-xorg-video-nvidia-*",
                "version": driver,
                "why": f"NVIDIA driver, utilities and fabric manager at {driver}",
            }
        )
    cuda = spec.cuda
    if cuda is not None and cuda.cudnn is not None:
        pins.append(
            {
                "packages": "libcudnn9* cudnn9*",
                "version": version_glob(cuda.cudnn, full_parts=CUDNN_VERSION_PARTS),
                "why": f"cuDNN {cuda.cudnn}",
            }
        )
    if cuda is not None and cuda.nccl is not None:
        pins.append(
            {
                "packages": "libnccl*",
                "version": version_glob(cuda.nccl, f"+cuda{cuda.toolkit}", NCCL_VERSION_PARTS),
                "why": f"NCCL {cuda.nccl} for CUDA {cuda.toolkit}",
            }
        )
    return pins


def preferences_text(pins: list[dict[str, Any]]) -> str:
    """The apt preferences file provision writes, exactly (compared on the next plan for drift)."""
    head = "# Managed by provision: NVIDIA package families pinned to the spec's versions.\n"
    stanzas = [
        f"Explanation: {p['why']}\nPackage: {p['packages']}\nPin: version {p['version']}\n"
        "Pin-Priority: 1001\n"
        for p in pins
    ]
    return head + "\n".join(stanzas)


def unattended_guard_text(patterns: tuple[str, ...]) -> str:
    """apt.conf snippet blacklisting the stack in unattended-upgrades (its entries are regex prefixes)."""
    entries = "".join(f'    "{p.rstrip("*")}";\n' for p in patterns)
    return (
        "// Managed by provision: keep unattended-upgrades away from the NVIDIA stack (FF-01).\n"
        f"Unattended-Upgrade::Package-Blacklist {{\n{entries}}};\n"
    )
