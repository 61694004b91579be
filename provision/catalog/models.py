"""Typed rows of the compatibility catalog.

Every row carries ``source`` (keys of ``data/sources.yaml``, each naming a public document, a
URL or a document in ``docs/``) and ``conf``: ``P`` primary, ``S`` secondary, ``U``
unverified. Rules read ``conf`` to decide how far to trust a value.
"""

from __future__ import annotations

import functools
from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from provision.models import Frozen
from provision.versions import Dotted, DottedVersion, Driver, Pep440

Conf = Literal["P", "S", "U"]
"""Confidence: primary source, secondary source, unverified."""

SourceKeys = Annotated[tuple[str, ...], Field(min_length=1)]

Flavor = Literal["open", "proprietary"]
"""NVIDIA kernel module flavour (DIG "Kernel Modules"): open (needs a GSP) or proprietary."""


class Sourced(Frozen):
    """Base of every catalog row: where the value comes from and how sure it is."""

    source: SourceKeys
    conf: Conf
    note: str | None = None


class ComponentData(Frozen):
    """One component's catalog file (``data/components/<component>.yaml``).

    Attributes:
        component: The component's plan name (``fabric_manager``).
        package_names: Per package format (``deb``, ``rpm``), regular expressions (searched,
            unanchored unless written with ``^``/``$``) of the package names the component reads
            from the package database; detection keeps only packages matching one of any
            component's, of any format (a host's database holds only its own format's names).
        why: Which packages these are.
    """

    component: str
    package_names: dict[Literal["deb", "rpm"], tuple[str, ...]]
    why: str


class Source(Frozen):
    """One entry of ``sources.yaml``: a short citation and, where public, its URL."""

    cite: str
    url: str | None = None


@functools.total_ordering
class Architecture(Enum):
    """NVIDIA GPU architecture, ordered by generation (``Architecture.VOLTA < Architecture.TURING``)."""

    MAXWELL = "maxwell"
    PASCAL = "pascal"
    VOLTA = "volta"
    TURING = "turing"
    AMPERE = "ampere"
    ADA = "ada"
    HOPPER = "hopper"
    BLACKWELL = "blackwell"

    @property
    def rank(self) -> int:
        """Generation index, 0 for Maxwell."""
        return list(Architecture).index(self)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Architecture):
            return NotImplemented
        return self.rank < other.rank

    def __str__(self) -> str:
        return self.value

    @property
    def title(self) -> str:
        """``Blackwell``."""
        return self.value.capitalize()


# ---- CUDA ---------------------------------------------------------------------------------------


class CudaFamily(Sourced):
    """Minor-version-compatibility floor of one CUDA major (RN132 Table 2).

    Attributes:
        major: CUDA major, e.g. 13.
        min_branch: Oldest driver branch running any toolkit of this major, e.g. 580.
        min_driver: Exact floor where the table gives one (11.x: 450.80.02).
    """

    major: int
    min_branch: int
    min_driver: Driver | None = None


class CudaRow(Sourced):
    """One toolkit release row of RN132 Table 3, e.g. 13.0.2 -> 580.95.05.

    Attributes:
        version: Full toolkit version X.Y.Z.
        toolkit_driver: Linux driver packaged with the toolkit; None where Table 3 has no row.
        runfile_driver: Driver bundled in NVIDIA's runfile name, when seen.
    """

    version: Dotted
    toolkit_driver: Driver | None = None
    runfile_driver: Driver | None = None


class CudaRelease(Sourced):
    """A CUDA release X.Y as rules use it (built from its GA row and family).

    Attributes:
        release: ``DottedVersion("13.0")``.
        toolkit_driver: Full-support floor, the GA (X.Y.0) row's toolkit driver; None when unsourced (conf U).
        family_floor: Minor-version-compatibility floor branch of the major, e.g. 580.
        updates: Every row of this release, GA first.
    """

    release: Dotted
    toolkit_driver: Driver | None
    family_floor: int
    updates: tuple[CudaRow, ...]

    @property
    def major(self) -> int:
        return self.release.major

    @property
    def verified(self) -> bool:
        """Whether a toolkit driver is sourced for this release (conf P or S)."""
        return self.toolkit_driver is not None and self.conf != "U"


# ---- PyTorch ------------------------------------------------------------------------------------


