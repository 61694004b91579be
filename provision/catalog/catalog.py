"""The Catalog value: every table of the compatibility catalog, with lookups."""

from __future__ import annotations

import re

from packaging.version import Version
from pydantic import Field

from provision.catalog.lifecycle import (
    ArchLastBranch,
    DriverBranch,
    GspFirmwareRule,
    KernelBuild,
    LifecycleRule,
)
from provision.catalog.models import (
    Architecture,
    ArchMinBranch,
    ArchMinCuda,
    ComponentData,
    CudaFamily,
    CudaRelease,
    DistroArchive,
    GpuModel,
    KernelModuleRules,
    NvidiaRepo,
    RepoDistro,
    SigningKey,
    Source,
    TorchRelease,
    VariantProjects,
)
from provision.catalog.packages import PackageFormat, PackageNaming
from provision.models import Frozen
from provision.versions import DottedVersion

_VARIANT = re.compile(r"^cu(\d+)(\d)$")


class Catalog(Frozen):
    """The loaded catalog. Build it with :func:`provision.catalog.load_catalog`.

    Attributes:
        sources: Source key -> citation, for every key rows use.
        gpus: GPU id -> model, in catalog order.
        cuda_families: CUDA major -> minor-version-compatibility floor.
        cuda_releases: ``"13.0"`` -> release (GA toolkit driver, family floor).
        torch_releases: ``"2.11"`` -> release, ascending.
        variant_projects: Projects installed with torch from its variant index (torchvision, ...).
        driver_branches: Branch -> lifecycle row (type, end of life, a release date).
        lifecycle: How long before a branch's end of life the plan warns.
        kernel_modules: Open/proprietary flavour rules.
        arch_min_cuda: First CUDA release per compute capability.
        arch_min_branch: Oldest branch per architecture where sourced.
        arch_last_branch: Last branch per architecture that NVIDIA dropped (Volta -> 580).
        kernel_builds: Kernel series from which older releases of a branch do not build.
        gsp_firmware: Where the open modules find their GSP firmware, and the packages carrying it.
        repo_distros: Distro code -> NVIDIA repository entry.
        distro_archives: Distro code -> NVIDIA branches in the distribution's own archive.
        package_naming: Package naming rules per package format (``deb``, ``rpm``).
        components: Component name -> its data file (the package names it reads).
    """

    sources: dict[str, Source]
    gpus: dict[str, GpuModel]
    cuda_families: dict[int, CudaFamily]
    cuda_releases: dict[str, CudaRelease]
    torch_releases: dict[str, TorchRelease]
    index_url_pattern: str
    index_url_source: tuple[str, ...]
    variant_projects: VariantProjects
    driver_branches: dict[int, DriverBranch]
    lifecycle: LifecycleRule
    kernel_modules: KernelModuleRules
    arch_min_cuda: tuple[ArchMinCuda, ...]
    arch_min_branch: tuple[ArchMinBranch, ...]
    arch_last_branch: tuple[ArchLastBranch, ...]
    kernel_builds: tuple[KernelBuild, ...]
    gsp_firmware: GspFirmwareRule
    repo_url_pattern: str
    repo_url_arch: dict[str, str]
    signing_keys: dict[PackageFormat, SigningKey]
    repo_distros: dict[str, RepoDistro]
    distro_archives: dict[str, DistroArchive]
    package_naming: dict[PackageFormat, PackageNaming]
    components: dict[str, ComponentData] = Field(default_factory=dict)

    def naming(self, package_format: str) -> PackageNaming:
        """The package names of one format (``deb``, ``rpm``: the host's package manager's);
        the deb names for a format the catalog has none of."""
        found: PackageNaming | None = self.package_naming.get(package_format)  # type: ignore[call-overload]
        return found if found is not None else self.package_naming["deb"]

    def package_name_patterns(self, package_format: str | None = None) -> tuple[str, ...]:
        """Every component's package-name regular expressions of one package format (``deb``,
        ``rpm``; every format's when None), in file order, once each."""
        found = (
            p
            for c in self.components.values()
            for fmt, names in c.package_names.items()
            if package_format in (None, fmt)
            for p in names
        )
        return tuple(dict.fromkeys(found))

    def gpu(self, model_id: str) -> GpuModel | None:
        """The GPU model with this id, or None."""
        return self.gpus.get(model_id)

    def gpus_by_smi_name(self, name: str) -> tuple[GpuModel, ...]:
        """Every model whose nvidia-smi name is ``name`` (exact, whitespace-trimmed)."""
        return tuple(g for g in self.gpus.values() if name.strip() in g.smi_names)

    def gpu_by_smi_name(self, name: str) -> GpuModel | None:
        """The one model nvidia-smi prints as ``name``; None if none or several match (ambiguous)."""
        found = self.gpus_by_smi_name(name)
        return found[0] if len(found) == 1 else None

    def gpu_by_pci_device(self, device_id: str) -> GpuModel | None:
        """The model with PCI device id ``device_id`` (``0x2335``), where a public source gives it
        (:attr:`GpuModel.pci`)."""
        wanted = device_id.lower()
        return next((g for g in self.gpus.values() if wanted in g.pci_device_ids), None)

    def cuda_release(self, release: DottedVersion) -> CudaRelease | None:
        """Release X.Y (``13.0``; a longer version is cut to X.Y), or None if not in the catalog."""
        return self.cuda_releases.get(f"{release.major}.{release.minor}")

    def cuda_family(self, major: int) -> CudaFamily | None:
        return self.cuda_families.get(major)

    def torch_release(self, version: Version) -> TorchRelease | None:
        """PyTorch release matched on major.minor (``2.11.0`` -> the ``2.11`` row), or None."""
        return self.torch_releases.get(f"{version.major}.{version.minor}")

    def variant_cuda(self, variant: str) -> DottedVersion:
        """CUDA release a wheel variant is built for: ``cu130`` -> ``13.0``, ``cu118`` -> ``11.8``.

        Raises:
            ValueError: If ``variant`` is not of the form ``cu<major><minor>``.
        """
        match = _VARIANT.match(variant)
        if not match:
            raise ValueError(f"{variant!r} is not a CUDA wheel variant such as cu130")
        return DottedVersion(f"{int(match[1])}.{match[2]}")

    def index_url(self, variant: str) -> str:
        """PyTorch wheel index of a variant: ``https://download.pytorch.org/whl/cu130`` (PT-REL)."""
        return self.index_url_pattern.format(variant=variant)

    def driver_branch(self, branch: int) -> DriverBranch | None:
        return self.driver_branches.get(branch)

    def repository(self, code: str, arch: str = "x86_64") -> NvidiaRepo | None:
        """NVIDIA's repository for distro ``code`` on machine ``arch`` (x86_64/aarch64), or None."""
        distro = self.repo_distros.get(code)
        if distro is None or arch not in self.repo_url_arch:
            return None
        url = self.repo_url_pattern.format(code=code, arch=self.repo_url_arch[arch])
        key = self.signing_keys[distro.package_format]
        return NvidiaRepo(
            code=code,
            package_format=distro.package_format,
            url=url,
            key_url=url + key.file,
            fingerprint=key.fingerprint,
            cuda_releases=distro.cuda_releases,
            source=tuple(dict.fromkeys(distro.source + key.source)),
            conf=distro.conf,
            note=distro.note,
        )

    def min_cuda_for(self, gpu: GpuModel) -> DottedVersion | None:
        """First CUDA release supporting the GPU's compute capability, if the catalog has it."""
        row = next((r for r in self.arch_min_cuda if r.cc == gpu.compute_capability), None)
        return row.cuda if row else None

    def min_branch_for(self, arch: Architecture) -> ArchMinBranch | None:
        return next((r for r in self.arch_min_branch if r.arch == arch), None)

    def last_branch_for(self, arch: Architecture) -> ArchLastBranch | None:
        """The last branch that supports ``arch`` (Volta -> 580); None while NVIDIA supports it."""
        return next((r for r in self.arch_last_branch if r.arch == arch), None)

    def branch_architectures(self, branch: int) -> tuple[Architecture, ...]:
        """The architectures ``branch`` supports, oldest first: from each one's first branch (where
        sourced) to its last (where NVIDIA dropped it)."""
        found = []
        for arch in Architecture:
            floor, last = self.min_branch_for(arch), self.last_branch_for(arch)
            if (floor is None or branch >= floor.branch) and (last is None or branch <= last.branch):
                found.append(arch)
        return tuple(found)

    def cite(self, keys: tuple[str, ...]) -> str:
        """Human citation for source keys, with the public URL where ``sources.yaml`` has one:
        ``CUDA 13.2 U2 release notes, Tables 2 and 3 (RN132): https://...``; a user can open what a
        finding cites without the catalog at hand."""
        return "; ".join(_citation(k, self.sources[k]) for k in keys)


def _citation(key: str, source: Source) -> str:
    """``cite (KEY): url``, or ``cite (KEY)`` for a source without a public URL."""
    return f"{source.cite} ({key}): {source.url}" if source.url else f"{source.cite} ({key})"
