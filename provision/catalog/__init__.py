"""Compatibility catalog: CUDA, drivers, PyTorch wheels, GPUs, NVIDIA's repository and package names.

Data lives in ``data/*.yaml``; every row names its source (keys of ``data/sources.yaml``, each
with the public document or URL it stands for) and a confidence ``conf`` (P primary, S secondary,
U unverified). The catalog is loaded and validated on first use and cached.

Public API::

    from provision.catalog import load_catalog, Catalog
    cat = load_catalog()                             # cached; raises CatalogError naming file and problem
    cat.gpus                                         # dict[str, GpuModel], e.g. cat.gpus["h200-sxm"]
    cat.gpu("a100x") -> GpuModel | None
    cat.gpu_by_smi_name("NVIDIA H200") -> GpuModel | None     # None when unknown or ambiguous
    cat.gpus_by_smi_name(name) -> tuple[GpuModel, ...]        # every candidate
    cat.gpu_by_pci_device("0x2335") -> GpuModel | None
    cat.cuda_release(DottedVersion("13.0")) -> CudaRelease | None
        # .release, .toolkit_driver (DriverVersion of the GA row, None if unsourced), .family_floor (580),
        # .updates (rows), .verified, .source, .conf
    cat.cuda_family(13) -> CudaFamily | None         # .min_branch
    cat.torch_release(Version("2.11.0")) -> TorchRelease | None   # matched on major.minor
        # .variants, .builds[variant].cudnn, .pypi_default, .python_min, .python_max (DottedVersion),
        # .arch_list(variant) -> ("sm_75", ..., "sm_120"), .ptx(variant) -> bool, .arches[variant], .status
    cat.variant_cuda("cu130") -> DottedVersion("13.0")
    cat.index_url("cu130") -> "https://download.pytorch.org/whl/cu130"
    cat.driver_branch(580) -> DriverBranch | None    # .type, .eol ("2028-06" | "ended" | None), .eol_text,
        # .max_cuda_major, .state(as_of, cat.lifecycle.notice_days): ended | ending | supported | undated
    cat.last_branch_for(Architecture.VOLTA) -> ArchLastBranch | None   # .branch 580
    cat.branch_architectures(595) -> (Architecture.TURING, ..., Architecture.BLACKWELL)
    cat.kernel_builds                                # rows: branch, kernel series, first release that builds
    cat.kernel_modules                               # open/proprietary flavour rules
    cat.min_cuda_for(gpu) -> DottedVersion | None; cat.min_branch_for(arch) -> ArchMinBranch | None
    cat.repository("ubuntu2404", arch="x86_64") -> NvidiaRepo | None
        # .code, .url, .key_url, .fingerprint, .cuda_releases (empty = unknown), .package_format
    cat.distro_archives["debian12"].driver_branches  # (535,)
    cat.naming(fmt) -> PackageNaming (fmt deb/rpm): pinning(branch), driver_meta(branch, flavor),
        fabric_manager(branch),
        fm_version_string(driver_version), nscq(branch), nvlink5(branch), cuda_toolkit(release),
        cudnn(cuda_major), nccl(), nccl_deb_version(nccl, cuda_release), stack_patterns
    cat.components["dkms"].package_names             # per-component data, data/components/<name>.yaml
    package_name_patterns() -> ("nvidia", "libnv", ...)  # what detection keeps from the package database
    cat.cite(("RN132",)) -> "CUDA 13.2 U2 release notes, Tables 2 and 3 (RN132)"
"""

from provision.catalog.catalog import Catalog
from provision.catalog.components import package_name_patterns
from provision.catalog.lifecycle import DriverBranch
from provision.catalog.loader import load_catalog, load_catalog_from
from provision.catalog.models import (
    Architecture,
    CudaRelease,
    Flavor,
    GpuModel,
    NvidiaRepo,
    TorchRelease,
)
from provision.catalog.packages import PackageNaming

__all__ = [
    "Architecture",
    "Catalog",
    "CudaRelease",
    "DriverBranch",
    "Flavor",
    "GpuModel",
    "NvidiaRepo",
    "PackageNaming",
    "TorchRelease",
    "load_catalog",
    "load_catalog_from",
    "package_name_patterns",
]