class TorchBuild(Frozen):
    """One CUDA variant published for a PyTorch release.

    Attributes:
        cudnn: cuDNN version pinned by the wheel, when RELEASE.md gives it.
        since: First patch release carrying the variant when it came after X.Y.0 (2.12.1 for cu129).
    """

    cudnn: Dotted | None = None
    since: Pep440 | None = None
    note: str | None = None


class ArchList(Sourced):
    """Compute capabilities compiled (SASS) into a variant over a range of releases (PT-MATRIX).

    Attributes:
        variant: ``cu130``.
        first: First PyTorch release X.Y with this list.
        last: Last PyTorch release X.Y with this list (inclusive).
        sm: Compute capabilities with SASS, ascending, e.g. ``7.5`` ... ``12.0``.
        ptx: Whether PTX of the last entry is also shipped (``12.0+PTX``).
    """

    variant: str
    first: Dotted
    last: Dotted
    sm: tuple[Dotted, ...]
    ptx: bool

    def covers(self, release: DottedVersion) -> bool:
        return self.first <= release <= self.last


class TorchRelease(Sourced):
    """A PyTorch release X.Y: Python range, CUDA variants, PyPI default, arch lists.

    Attributes:
        release: ``DottedVersion("2.11")``; matches every 2.11.z.
        status: ``planned`` for a release not confirmed shipped (2.14).
        python_min / python_max: Supported interpreters, inclusive (experimental ones excluded).
        builds: CUDA variant -> build facts (cuDNN pin).
        pypi_default: Variant of the plain PyPI wheel on Linux x86_64.
        arches: Arch lists per variant for this release (filled by the loader).
    """

    release: Dotted
    status: Literal["released", "planned"]
    python: tuple[Dotted, Dotted]
    builds: dict[str, TorchBuild] = Field(alias="variants")
    pypi_default: str
    pypi_default_conf: Conf
    arches: dict[str, ArchList] = Field(default_factory=dict)

    @property
    def python_min(self) -> DottedVersion:
        return self.python[0]

    @property
    def python_max(self) -> DottedVersion:
        return self.python[1]

    @property
    def variants(self) -> tuple[str, ...]:
        """CUDA variants published for this release, e.g. ``("cu126", "cu128", "cu129", "cu130")``."""
        return tuple(self.builds)

    def arch_list(self, variant: str) -> tuple[str, ...]:
        """Compiled architectures of ``variant`` as ``("sm_75", ..., "sm_120")``; ``()`` if unknown."""
        arches = self.arches.get(variant)
        return tuple(f"sm_{cc.major}{cc.minor}" for cc in arches.sm) if arches else ()

    def ptx(self, variant: str) -> bool:
        """Whether ``variant`` also ships PTX of its newest architecture (JIT for newer GPUs)."""
        arches = self.arches.get(variant)
        return bool(arches and arches.ptx)


# ---- GPUs and drivers ---------------------------------------------------------------------------


class Peaks(Sourced):
    """Published dense peaks of one GPU model (NVIDIA datasheets print the sparse figure with an
    asterisk, "with sparsity"; the dense figure is half of it and is the one kept here).

    Attributes:
        bf16_dense_tflops / fp16_dense_tflops / tf32_dense_tflops: Tensor Core peaks, TFLOP/s.
        memory_bandwidth_gbps: GPU memory bandwidth, GB/s.
        unpublished: Why a figure is absent (no public NVIDIA figure found); required when bf16 is.
    """

    bf16_dense_tflops: float | None = Field(None, gt=0)
    fp16_dense_tflops: float | None = Field(None, gt=0)
    tf32_dense_tflops: float | None = Field(None, gt=0)
    memory_bandwidth_gbps: float | None = Field(None, gt=0)
    unpublished: str | None = None

    @model_validator(mode="after")
    def _absence_is_explained(self) -> Peaks:
        if self.bf16_dense_tflops is None and not self.unpublished:
            raise ValueError("bf16_dense_tflops absent: say why in unpublished")
        return self


class NvLink(Sourced):
    """How a model's GPUs reach each other (or, for ``c2c``, the CPU) over NVLink.

    Attributes:
        kind: ``bridge`` (a bridge between PCIe cards), ``switch`` (NVSwitch baseboard), ``c2c``
            (NVLink-C2C to the Grace CPU), ``none``.
        gbps: Total bandwidth per GPU as NVIDIA prints it (both directions); None where unpublished.
    """

    kind: Literal["none", "bridge", "switch", "c2c"]
    gbps: float | None = Field(None, gt=0)

    @property
    def per_direction_gbps(self) -> float | None:
        """Half the printed total: a copy or an all-reduce uses one direction of each link."""
        return None if self.gbps is None else self.gbps / 2


