"""The driver from the distribution's own archive (``driver.source: distro``): which packages, and
whether the kernel module is a signed precompiled one or built by DKMS.

Ubuntu builds signed precompiled modules per kernel flavour (source ``linux-restricted-modules``):
``linux-modules-nvidia-<branch>-server[-open]-<flavour>`` is a meta-package that follows the
flavour's kernel (it depends on the module package of the current kernel ABI and ``Provides``
``nvidia-dkms-<branch>-server[-open]``), so with it the next kernel gets its module too, and no DKMS
build or MOK enrollment is needed under Secure Boot. Debian builds the module with DKMS
(``nvidia-kernel-dkms`` in non-free, ``nvidia-open-kernel-dkms`` in contrib). Names, branches and
flavours: the catalog's ``distro_archives`` (``data/repos.yaml``), each row with its sources
(the archives' package indexes; tests/fixtures/distro holds Ubuntu's as published).

Everything here is pure: it reads the spec, the facts and the catalog.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from provision.catalog import Catalog
from provision.catalog.models import DistroArchive
from provision.detect.unknown import Unknown
from provision.spec.models import Spec

if TYPE_CHECKING:
    from provision.detect.facts import Facts

_ABI_FLAVOUR = re.compile(r"^\d+\.\d+\.\d+-\d+-(?P<flavour>[a-z][a-z0-9-]*)$")
"""Ubuntu's ``uname -r``: ``6.8.0-151-generic`` -> base flavour ``generic``."""


@dataclass(frozen=True)
class DistroDriver:
    """What the distribution's driver is on this machine.

    Attributes:
        archive: The catalog row of the distribution's archive.
        userspace: The userspace package names (no kernel module).
        module: The kernel module packages: the signed meta and the running kernel's package, or
            the DKMS package.
        signed: True when the module is signed precompiled (no DKMS, no MOK).
        flavour: The kernel flavour meta the signed module follows (``generic-hwe-24.04``), or None.
        why_dkms: Why DKMS builds the module (no signed modules here, or the flavour has none).
    """

    archive: DistroArchive
    userspace: tuple[str, ...]
    module: tuple[str, ...]
    signed: bool
    flavour: str | None
    why_dkms: str

    def kernel_module(self, branch: int, flavor: str, kernel: str) -> str | None:
        """The signed module package of ``kernel`` (None without signed modules)."""
        if not self.signed or self.archive.signed is None:
            return None
        return self.archive.names(self.archive.signed.kernel, branch, flavor, kernel=kernel)[0]

    @property
    def packages(self) -> tuple[str, ...]:
        return (*self.userspace, *self.module)

    @property
    def carrier(self) -> str:
        """The package whose version is the driver's (the first userspace package)."""
        return self.userspace[0]


def archive_for(spec: Spec, catalog: Catalog) -> DistroArchive | None:
    """The archive row for the spec's distribution when it carries the spec's branch and flavour."""
    archive = catalog.distro_archives.get(spec.os.repo_code)
    if archive is None or spec.driver.branch not in archive.driver_branches:
        return None
    return archive


def distro_driver(
    spec: Spec, facts: Facts, catalog: Catalog, flavor: str, kernels: tuple[str, ...] = ()
) -> DistroDriver | None:
    """The distribution's driver packages for this machine, or None when the archive does not carry
    the spec's branch (the spec rules refuse that, listing the branches it does carry).

    ``kernels`` are the machine's packaged kernels (``uname -r`` form): with signed modules, each
    one of a signed flavour gets its own module package too, so whichever kernel boots next has one.
    """
    archive = archive_for(spec, catalog)
    if archive is None or flavor not in archive.dkms:
        return None
    branch = spec.driver.branch
    userspace = archive.names(archive.userspace, branch, flavor)
    signed = archive.signed
    kernel = None if isinstance(facts.kernel, Unknown) else facts.kernel.release
    if signed is None:
        why = f"{spec.os.distro} {archive.series} has no signed precompiled NVIDIA modules"
    elif kernel is None:
        why = "the running kernel is unknown, so its flavour's signed module cannot be chosen"
    else:
        base = _base_flavour(kernel)
        if base is not None and base in signed.flavours:
            flavour = meta_flavour(facts, base)
            signed_kernels = dict.fromkeys(
                k for k in (kernel, *kernels) if _base_flavour(k) in signed.flavours
            )
            module = (
                *archive.names(signed.meta, branch, flavor, flavour=flavour),
                *(n for k in signed_kernels for n in archive.names(signed.kernel, branch, flavor, kernel=k)),
            )
            return DistroDriver(archive, userspace, module, True, flavour, "")
        why = (
            f"the running kernel {kernel} is of a flavour without signed modules in {archive.series} "
            f"(signed: {', '.join(signed.flavours)})"
        )
    dkms = archive.names(archive.dkms[flavor], branch, flavor)
    return DistroDriver(archive, userspace, dkms, False, None, why)


def _base_flavour(release: str) -> str | None:
    match = _ABI_FLAVOUR.match(release)
    return match["flavour"] if match else None


def meta_flavour(facts: Facts, base: str) -> str:
    """The flavour meta the machine's kernel follows: ``generic-hwe-24.04`` when the HWE kernel meta
    ``linux-image-generic-hwe-24.04`` is installed, else the base flavour (``generic``)."""
    if isinstance(facts.packages, Unknown):
        return base
    metas = sorted(
        p.name.removeprefix("linux-image-")
        for p in facts.packages
        if p.installed
        and p.name.startswith(f"linux-image-{base}-")
        and not re.search(r"-\d+\.\d+\.\d+-", p.name)
    )
    variants = [m for m in metas if re.fullmatch(rf"{re.escape(base)}-(hwe|lts)-\d+\.\d+(-edge)?", m)]
    return variants[-1] if variants else base


def hold_patterns(spec: Spec, catalog: Catalog) -> tuple[str, ...]:
    """Package patterns held with the stack beyond NVIDIA's names: the distribution driver's own
    (``libcuda1``, Ubuntu's ``linux-modules-nvidia-*``), and with ``driver.kernel_guard: hold`` the
    release's kernel meta-packages, whichever source the driver comes from (not preinstalled)."""
    archive = catalog.distro_archives.get(spec.os.repo_code)
    if archive is None or spec.driver.source == "preinstalled":
        return ()
    own = archive.hold_patterns if spec.driver.source == "distro" and archive_for(spec, catalog) else ()
    guard = archive.kernel_metas if spec.driver.kernel_guard == "hold" else ()
    return (*own, *guard)
