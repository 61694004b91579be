"""Facts: what the detector read from a machine, as typed data.

Every fact is either its parsed value or an :class:`Unknown` carrying the reason
(tool missing, module not loaded, output not parseable). Detection never raises
for a missing fact; the planner decides what an unknown means.

``Facts`` round-trips through JSON (``provision detect --json`` and
``provision plan --facts FILE``).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Literal

from pydantic import Field

from provision.detect.unknown import Unknown as Unknown  # re-exported: facts and their unknowns
from provision.models import Frozen
from provision.versions import Dotted, Driver


class OsRelease(Frozen):
    """/etc/os-release fields."""

    id: str
    version_id: str
    codename: str | None = None
    pretty_name: str | None = None
    id_like: tuple[str, ...] = ()


class Kernel(Frozen):
    """Running kernel from ``uname -r`` / ``/proc/version``."""

    release: str = Field(description="uname -r, e.g. 6.8.0-60-generic.")
    machine: str | None = Field(None, description="uname -m, e.g. x86_64.")
    compiler: str | None = Field(None, description="Compiler the kernel was built with, from /proc/version.")


class LoadedDriver(Frozen):
    """The NVIDIA kernel module currently loaded (``/proc/driver/nvidia/version``)."""

    version: Driver
    flavor: Literal["open", "proprietary"]


class Gpu(Frozen):
    """One GPU as ``nvidia-smi --query-gpu`` reports it. Units in field names."""

    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    memory_total_mib: int | None = None
    compute_capability: Dotted | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    persistence_mode: bool | None = None
    temperature_gpu_c: float | None = None
    temperature_memory_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None


class Topology(Frozen):
    """``nvidia-smi topo -m``: path class between each pair of GPUs, and affinities.

    ``links[a][b]`` is the legend code for GPU a to GPU b: ``X``, ``NV#``, ``PIX``,
    ``PXB``, ``PHB``, ``NODE`` or ``SYS``.
    """

    gpus: tuple[str, ...]
    links: dict[str, dict[str, str]]
    cpu_affinity: dict[str, str] = Field(default_factory=dict)
    numa_affinity: dict[str, str] = Field(default_factory=dict)


class Package(Frozen):
    """An installed (or half-installed) Debian package from ``dpkg-query``.

    ``status`` is dpkg's three-word status, e.g. ``install ok installed`` or
    ``hold ok half-configured``; ``hold`` is true when the selection is ``hold``.
    """

    name: str
    version: str
    status: str

    @property
    def hold(self) -> bool:
        return self.status.split()[0] == "hold"

    @property
    def installed(self) -> bool:
        return self.status.endswith(" installed")

    @property
    def broken(self) -> bool:
        """Half-installed, unpacked, triggers pending: anything dpkg has not finished."""
        state = self.status.split()[-1]
        return state not in ("installed", "not-installed", "config-files")


class CudaToolkits(Frozen):
    """CUDA toolkits under /usr/local and the default ``nvcc``."""

    installed: tuple[Dotted, ...] = Field((), description="Releases with a /usr/local/cuda-X.Y directory.")
    default_target: str | None = Field(None, description="What /usr/local/cuda points to, if a link.")
    nvcc_release: Dotted | None = Field(None, description="nvcc --version 'release X.Y'.")
    nvcc_version: Dotted | None = Field(None, description="nvcc --version 'VX.Y.Z'.")


class Torch(Frozen):
    """PyTorch found in the spec's venv, read without importing torch where possible."""

    venv: str
    version: str = Field(description="torch.__version__, e.g. 2.11.0+cu130.")
    cuda: str | None = Field(None, description="torch.version.cuda, e.g. 13.0; None for CPU builds.")
    python: str | None = None
    arch_list: tuple[str, ...] | None = Field(None, description="torch.cuda.get_arch_list() when imported.")
    device_count: int | None = None


class Venv(Frozen):
    """A Python virtual environment: its interpreter and installed distributions.

    Read from ``pyvenv.cfg`` and the ``*.dist-info`` directory names in
    site-packages, without starting the interpreter.
    """

    path: str
    python: Dotted | None = Field(None, description="pyvenv.cfg 'version', e.g. 3.12.3.")
    distributions: dict[str, str] = Field(
        {}, description="Normalised distribution name (PEP 503) -> version, e.g. torch -> 2.11.0+cu130."
    )


_NOT_PROBED = Unknown(unknown="not probed")


class Facts(Frozen):
    """Everything detection learned about one host."""

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
    venv: Venv | Unknown = Unknown(unknown="virtual environment not probed")
    nvidia_pci: tuple[_system.PciDevice, ...] | Unknown = _NOT_PROBED
    fabric: _system.FabricState | Unknown = _NOT_PROBED
    dkms: _system.DkmsStatus | Unknown = _NOT_PROBED
    nouveau: _system.NouveauState | Unknown = _NOT_PROBED
    apt_locks: _system.AptLocks | Unknown = _NOT_PROBED
    mok: _system.MokState | Unknown = _NOT_PROBED
    origins: _system.PackageOrigins | Unknown = _NOT_PROBED
    hardware: _hardware.Hardware | Unknown = Unknown(unknown="hardware not probed")

    def package(self, name: str) -> Package | None:
        """The installed package ``name``, or None (also when packages are unknown)."""
        if isinstance(self.packages, Unknown):
            return None
        return next((p for p in self.packages if p.name == name), None)

    def fingerprint(self) -> str:
        """SHA-256 over the facts the planner reads (not timestamps, temperatures or power).

        ``apply plan.json`` compares it with a fresh detection to refuse a stale plan.
        """
        volatile = {"collected_at": True}
        data = self.model_dump(mode="json", exclude=volatile)
        if isinstance(data.get("gpus"), list):
            for gpu in data["gpus"]:
                for key in (
                    "temperature_gpu_c",
                    "temperature_memory_c",
                    "power_draw_w",
                    "pcie_gen_current",
                    "pcie_width_current",
                ):
                    gpu.pop(key, None)
        blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()


# Imported last: hardware.py builds on Unknown above. pydantic resolves the Facts.hardware
# annotation on first use, after both modules have finished loading, whichever came first.
from provision.detect import hardware as _hardware  # noqa: E402
from provision.detect import system as _system  # noqa: E402