class Support(Sourced):
    """Whether a platform feature is offered: True, False, or None (unknown, said so in ``note``)."""

    supported: bool | None


class PciIds(Sourced):
    """A GPU model's PCI device ids (vendor ``0x10de``), with the public list that names them.

    Attributes:
        device_ids: Lower-case ``0x`` ids, e.g. ``0x2335``; each one in the cited list under this
            model's name (the PCI ID Repository, NVIDIA's driver README "supported chips").
    """

    device_ids: tuple[Annotated[str, Field(pattern=r"^0x[0-9a-f]{4}$")], ...] = Field(min_length=1)


class GpuModel(Sourced):
    """One GPU model. Units in field names; ``None`` where no source gives the value.

    Attributes:
        id: Stable lower-case id used by spec ``gpus.model``, e.g. ``h200-sxm``.
        smi_names: Names ``nvidia-smi --query-gpu=name`` prints; ``smi_conf`` rates them.
        pci: Its PCI device ids with their public source; None where no public source gives one:
            then the model is recognised by name only (``smi_names``), never by an id from memory.
        compute_capability: ``9.0``.
        name: Display name, e.g. ``NVIDIA H200 SXM 141GB``.
        memory_gib: Nominal memory of the SKU name used as GiB; nvidia-smi's memory.total is within
            about 1% below (H200 141 -> 143771 MiB).
        nvswitch: Baseboard connects GPUs through NVSwitch, so Fabric Manager is required.
        nvlink5: NVLink 5 fabric: FM also needs nvlsm and the InfiniBand stack.
        tdp_w: Board power in W (upper end of a configurable range).
        pcie_gen_max / pcie_width_max: Host link capability.
        peaks: Published dense bf16/fp16/tf32 peaks and memory bandwidth, with their source.
        nvlink: NVLink bridge, switch or C2C and its published rate.
        p2p: Whether NVIDIA's driver offers GPU peer-to-peer access on this model (not on GeForce).
        forward_compat: Whether the CUDA forward-compatibility package (cuda-compat) applies.
    """

    id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    name: str
    smi_names: tuple[str, ...]
    smi_conf: Conf
    pci: PciIds | None = None
    architecture: Architecture
    chip: str
    compute_capability: Dotted
    memory_gib: int
    memory_type: str
    form_factor: Literal["pcie", "sxm", "superchip"]
    interconnect: str
    nvswitch: bool
    nvlink5: bool = False
    tdp_w: int | None
    pcie_gen_max: int | None
    pcie_width_max: int | None
    peaks: Peaks
    nvlink: NvLink
    p2p: Support
    forward_compat: Support

    @property
    def pci_device_ids(self) -> tuple[str, ...]:
        """The sourced PCI device ids (``0x2335``); empty where none is public."""
        return self.pci.device_ids if self.pci is not None else ()


class VariantProjects(Sourced):
    """Projects PyTorch publishes per CUDA variant (``torch``, ``torchvision``, ``torchaudio``):
    installed with torch from its variant index, never from PyPI (another CUDA build there).

    Attributes:
        projects: Canonical project names (PEP 503).
    """

    projects: tuple[str, ...]


class ArchMinCuda(Sourced):
    """First CUDA release supporting a compute capability (CC 12.0 -> 12.8)."""

    cc: Dotted
    cuda: Dotted


class ArchMinBranch(Sourced):
    """Oldest driver branch for an architecture where sourced (Blackwell -> 570)."""

    arch: Architecture
    branch: int


class ArchRule(Sourced):
    """A set of architectures a kernel-module rule applies to."""

    archs: tuple[Architecture, ...]


class FromArch(Sourced):
    from_arch: Architecture


class GpuIds(Sourced):
    gpus: tuple[str, ...]


class FromBranch(Sourced):
    from_branch: int


class KernelModuleRules(Frozen):
    """Open vs proprietary kernel module rules (DIG "Kernel Modules").

    Attributes:
        open_supported: Open modules exist for this architecture and newer (Turing).
        proprietary_required: Architectures that only run the proprietary flavour.
        open_required: Architectures that only run the open flavour (Blackwell).
        open_required_gpus: GPU ids that only run the open flavour (GH200, conf U).
        open_default: Branch from which open is NVIDIA's default (560).
        proprietary_removed: Branch from which NVIDIA ships no proprietary modules (620).
    """

    open_supported: FromArch
    proprietary_required: ArchRule
    open_required: ArchRule
    open_required_gpus: GpuIds
    open_default: FromBranch
    proprietary_removed: FromBranch


