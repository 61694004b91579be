"""CUDA toolkit, cuDNN, NCCL and hold steps.

Sources (catalog ``packages.yaml``): toolkit-only package ``cuda-toolkit-X-Y`` (never
``cuda`` or ``cuda-X-Y``, which pull in a driver: FF-08); cuDNN 9
``libcudnn9-cuda-<major>`` and ``-dev``; NCCL ``libnccl2``/``libnccl-dev`` at
``<nccl>-1+cuda<X.Y>``. Hold patterns: pando85/homelab PR #4110 (FF-01).
"""

from __future__ import annotations

import fnmatch

from provision.catalog import Catalog
from provision.detect.facts import CudaToolkits, Facts, Unknown
from provision.plan.models import Action, Component, Step
from provision.plan.steps import (
    CUDNN_VERSION_PARTS,
    NCCL_VERSION_PARTS,
    change_action,
    installed,
    noop,
    upstream,
    version_glob,
)
from provision.spec.models import CudaSpec
from provision.versions import DottedVersion

_APT_TAGS = ("repository", "packages")


def cuda_toolkit_step(cuda: CudaSpec, facts: Facts, catalog: Catalog) -> Step:
    """Install ``cuda-toolkit-X-Y`` unless that release is already present."""
    name = catalog.packages.cuda_toolkit(cuda.toolkit)
    have = installed(facts, name)
    if have is not None:
        return noop(
            Component.CUDA_TOOLKIT,
            current=have.version,
            target=str(cuda.toolkit),
            reason=f"{name} {have.version} installed",
        )
    present = _present_without_meta(facts.cuda, cuda.toolkit)
    if present:
        return noop(
            Component.CUDA_TOOLKIT, current=str(cuda.toolkit), target=str(cuda.toolkit), reason=present
        )
    return Step(
        component=Component.CUDA_TOOLKIT,
        action=Action.INSTALL,
        current=_toolkits_text(facts.cuda),
        target=str(cuda.toolkit),
        packages=(name,),
        tags=_APT_TAGS,
        reason=f"install {name} (toolkit only; never the driver-pulling cuda/cuda-X-Y metas, FF-08)",
    )


def _present_without_meta(cuda: CudaToolkits | Unknown, release: DottedVersion) -> str | None:
    """A reason when the toolkit's components are installed without its meta-package."""
    if isinstance(cuda, Unknown) or release not in cuda.installed or cuda.nvcc_release != release:
        return None
    return (
        f"CUDA {release} present (/usr/local/cuda-{release}, nvcc {cuda.nvcc_version}); "
        "installed as components without the toolkit meta-package"
    )


def _toolkits_text(cuda: CudaToolkits | Unknown) -> str:
    if isinstance(cuda, Unknown) or not cuda.installed:
        return "absent"
    return ", ".join(str(v) for v in cuda.installed)


def cudnn_step(cuda: CudaSpec, facts: Facts, catalog: Catalog) -> Step:
    """cuDNN runtime and headers for the toolkit's CUDA major, at the spec's version (prefix)."""
    assert cuda.cudnn is not None
    names = catalog.packages.cudnn(cuda.toolkit.major)
    return _versioned_step(Component.CUDNN, names, cuda.cudnn, facts, "", CUDNN_VERSION_PARTS)


def nccl_step(cuda: CudaSpec, facts: Facts, catalog: Catalog) -> Step:
    """NCCL runtime and headers built for the toolkit's CUDA release (``+cudaX.Y``)."""
    assert cuda.nccl is not None
    names = catalog.packages.nccl()
    return _versioned_step(
        Component.NCCL, names, cuda.nccl, facts, f"+cuda{cuda.toolkit}", NCCL_VERSION_PARTS
    )


def _versioned_step(
    component: Component,
    names: tuple[str, ...],
    target: DottedVersion,
    facts: Facts,
    suffix: str,
    full_parts: int,
) -> Step:
    have = installed(facts, names[0])
    current = upstream(have) if have else None
    suffix_ok = have is None or not suffix or have.version.endswith(suffix)
    if (
        current is not None
        and target.matches(current)
        and suffix_ok
        and all(installed(facts, n) for n in names)
    ):
        return noop(
            component,
            current=have.version if have else None,
            target=str(target),
            reason=f"{', '.join(names)} {have.version if have else ''} installed, matches {target}",
        )
    glob = version_glob(target, suffix, full_parts)
    return Step(
        component=component,
        # Same version but another CUDA build or a missing companion package: not a downgrade.
        action=Action.INSTALL
        if current is not None and target.matches(current)
        else change_action(current, target),
        current=have.version if have else "absent",
        target=str(target),
        packages=tuple(f"{n}={glob}" for n in names),
        tags=_APT_TAGS,
        reason=f"install {', '.join(names)} {target}" + (f" built for CUDA {suffix[5:]}" if suffix else ""),
    )


def holds_step(facts: Facts, catalog: Catalog, new_packages: tuple[str, ...], guard: str) -> Step:
    """Hold every NVIDIA stack package (installed now or by this plan) not held yet, and keep
    unattended-upgrades' blacklist (``guard``, the exact file text) in place."""
    patterns = catalog.packages.stack_patterns
    unheld = _unheld_stack(facts, patterns)
    incoming = tuple(p.split("=")[0] for p in new_packages)
    pending = tuple(dict.fromkeys(unheld + incoming))
    guard_state = _guard_state(facts, guard)
    if not pending and guard_state is None:
        return noop(
            Component.HOLDS,
            reason=f"all NVIDIA stack packages ({', '.join(patterns)}) held; "
            "unattended-upgrades guard in place",
        )
    why = [
        w
        for w in (
            "hold the NVIDIA stack as one unit, dependencies included (FF-01, FF-02)" if pending else "",
            guard_state or "",
        )
        if w
    ]
    return Step(
        component=Component.HOLDS,
        action=Action.HOLD,
        packages=pending,
        tags=("holds",),
        target="held",
        current=f"{len(unheld)} unheld" if unheld else None,
        reason="; ".join(why),
    )


def _guard_state(facts: Facts, guard: str) -> str | None:
    """Why the unattended-upgrades guard must be written, or None when it is in place."""
    locks = facts.apt_locks
    if isinstance(locks, Unknown):
        return f"write the unattended-upgrades guard ({locks.unknown})"
    if locks.unattended_guard is None:
        return (
            "write the unattended-upgrades guard (FF-01: unattended-upgrade moved userspace under the module)"
        )
    if locks.unattended_guard != guard:
        return "restore the unattended-upgrades guard (it drifted from provision's text)"
    return None


def _unheld_stack(facts: Facts, patterns: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(facts.packages, Unknown):
        return ()
    return tuple(
        p.name
        for p in facts.packages
        if p.installed and not p.hold and any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)
    )
