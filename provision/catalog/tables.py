"""The catalog's YAML files, each validated by a strict model, assembled into a :class:`Catalog`.

Cross-file checks follow the per-file ones (every source key defined, every torch variant has an
arch list, ids unique). Any problem raises :class:`CatalogError` naming the file and the problem.
The main catalog loads this module only when it is read file by file
(:func:`provision.catalog.loader.load_catalog_from` on edited files, and at build time): the
shipped one comes from its snapshot, without these models. The serving and monitoring catalogs
(:mod:`provision.catalog.serving`, :mod:`provision.catalog.monitoring`), read from their own files
by a spec that serves or monitors, use its readers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from provision.catalog.catalog import Catalog
from provision.catalog.lifecycle import (
    ArchLastBranch,
    DriverBranch,
    GspFirmwareRule,
    KernelBuild,
    LifecycleRule,
)
from provision.catalog.models import (
    ArchList,
    ArchMinBranch,
    ArchMinCuda,
    ComponentData,
    CudaFamily,
    CudaRelease,
    CudaRow,
    DistroArchive,
    GpuModel,
    KernelModuleRules,
    RepoDistro,
    SigningKey,
    Source,
    Sourced,
    TorchRelease,
    VariantProjects,
)
from provision.catalog.packages import PackageFormat, PackageNaming
from provision.catalog.prebuilt import DATA_DIR, read_data
from provision.errors import CatalogError
from provision.models import Frozen
from provision.versions import DottedVersion

__all__ = ["DATA_DIR", "read_catalog"]

M = TypeVar("M", bound=BaseModel)


class SourcesFile(Frozen):
    sources: dict[str, Source]


class CudaFile(Frozen):
    families: tuple[CudaFamily, ...]
    releases: tuple[CudaRow, ...]


class TorchFile(Frozen):
    index_url_pattern: str
    index_url_source: tuple[str, ...]
    variant_projects: VariantProjects
    releases: tuple[TorchRelease, ...]
    arch_lists: tuple[ArchList, ...]


class GpusFile(Frozen):
    gpus: tuple[GpuModel, ...]
    arch_min_cuda: tuple[ArchMinCuda, ...]


class DriversFile(Frozen):
    lifecycle: LifecycleRule
    branches: tuple[DriverBranch, ...]
    kernel_modules: KernelModuleRules
    arch_min_branch: tuple[ArchMinBranch, ...]
    arch_last_branch: tuple[ArchLastBranch, ...]
    kernel_builds: tuple[KernelBuild, ...]
    gsp_firmware: GspFirmwareRule


class ReposFile(Frozen):
    url_pattern: str
    url_source: tuple[str, ...]
    url_arch: dict[str, str]
    signing_keys: dict[PackageFormat, SigningKey]
    distros: tuple[RepoDistro, ...]
    distro_archives: tuple[DistroArchive, ...]


class PackagesFile(Frozen):
    """One package format's rules in ``packages.yaml``."""

    unsuffixed_from_branch: int
    unsuffixed_source: tuple[str, ...]
    pinning: dict[str, Any] | None = None
    driver_meta: dict[str, Any]
    fabric_manager: dict[str, Any]
    nscq: dict[str, Any]
    nvlink5: dict[str, Any]
    cuda_toolkit: dict[str, Any]
    cudnn: dict[str, Any]
    nccl: dict[str, Any]
    stack_patterns: dict[str, Any]
    driver_family: dict[str, Any] | None = None
    closed_modules: dict[str, Any] | None = None

    def naming(self) -> dict[str, Any]:
        """The file's rules keyed as :class:`PackageNaming` fields (``pinning`` -> ``pinning_rule``)."""
        rules = {f"{name}_rule": getattr(self, name) for name in _RULES if getattr(self, name) is not None}
        family = {"driver_family_rule": self.driver_family} if self.driver_family else {}
        family |= {"closed_modules_rule": self.closed_modules} if self.closed_modules else {}
        return rules | family | {"stack_rule": self.stack_patterns, **self.model_dump(include=_CUTOVER)}


