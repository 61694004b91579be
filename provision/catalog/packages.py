"""Package names in NVIDIA's CUDA repositories, per package format (deb, rpm) and driver branch.

Sources: catalog ``packages.yaml`` (keys DIG, GDC, APT-2404 of ``data/sources.yaml``).

Below branch 580 NVIDIA puts the branch in the package name (``nvidia-fabricmanager-575``);
from 580 on the name is unsuffixed and the branch lives in the version, locked with
``nvidia-driver-pinning-<branch>``.
"""

from __future__ import annotations

from typing import Literal

from provision.catalog.models import Flavor, Sourced
from provision.models import Frozen
from provision.versions import DottedVersion, DriverVersion


class BranchNamed(Sourced):
    """A package whose name carries the branch below the cut-over and not from it on."""

    suffixed: str
    unsuffixed: str

    def name(self, branch: int, cutover: int) -> str:
        return self.unsuffixed if branch >= cutover else self.suffixed.format(branch=branch)


class Pinning(Sourced):
    name: str
    from_branch: int


class DriverMetas(Frozen):
    open: BranchNamed
    proprietary: BranchNamed


class FabricManagerNaming(BranchNamed):
    version_format: str


class Nvlink5Naming(Sourced):
    packages: tuple[str, ...]
    from_branch: int


class ToolkitNaming(Sourced):
    name: str


class CudnnNaming(Sourced):
    runtime: str
    headers: str
    dev: str


class NcclNaming(Sourced):
    runtime: str
    dev: str
    version_format: str


class StackPatterns(Sourced):
    patterns: tuple[str, ...]


class PackageNaming(Frozen):
    """Package names for one package format of NVIDIA's repositories (``packages.yaml`` ``deb``/``rpm``).
    All methods are pure.

    Attributes:
        unsuffixed_from_branch: First branch published under unsuffixed names (580).
    """

    unsuffixed_from_branch: int
    unsuffixed_source: tuple[str, ...]
    pinning_rule: Pinning | None = None
    driver_meta_rule: DriverMetas
    fabric_manager_rule: FabricManagerNaming
    nscq_rule: BranchNamed
    nvlink5_rule: Nvlink5Naming
    cuda_toolkit_rule: ToolkitNaming
    cudnn_rule: CudnnNaming
    nccl_rule: NcclNaming
    stack_rule: StackPatterns
    driver_family_rule: StackPatterns | None = None
    closed_modules_rule: ToolkitNaming | None = None

    @property
    def driver_family(self) -> tuple[str, ...]:
        """The driver's package globs that its version pin covers (``kmod-nvidia-*`` on rpm); empty
        when the format's rules leave it to the component's default."""
        return self.driver_family_rule.patterns if self.driver_family_rule else ()

    @property
    def closed_modules(self) -> str:
        """The package that brings the proprietary kernel modules, forbidden beside the open ones
        (deb ``nvidia-driver``, rpm ``kmod-nvidia-latest-dkms``)."""
        return self.closed_modules_rule.name if self.closed_modules_rule else "nvidia-driver"

    def pinning(self, branch: int) -> str | None:
        """``nvidia-driver-pinning-580`` from branch 580 on; None below (suffixed metas pin instead)."""
        rule = self.pinning_rule
        return rule.name.format(branch=branch) if rule is not None and branch >= rule.from_branch else None

    def driver_meta(self, branch: int, flavor: Flavor) -> str:
        """``nvidia-open`` / ``cuda-drivers`` from 580; ``nvidia-open-575`` / ``cuda-drivers-575`` below."""
        rule = self.driver_meta_rule.open if flavor == "open" else self.driver_meta_rule.proprietary
        return rule.name(branch, self.unsuffixed_from_branch)

    def fabric_manager(self, branch: int) -> str:
        """``nvidia-fabricmanager`` from 580, ``nvidia-fabricmanager-<branch>`` below (GDC)."""
        return self.fabric_manager_rule.name(branch, self.unsuffixed_from_branch)

    def fm_version_string(self, driver_version: DriverVersion) -> str:
        """Debian version of the FM package for an exact driver: ``580.95.05`` -> ``580.95.05-1``."""
        return self.fabric_manager_rule.version_format.format(driver=driver_version.text)

    def nscq(self, branch: int) -> str:
        """``libnvidia-nscq`` from 580, ``libnvidia-nscq-<branch>`` below (GDC)."""
        return self.nscq_rule.name(branch, self.unsuffixed_from_branch)

    def nvlink5(self, branch: int) -> tuple[str, ...]:
        """Extra packages for NVLink 5 systems (``nvlsm``, ``infiniband-diags``); ``()`` below 580."""
        rule = self.nvlink5_rule
        return rule.packages if branch >= rule.from_branch else ()

    def cuda_toolkit(self, release: DottedVersion) -> str:
        """Driver-free toolkit package: ``13.0`` -> ``cuda-toolkit-13-0`` (never ``cuda``/``cuda-X-Y``)."""
        return self.cuda_toolkit_rule.name.format(major=release.major, minor=release.minor)

    def cudnn(self, cuda_major: int) -> tuple[str, str, str]:
        """cuDNN 9's package family, runtime first: 13 -> ``libcudnn9-cuda-13``,
        ``libcudnn9-headers-cuda-13``, ``libcudnn9-dev-cuda-13`` (dev needs the headers at its version)."""
        rule = self.cudnn_rule
        return (
            rule.runtime.format(major=cuda_major),
            rule.headers.format(major=cuda_major),
            rule.dev.format(major=cuda_major),
        )

    def nccl(self) -> tuple[str, str]:
        """NCCL runtime and dev packages: ``libnccl2``, ``libnccl-dev``."""
        return self.nccl_rule.runtime, self.nccl_rule.dev

    def nccl_deb_version(self, nccl: DottedVersion, cuda_release: DottedVersion) -> str:
        """Debian version of the NCCL packages: ``2.28.3`` for ``13.0`` -> ``2.28.3-1+cuda13.0``."""
        return self.nccl_rule.version_format.format(
            nccl=nccl.text, major=cuda_release.major, minor=cuda_release.minor
        )

    @property
    def stack_patterns(self) -> tuple[str, ...]:
        """Package-name globs making up the NVIDIA stack, for holds and unattended-upgrades (FF-01)."""
        return self.stack_rule.patterns


PackageFormat = Literal["deb", "rpm"]
"""The catalog's key for a package format (:attr:`provision.os.base.PackageManager.package_format`)."""
