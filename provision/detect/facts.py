"""Facts: what the detector read from a machine, as typed data.

Every fact is either its parsed value or an :class:`Unknown` carrying the reason
(tool missing, module not loaded, output not parseable). Detection never raises
for a missing fact; the planner decides what an unknown means. Judgments that every
consumer needs (NVSwitch present, driver versions on disk and loaded, the worst GPU path)
are methods here, so plan, verify and checklist read one answer and only word it.

The models live with their probes and parsers in :mod:`provision.detect.domains` (the package
models, OS-neutral, in :mod:`provision.os.models`); they are re-exported here. ``Facts``
round-trips through JSON (``provision detect --json`` and ``provision plan --facts FILE``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, model_validator

from provision.catalog.models import Flavor
from provision.detect.domains.containers import ContainerFacts
from provision.detect.domains.cuda import CudaToolkits, LibraryCache
from provision.detect.domains.driver import (
    DkmsStatus,
    GspFirmware,
    Initramfs,
    LoadedDriver,
    ModuleSigner,
    MokState,
    NouveauState,
)
from provision.detect.domains.firmware import Iommu, KernelCmdline, SecureBoot
from provision.detect.domains.gpu import FabricState, Gpu, GpuHealth, PciDevice, Topology
from provision.detect.domains.gpu_runtime import GpuRuntime
from provision.detect.domains.gpu_state import GpuState
from provision.detect.domains.hardware import Hardware
from provision.detect.domains.host import Board, Cpu, NumaNode, PowerProfile
from provision.detect.domains.identity import MachineId
from provision.detect.domains.monitoring import Listening, ManagedFiles
from provision.detect.domains.os_kernel import Kernel, OsRelease
from provision.detect.domains.pci import AcsControl, GpuHardware, PciLink
from provision.detect.domains.python import NoVenv, Torch, Venv
from provision.detect.domains.service import UnitFile
from provision.detect.fact import Unknown
from provision.models import Frozen
from provision.os import PackageManager, os_family, package_manager
from provision.os.models import Package, PackageLocks, PackageOrigins
from provision.versions import DottedVersion, Driver, DriverVersion

__all__ = [
    "AcsControl",
    "Board",
    "ContainerFacts",
    "Cpu",
    "CudaToolkits",
    "DkmsStatus",
    "FabricState",
    "Facts",
    "Flavor",
    "Gpu",
    "GpuHardware",
    "GpuHealth",
    "GpuRuntime",
    "GpuState",
    "GspFirmware",
    "Hardware",
    "Initramfs",
    "Iommu",
    "Kernel",
    "KernelCmdline",
    "LibraryCache",
    "Listening",
    "LoadedDriver",
    "MachineId",
    "ManagedFiles",
    "ModuleSigner",
    "MokState",
    "NoVenv",
    "NouveauState",
    "NumaNode",
    "OsRelease",
    "Package",
    "PackageLocks",
    "PackageOrigins",
    "PciDevice",
    "PciLink",
    "PowerProfile",
    "SecureBoot",
    "Topology",
    "Torch",
    "Unknown",
    "Venv",
]

_NOT_PROBED = Unknown(unknown="not probed")

USERSPACE_DRIVER = re.compile(
    r"^(libnvidia-compute|nvidia-utils|nvidia-driver|nvidia-kernel-common)(-\d+)?(-server)?(-open)?$"
)
"""Packages whose version is the user-space driver's: the libraries nvidia-smi and CUDA load
(``libnvidia-compute``), the tools (``nvidia-utils``) and the metas that pin them, in each naming:
NVIDIA's (``libnvidia-compute-580``, ``nvidia-driver-580-open``) and Ubuntu's server branches
(``libnvidia-compute-580-server``, ``nvidia-driver-580-server-open``; packages.ubuntu.com, noble
restricted)."""


def _numeric(version: str) -> DottedVersion | None:
    try:
        return DottedVersion(version.split("+")[0].split("~")[0])
    except ValueError:
        return None


class Facts(Frozen):
    """Everything detection learned about one host (``provision detect --json``)."""

    format_version: Literal[1] = 1
    host: str = "localhost"
    collected_at: datetime | None = None
    os: OsRelease | Unknown
    kernel: Kernel | Unknown
    driver: LoadedDriver | Unknown
    # Unknown first: pydantic picks the first union member whose serializer fits, and
    # Driver's plain str serializer would otherwise also claim an Unknown.
    driver_on_disk: Unknown | Driver | None = Field(
        None, description="modinfo -F version nvidia: module the next boot loads (FF-01); None: not probed."
    )
    gpus: tuple[Gpu, ...] | Unknown
    topology: Topology | Unknown
    packages: tuple[Package, ...] | Unknown
    cuda: CudaToolkits | Unknown
    torch: Torch | Unknown
    venv: Venv | NoVenv | Unknown = Unknown(unknown="virtual environment not probed")
    nvidia_pci: tuple[PciDevice, ...] | Unknown = _NOT_PROBED
    fabric: FabricState | Unknown = _NOT_PROBED
    dkms: DkmsStatus | Unknown = _NOT_PROBED
    nouveau: NouveauState | Unknown = _NOT_PROBED
    package_locks: PackageLocks | Unknown = _NOT_PROBED
    mok: MokState | Unknown = _NOT_PROBED
    origins: PackageOrigins | Unknown = _NOT_PROBED
    hardware: Hardware | Unknown = Unknown(unknown="hardware not probed")
    gpu_health: tuple[GpuHealth, ...] | Unknown = _NOT_PROBED
    gpu_state: tuple[GpuState, ...] | Unknown = _NOT_PROBED
    gpu_runtime: GpuRuntime | None = Field(
        None,
        description="MIG instances, the services and modules holding a GPU, the boot unit; None: not probed.",
    )
    initramfs: Initramfs | Unknown = _NOT_PROBED
    ld_cache: LibraryCache | Unknown = _NOT_PROBED
    module_signer: ModuleSigner | Unknown = _NOT_PROBED
    gsp_firmware: GspFirmware | Unknown = _NOT_PROBED
    vllm_unit: UnitFile | Unknown | None = Field(
        None, description="The vLLM server's unit file (serve:); None: not probed."
    )
    listening: Listening | Unknown = _NOT_PROBED
    monitoring_files: ManagedFiles | Unknown = _NOT_PROBED
    containers: ContainerFacts | None = Field(
        None, description="Container runtimes, their NVIDIA configuration and CDI specs; None: not probed."
    )
    machine_id: MachineId | Unknown = Field(
        _NOT_PROBED, description="The machine ID (machine-id(5)), hashed: hosts sharing one are one machine."
    )

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        """Saved facts of before the OS seam name the locks ``apt_locks``."""
        if isinstance(data, dict) and "apt_locks" in data and "package_locks" not in data:
            return {("package_locks" if k == "apt_locks" else k): v for k, v in data.items()}
        return data

    def os_family(self, distro: str = "") -> str:
        """The OS family (``Debian``, ``RedHat``) ``/etc/os-release`` names, else the spec's ``distro``'s."""
        os = self.os
        return os_family((os.id, *os.id_like) if isinstance(os, OsRelease) else (), distro)

    def package_manager(self, distro: str = "") -> PackageManager:
        """The package manager of :meth:`os_family`."""
        return package_manager(self.os_family(distro))

    def package(self, name: str) -> Package | None:
        """The installed package ``name``, or None (also when packages are unknown)."""
        if isinstance(self.packages, Unknown):
            return None
        return next((p for p in self.packages if p.name == name), None)

    def nvswitch(self) -> tuple[bool | None, str]:
        """Whether the machine shows an NVSwitch fabric, and the evidence (docs/field-failures.md#ff-03).

        NVSwitch functions appear in lspci as NVIDIA bridge-class (0680) devices; GPUs on a fabric
        report a fabric State other than N/A in ``nvidia-smi -q``. None when neither was readable.
        """
        pci, fabric = self.nvidia_pci, self.fabric
        switches = [] if isinstance(pci, Unknown) else [d.bdf for d in pci if d.is_nvswitch]
        if switches:
            return True, f"{len(switches)} NVSwitch function(s) in lspci ({', '.join(switches[:4])})"
        if not isinstance(fabric, Unknown) and fabric.nvswitch:
            return True, "nvidia-smi -q reports a GPU fabric state"
        if not isinstance(fabric, Unknown) and fabric.states:
            return False, "nvidia-smi -q shows fabric state N/A on every GPU (no NVSwitch)"
        if not isinstance(pci, Unknown) and any(d.is_gpu for d in pci):
            return False, "lspci shows NVIDIA GPUs and no NVSwitch bridge"
        return None, "NVSwitch presence not observable (no lspci, no nvidia-smi)"

    def nvswitch_visible(self) -> bool:
        """An NVSwitch function is in lspci (the switches are in this OS, not managed outside it)."""
        pci = self.nvidia_pci
        return not isinstance(pci, Unknown) and any(d.is_nvswitch for d in pci)

    def driver_packages(self, upstream: Callable[[str], str]) -> dict[str, str]:
        """Installed user-space driver packages and their upstream versions, in the package list's
        order: ``{"libnvidia-compute-580": "580.95.05", ...}`` (see :data:`USERSPACE_DRIVER`).

        Args:
            upstream: The package manager's upstream part of a version (``PackageManager.upstream``).
        """
        if isinstance(self.packages, Unknown):
            return {}
        found = (p for p in self.packages if p.installed and USERSPACE_DRIVER.match(p.name))
        return {p.name: upstream(p.version) for p in found}

    def userspace_driver(self, upstream: Callable[[str], str]) -> DottedVersion | None:
        """The user-space driver's version: libnvidia-compute's, else nvidia-utils', else a driver meta's."""
        packages = self.driver_packages(upstream)
        for prefix in ("libnvidia-compute", "nvidia-utils", "nvidia-"):
            for name, version in packages.items():
                if name.startswith(prefix) and (parsed := _numeric(version)) is not None:
                    return parsed
        return None

    def on_disk_driver(self) -> DriverVersion | None:
        """The module the next boot loads (``modinfo``), None when unread or not installed."""
        return self.driver_on_disk if isinstance(self.driver_on_disk, DriverVersion) else None

    def worst_path(self) -> str | None:
        """The worst GPU-to-GPU path class (``Topology.worst_path``), None when unread or one GPU."""
        return None if isinstance(self.topology, Unknown) else self.topology.worst_path()

    def fingerprint(self) -> str:
        """SHA-256 over the facts the planner reads (not timestamps, temperatures or power).

        ``apply plan.json`` compares it with a fresh detection to refuse a stale plan.
        """
        # The bytes hashed are json.dumps(model_dump, sort_keys=True, separators=(",", ":")), the
        # object written field by field: a field whose value another host's facts share (one
        # parse of the same output, detect/fact.py parse_once) is dumped once.
        idents = {
            k: i for k, v in self.__dict__.items() if k not in _UNSHARED and (i := _ident(v)) is not None
        }
        texts = {k: _FIELD_JSON[(k, i)][1] for k, i in idents.items() if (k, i) in _FIELD_JSON}
        data = self.model_dump(mode="json", exclude={*_UNSHARED[:2], *texts})
        if isinstance(data.get("gpus"), list):
            for gpu in data["gpus"]:
                for key in _VOLATILE_GPU:
                    gpu.pop(key, None)
        for key, value in data.items():
            texts[key] = json.dumps(value, sort_keys=True, separators=(",", ":"))
            if key in idents:
                _remember((key, idents[key]), self.__dict__[key], texts[key])
        body = ",".join(f"{json.dumps(k)}:{texts[k]}" for k in sorted(texts))
        return hashlib.sha256(("{" + body + "}").encode()).hexdigest()


_UNSHARED = ("collected_at", "format_version", "gpus")
"""Fields of :meth:`Facts.fingerprint` left out (the first two) or changed before hashing (gpus)."""
_VOLATILE_GPU = (
    "temperature_gpu_c",
    "temperature_memory_c",
    "power_draw_w",
    "pcie_gen_current",
    "pcie_width_current",
)
_FIELD_JSON: dict[tuple[str, object], tuple[object, str]] = {}
"""(field, identity of its value: :func:`_ident`) -> (the value, kept alive so that identity stays
its own; its JSON text)."""
_FIELD_JSON_SIZE = 4096


def _ident(value: object) -> object | None:
    """A frozen model's id; a tuple's ids of its items (pydantic rebuilds a tuple field's container
    around the same items); None for anything else, which is not remembered."""
    if isinstance(value, Frozen):
        return id(value)
    if isinstance(value, tuple) and value:
        return tuple(map(id, value))
    return None


def _remember(key: tuple[str, object], value: object, text: str) -> None:
    if len(_FIELD_JSON) >= _FIELD_JSON_SIZE:
        del _FIELD_JSON[next(iter(_FIELD_JSON))]
    _FIELD_JSON[key] = (value, text)
