"""Hints chosen from what was observed: a hint names a cause only when its evidence is present.

Sources: CUDA Runtime API error codes (``cudaErrorSystemNotReady`` = 802,
``cudaErrorCompatNotSupportedOnDevice`` = 804:
https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html); NVIDIA Fabric
Manager User Guide (802 on NVSwitch systems until the fabric manager has trained the fabric);
CUDA Compatibility (forward compatibility only on data center GPUs:
https://docs.nvidia.com/deploy/cuda-compatibility/).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from provision.detect.domains.pci import NO_NVIDIA_PCI
from provision.detect.facts import Facts, Torch, Unknown

GENERIC = "A GPU missing: check lspci -d 10de:, dmesg (Xid, RmInitAdapter), seating and power cables."


def not_on_the_bus(facts: Facts) -> str | None:
    """The hint when sysfs was read and holds no NVIDIA function: no driver or cable check helps, the
    spec describes another machine; None otherwise (sysfs unread, or NVIDIA devices present)."""
    hardware = facts.hardware
    pci = None if isinstance(hardware, Unknown) else hardware.pci
    if isinstance(pci, Unknown) and pci.unknown == NO_NVIDIA_PCI:
        return f"No NVIDIA GPU in this machine ({NO_NVIDIA_PCI}): is this the machine the spec describes?"
    return None


def no_driver(facts: Facts, upstream: Callable[[str], str]) -> str | None:
    """The hint when the package list was read, holds no driver package and no NVIDIA module is
    loaded: the driver was never installed; None otherwise.

    Args:
        facts: The machine's facts.
        upstream: The package manager's upstream part of a version (``PackageManager.upstream``).
    """
    if isinstance(facts.packages, Unknown) or not isinstance(facts.driver, Unknown):
        return None
    if facts.driver_packages(upstream):
        return None
    return (
        "No NVIDIA driver package is installed and no NVIDIA module is loaded: provision apply installs "
        "the spec's driver (one from NVIDIA's .run installer is no package: see modinfo nvidia)."
    )


_LIBRARY = re.compile(
    r"undefined symbol|cannot open shared object|version `\S+' not found|libcu\w+\.so", re.I
)


def device_count_hint(facts: Facts, error: str = "") -> str:
    """Why torch sees fewer CUDA devices than expected (or none), from the error and the facts.

    Args:
        facts: The machine's facts.
        error: The GPU program's error text, if it failed ('' when it ran and counted).
    """
    torch = facts.torch
    if isinstance(torch, Torch) and torch.cuda is None:
        return (
            f"torch {torch.version} in {torch.venv} is a CPU-only build: "
            "install the CUDA wheel of the spec's variant."
        )
    if "804" in error or "forward compatibility" in error.lower():
        return (
            "CUDA forward compatibility (cuda-compat's libcuda) was tried on a GPU that does not support it: "
            "remove the compat library path and raise the driver instead."
        )
    if _LIBRARY.search(error):
        return (
            "A CUDA library from outside the venv was loaded: check LD_LIBRARY_PATH and /etc/ld.so.conf.d "
            "(see the one-cuda-world invariant)."
        )
    if "802" in error or "system not yet initialized" in error.lower():
        return _not_ready(facts)
    mig = [] if isinstance(facts.gpus, Unknown) else [g.index for g in facts.gpus if g.mig_mode]
    if mig:
        return f"MIG is enabled on gpu{mig[0]}: CUDA sees MIG instances, not whole GPUs (nvidia-smi -mig 0)."
    return not_on_the_bus(facts) or GENERIC


def _not_ready(facts: Facts) -> str:
    seen, evidence = facts.nvswitch()
    if seen:
        return (
            f"CUDA error 802 on an NVSwitch system ({evidence}): start nvidia-fabricmanager at the "
            "loaded driver's version, then reset the GPUs (FF-03)."
        )
    return (
        "CUDA error 802 (system not yet initialized) and no NVSwitch seen: the driver is not ready; "
        "check dmesg for NVRM errors and nvidia-persistenced."
    )


def slow_hint(facts: Facts, index: int) -> str:
    """Why GPU ``index`` computes slower than its floor, naming a power cap or clock limit when
    ``nvidia-smi -q`` shows one (an enforced power limit below the default, an application or locked
    clock, a power or thermal slowdown among the active clock event reasons)."""
    states, health = facts.gpu_state, facts.gpu_health
    state = None if isinstance(states, Unknown) else next((s for s in states if s.index == index), None)
    causes = []
    if state is not None:
        p = state.power
        if p.enforced_w is not None and p.default_w is not None and p.enforced_w < p.default_w:
            causes.append(
                f"GPU {index} runs under an enforced power limit of {p.enforced_w:g} W, below its default "
                f"{p.default_w:g} W (raise it: gpu.settings power_limit_w, or nvidia-smi -i {index} -pl "
                f"{p.default_w:g})"
            )
    if state is not None and not isinstance(health, Unknown):
        row = next((h for h in health if h.bdf == state.bdf), None)
        events = [e for e in (row.clock_events if row else ()) if e != "Idle"]
        if events:
            causes.append(
                f"nvidia-smi -q shows clock event reasons active on GPU {index}: {', '.join(events)}"
            )
    if causes:
        return "Slow: " + "; ".join(causes) + "."
    return "Slow: check power limit and clocks (nvidia-smi -q -d PERFORMANCE) and cooling."