# ---- Repository -----------------------------------------------------------------------------------


class SigningKey(Sourced):
    """One of NVIDIA's repository signing keys (per package format): file name under the repo URL and
    pinned fingerprint; the keyring package where the format has one (``cuda-keyring`` for deb)."""

    file: str
    fingerprint: Annotated[str, Field(pattern=r"^[0-9A-F]{40}$")]
    keyring_package: str | None = None


class RepoDistro(Sourced):
    """A distro code NVIDIA's CUDA repository serves (DIG), with the releases confirmed in it."""

    code: str
    family: str
    package_format: Literal["deb", "rpm"]
    cuda_releases: tuple[Dotted, ...]


class NvidiaRepo(Sourced):
    """NVIDIA's CUDA network repository for one distro code and machine architecture.

    Attributes:
        code: ``ubuntu2404``.
        url: ``https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/``.
        key_url: ``<url>3bf863cc.pub``.
        fingerprint: 40 hex digits, upper case.
        cuda_releases: Releases confirmed in this repo; empty means unknown, not absent.
    """

    code: str
    package_format: Literal["deb", "rpm"]
    url: str
    key_url: str
    fingerprint: str
    cuda_releases: tuple[Dotted, ...]


class SignedModules(Frozen):
    """A distribution's signed precompiled kernel modules (Ubuntu's linux-restricted-modules).

    Name templates take ``{branch}`` (580), ``{open}`` (``-open`` or empty), ``{flavour}`` (a kernel
    flavour meta such as ``generic`` or ``generic-hwe-24.04``) and ``{kernel}`` (``uname -r``).

    Attributes:
        meta: The flavour's meta-package, which follows the kernel: the next kernel gets its module.
        kernel: The module package of one kernel release.
        flavours: Kernel flavours with signed modules (the base flavour of ``uname -r``, the part
            after the ABI number, must be one of them; ``-hwe-`` and other variants follow it).
        signer: The signer ``modinfo -F signer`` prints for these modules.
    """

    meta: str
    kernel: str
    flavours: tuple[str, ...]
    signer: str


class DistroArchive(Sourced):
    """The NVIDIA driver a distribution's own archive carries (driver.source: distro).

    Package names are templates with ``{branch}`` and ``{open}`` (``-open`` for the open flavour).

    Attributes:
        code: Distro code as NVIDIA's repository names it (``debian12``).
        series: The release's code name (``bookworm``, ``noble``).
        driver_branches: Branches whose packages deliver that branch (transitional names excluded).
        open_branches: Branches with open kernel modules (empty: every branch has them).
        fabric_manager: Whether the archive has a fabric manager matching its driver.
        userspace: The driver's userspace packages (no X, no kernel module).
        dkms: The DKMS module package per flavour (``open``/``proprietary``).
        components: The archive component each flavour's packages live in (``non-free``, ``contrib``).
        signed: Signed precompiled modules, where the distribution builds them.
        hold_patterns: Driver packages outside the ``nvidia-*``/``libnvidia-*`` names, held with the stack.
        kernel_metas: Kernel meta-packages that pull the next kernel ABI (held by ``driver.kernel_guard``).
    """

    code: str
    series: str = ""
    driver_branches: tuple[int, ...]
    open_branches: tuple[int, ...] = ()
    fabric_manager: bool
    userspace: tuple[str, ...] = ()
    dkms: dict[str, str] = Field(default_factory=dict)
    components: dict[str, str] = Field(default_factory=dict)
    signed: SignedModules | None = None
    hold_patterns: tuple[str, ...] = ()
    kernel_metas: tuple[str, ...] = ()

    def names(
        self, templates: tuple[str, ...] | str, branch: int, flavor: str, **more: str
    ) -> tuple[str, ...]:
        """Package names from templates for ``branch`` and kernel module ``flavor`` (open/proprietary)."""
        items = (templates,) if isinstance(templates, str) else templates
        suffix = "-open" if flavor == "open" else ""
        return tuple(t.format(branch=branch, open=suffix, **more) for t in items)
