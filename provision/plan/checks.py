"""Checks of the detected machine against the spec that precede any step.

They refuse to plan on the wrong machine (OS, architecture), on a broken dpkg
state, and warn where detection could not see what the spec describes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from provision.catalog import Catalog
from provision.detect.domains.pci import NO_NVIDIA_PCI
from provision.detect.facts import Facts, Kernel, OsRelease, Unknown
from provision.fieldfailures import ff_ref
from provision.invariants.binding import GpuBound
from provision.os import PackageManager, repo_code, same_release
from provision.os.select import RELEASES
from provision.plan.models import Finding
from provision.spec.models import Spec
from provision.unknown import because, flat_reason

Severity = Literal["blocker", "warning"]
_ARCH_ALIASES = {"x86_64": {"x86_64", "amd64"}, "aarch64": {"aarch64", "arm64"}}


def check_facts(spec: Spec, facts: Facts, catalog: Catalog) -> tuple[Finding, ...]:
    """All facts-versus-spec findings, blockers and warnings, in a stable order."""
    pm = facts.package_manager(spec.os.distro)
    return (*_os(spec, facts), *_arch(spec, facts), *_broken(facts, pm), *_gpus(spec, facts, catalog))


def _os(spec: Spec, facts: Facts) -> Iterator[Finding]:
    if isinstance(facts.os, Unknown):
        yield _f("os-unknown", "blocker", because("cannot tell which OS the machine runs", facts.os.unknown))
        return
    os: OsRelease = facts.os
    if os.id != spec.os.distro or not same_release(spec.os.distro, spec.os.version, os.version_id):
        machine_repo = repo_code(os.id, os.version_id)
        wrong = RELEASES[facts.os_family()].wrong_release(spec.os.repo_code, machine_repo)
        note, source = wrong if wrong is not None else ("", "provision planner")
        yield _f(
            "os-mismatch",
            "blocker",
            f"the spec is for {spec.os.distro} {spec.os.version}, the machine runs {os.id} {os.version_id}"
            f" ({flat_reason(os.pretty_name or 'from /etc/os-release')})" + note,
            source=source,
        )


def _arch(spec: Spec, facts: Facts) -> Iterator[Finding]:
    machine = facts.kernel.machine if isinstance(facts.kernel, Kernel) else None
    if machine and machine not in _ARCH_ALIASES[spec.os.architecture]:
        message = f"the spec is for {spec.os.architecture}, the machine is {machine}"
        yield _f("arch-mismatch", "blocker", message)


def _broken(facts: Facts, pm: PackageManager) -> Iterator[Finding]:
    """A blocker for any unfinished package, NVIDIA's or not, or an interrupted dpkg run: the next
    transaction would stop on it, or apt would finish it unasked and leave the stack unheld."""
    if isinstance(facts.packages, Unknown):
        yield _f(
            "packages-unknown",
            "warning",
            because("installed packages unknown", facts.packages.unknown),
            unconfirmed=True,
        )
        return
    broken = [p for p in facts.packages if p.unfinished]
    locks = facts.package_locks
    interrupted = not isinstance(locks, Unknown) and locks.interrupted
    if broken or interrupted:
        what = [f"{p.name} ({p.state or 'unfinished'})" for p in broken]
        if interrupted:
            what.insert(0, pm.interrupted_note)
        yield _f(
            "broken-package-state",
            "blocker",
            f"broken package state: {', '.join(what)}; {pm.repair_advice(broken, interrupted)}, "
            "before anything else (FF-01)",
            source=f"field failures FF-01 ({ff_ref(1)}); {pm.state_source}",
        )


def _not_visible(spec: Spec, facts: Facts, gpus: Unknown) -> str:
    """Why no GPU is listed: none on the PCI bus at all (sysfs read, no NVIDIA function: a driver
    will not make the spec's GPUs appear), else nvidia-smi's reason, checked again after the driver
    loads."""
    pci = None if isinstance(facts.hardware, Unknown) else facts.hardware.pci
    if isinstance(pci, Unknown) and pci.unknown == NO_NVIDIA_PCI:
        return (
            f"no NVIDIA GPU in this machine: {NO_NVIDIA_PCI} (and {flat_reason(gpus.unknown)}); "
            f"the spec's {spec.gpus.count} x {spec.gpus.model} are not on the PCI bus, and "
            "installing a driver will not make them appear: is this the machine the spec describes?"
        )
    return (
        because("no GPU visible", gpus.unknown)
        + "; GPU count and model are checked by verify after the driver loads"
    )


def _gpus(spec: Spec, facts: Facts, catalog: Catalog) -> Iterator[Finding]:
    if isinstance(facts.gpus, Unknown):
        yield _f("gpus-not-visible", "warning", _not_visible(spec, facts, facts.gpus), unconfirmed=True)
        return
    if len(facts.gpus) != spec.gpus.count:
        yield _count_mismatch(spec, facts, catalog, len(facts.gpus))
    wanted = catalog.gpus.get(spec.gpus.model)
    for gpu in facts.gpus:
        seen = catalog.gpu_by_smi_name(gpu.name)
        if wanted is not None and seen is not None and seen.architecture != wanted.architecture:
            yield _f(
                "gpu-model-mismatch",
                "blocker",
                f"GPU {gpu.index} is {gpu.name} ({seen.architecture}), the spec says {wanted.name} "
                f"({wanted.architecture})",
            )


def _count_mismatch(spec: Spec, facts: Facts, catalog: Catalog, shown: int) -> Finding:
    """No step can add or remove a GPU: a plan that went on would call a machine that lost a GPU
    "matching the spec". Fewer GPUs than the spec while sysfs shows a GPU function bound to another
    driver, or to none, is that binding (gpu-bound's cause and fix); else usually one off the bus
    (Xid 79) or not seated/powered; more is another machine than the spec describes."""
    head = f"the spec expects {spec.gpus.count} GPU(s), nvidia-smi shows {shown}"
    binding = GpuBound().judge(spec, facts, catalog)
    if shown < spec.gpus.count and binding.violated:
        return _f(
            "gpu-count-mismatch",
            "blocker",
            f"{head}: sysfs shows {binding.observed}, so nvidia does not serve it: {binding.cause}; "
            f"{binding.fix}",
            source=GpuBound.source,
        )
    return _f(
        "gpu-count-mismatch",
        "blocker",
        f"{head}: no step can change that; if a GPU is missing, look for Xid 79 ('fallen off the bus') "
        "in the kernel log and check its seating, power and the BIOS; if the machine has "
        f"{shown} GPU(s), set gpus.count to {shown}",
        source="NVIDIA Xid Errors, Xid 79 (https://docs.nvidia.com/deploy/xid-errors/index.html)",
    )


def _f(
    rule: str,
    severity: Severity,
    message: str,
    source: str = "provision planner",
    *,
    unconfirmed: bool = False,
) -> Finding:
    return Finding(rule=rule, severity=severity, message=message, source=source, unconfirmed=unconfirmed)