_RULES = ("pinning", "driver_meta", "fabric_manager", "nscq", "nvlink5", "cuda_toolkit", "cudnn", "nccl")
_CUTOVER = {"unsuffixed_from_branch", "unsuffixed_source"}


def _load_formats(directory: Path, name: str) -> dict[PackageFormat, PackagesFile]:
    """``packages.yaml``: one :class:`PackagesFile` per package format key (``deb``, ``rpm``)."""
    path = directory / name
    data = _read(path)
    if not isinstance(data, dict) or not data or not set(data) <= set(get_args(PackageFormat)):
        raise CatalogError(f"catalog file {path}: top-level keys must be package formats (deb, rpm)")
    return {fmt: _validate(PackagesFile, rules, path) for fmt, rules in data.items()}


def _read(path: Path) -> Any:
    return read_data(path)


def _validate(model: type[M], data: Any, path: Path) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CatalogError(f"catalog file {path}: {problems}") from None


def _load(directory: Path, name: str, model: type[M]) -> M:
    path = directory / name
    return _validate(model, _read(path), path)


def _sourced(value: object) -> Iterator[Sourced]:
    """Every :class:`Sourced` row inside ``value`` (models, tuples, dicts), depth first."""
    if isinstance(value, Sourced):
        yield value
    if isinstance(value, BaseModel):
        for field in type(value).model_fields:
            yield from _sourced(getattr(value, field))
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _sourced(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _sourced(item)


def _check_sources(name: str, content: BaseModel, known: dict[str, Source]) -> None:
    for row in _sourced(content):
        unknown = [k for k in row.source if k not in known]
        if unknown:
            raise CatalogError(f"catalog file {name}: source key(s) {unknown} not defined in sources.yaml")


def _unique(name: str, what: str, keys: list[str]) -> None:
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise CatalogError(f"catalog file {name}: duplicate {what}: {', '.join(dupes)}")


def _cuda_releases(cuda: CudaFile) -> dict[str, CudaRelease]:
    families = {f.major: f for f in cuda.families}
    groups: dict[str, list[CudaRow]] = {}
    for row in cuda.releases:
        groups.setdefault(f"{row.version.major}.{row.version.minor}", []).append(row)
    return {key: _cuda_release(key, rows, families) for key, rows in groups.items()}


def _cuda_release(key: str, rows: list[CudaRow], families: dict[int, CudaFamily]) -> CudaRelease:
    ga = next((r for r in rows if len(r.version.parts) < 3 or r.version.parts[2] == 0), None)
    family = families.get(rows[0].version.major)
    if ga is None or family is None:
        raise CatalogError(f"catalog file cuda.yaml: release {key} lacks a GA (X.Y.0) row or a family floor")
    return CudaRelease(
        release=DottedVersion(key),
        toolkit_driver=ga.toolkit_driver,
        family_floor=family.min_branch,
        updates=tuple(rows),
        source=ga.source,
        conf=ga.conf,
        note=ga.note,
    )


def _torch_releases(torch: TorchFile) -> dict[str, TorchRelease]:
    return {r.release.text: _attach_arches(r, torch.arch_lists) for r in torch.releases}


def _attach_arches(release: TorchRelease, arch_lists: tuple[ArchList, ...]) -> TorchRelease:
    arches: dict[str, ArchList] = {}
    for variant in release.variants:
        found = [a for a in arch_lists if a.variant == variant and a.covers(release.release)]
        if len(found) != 1:
            raise CatalogError(
                f"catalog file torch.yaml: release {release.release} {variant} needs exactly one arch list, "
                f"found {len(found)}"
            )
        arches[variant] = found[0]
    if release.pypi_default not in release.variants:
        raise CatalogError(f"catalog file torch.yaml: release {release.release} pypi_default not a variant")
    return release.model_copy(update={"arches": arches})


class _Files(Frozen):
    """All catalog files, validated one by one."""

    sources: SourcesFile
    cuda: CudaFile
    torch: TorchFile
    gpus: GpusFile
    drivers: DriversFile
    repos: ReposFile
    packages: dict[PackageFormat, PackagesFile]


def _read_all(directory: Path) -> _Files:
    return _Files(
        sources=_load(directory, "sources.yaml", SourcesFile),
        cuda=_load(directory, "cuda.yaml", CudaFile),
        torch=_load(directory, "torch.yaml", TorchFile),
        gpus=_load(directory, "gpus.yaml", GpusFile),
        drivers=_load(directory, "drivers.yaml", DriversFile),
        repos=_load(directory, "repos.yaml", ReposFile),
        packages=_load_formats(directory, "packages.yaml"),
    )


def _components(directory: Path) -> dict[str, ComponentData]:
    """The components' data files, ``components/<component>.yaml``, by component name."""
    found: dict[str, ComponentData] = {}
    for path in sorted((directory / "components").glob("*.yaml")):
        data = _validate(ComponentData, _read(path), path)
        if data.component != path.stem:
            raise CatalogError(f"catalog file {path}: component {data.component!r} must match the file name")
        found[data.component] = data
    return found


def _check(files: _Files) -> None:
    for field in _Files.model_fields:
        _check_sources(f"{field}.yaml", getattr(files, field), files.sources.sources)
    _unique("gpus.yaml", "GPU ids", [g.id for g in files.gpus.gpus])
    _unique("cuda.yaml", "CUDA versions", [r.version.text for r in files.cuda.releases])
    _unique("torch.yaml", "torch releases", [r.release.text for r in files.torch.releases])
    _unique("repos.yaml", "distro codes", [d.code for d in files.repos.distros])
    _unique("drivers.yaml", "driver branches", [str(b.branch) for b in files.drivers.branches])
    _unique(
        "drivers.yaml",
        "architectures of arch_last_branch",
        [r.arch.value for r in files.drivers.arch_last_branch],
    )
    missing = set(files.drivers.kernel_modules.open_required_gpus.gpus) - {g.id for g in files.gpus.gpus}
    if missing:
        raise CatalogError(f"catalog file drivers.yaml: open_required_gpus: unknown ids {sorted(missing)}")


def _build(files: _Files, directory: Path) -> Catalog:
    return Catalog(
        sources=files.sources.sources,
        gpus={g.id: g for g in files.gpus.gpus},
        cuda_families={f.major: f for f in files.cuda.families},
        cuda_releases=_cuda_releases(files.cuda),
        torch_releases=_torch_releases(files.torch),
        index_url_pattern=files.torch.index_url_pattern,
        index_url_source=files.torch.index_url_source,
        variant_projects=files.torch.variant_projects,
        driver_branches={b.branch: b for b in files.drivers.branches},
        lifecycle=files.drivers.lifecycle,
        kernel_modules=files.drivers.kernel_modules,
        arch_min_cuda=files.gpus.arch_min_cuda,
        arch_min_branch=files.drivers.arch_min_branch,
        arch_last_branch=files.drivers.arch_last_branch,
        kernel_builds=files.drivers.kernel_builds,
        gsp_firmware=files.drivers.gsp_firmware,
        repo_url_pattern=files.repos.url_pattern,
        repo_url_arch=files.repos.url_arch,
        signing_keys=files.repos.signing_keys,
        repo_distros={d.code: d for d in files.repos.distros},
        distro_archives={a.code: a for a in files.repos.distro_archives},
        package_naming={
            fmt: _validate(PackageNaming, rules.naming(), directory / "packages.yaml")
            for fmt, rules in files.packages.items()
        },
        components=_components(directory),
    )


def read_catalog(directory: Path) -> Catalog:
    """The catalog in ``directory``, read and validated file by file.

    Raises:
        CatalogError: Naming the file and the problem.
    """
    files = _read_all(directory)
    _check(files)
    return _build(files, directory)
