"""What the GPU settings and MIG plans read beyond ``nvidia-smi -q``: the MIG GPU instances
(``nvidia-smi mig -lgi``), the services that hold a GPU (nvidia-persistenced, the fabric manager,
DCGM) and provision's boot unit (``systemctl show``), the NVIDIA kernel modules loaded
(``/sys/module``), and the boot unit's file.

Sources: NVIDIA Multi-Instance GPU User Guide ("Getting Started with MIG": ``nvidia-smi mig -lgi``
prints one table row per GPU instance, ``No MIG-enabled devices found.`` where no GPU is in MIG
mode); NVIDIA/mig-parted README "Known Issues" (a GPU reset fails while ``nvidia_drm`` is loaded);
systemctl(1) ``show``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from provision.detect.domains.containers import RefreshUnits, UnitState, parse_refresh_units
from provision.detect.domains.service import UnitFile, parse_unit_file
from provision.detect.fact import Derive, Fact, Parsed, Unknown, failure, first_line, sh
from provision.models import Frozen

BOOT_UNIT = "provision-gpu-settings.service"
BOOT_UNIT_PATH = f"/etc/systemd/system/{BOOT_UNIT}"
"""The oneshot unit that applies the spec's GPU settings and MIG layout at every boot."""

HOLDER_UNITS = (
    "nvidia-persistenced.service",
    "nvidia-fabricmanager.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    BOOT_UNIT,
)
"""Units read: the persistence daemon (planned by ``gpu.persistence``), the services that keep a
GPU open and so block a GPU reset (NVIDIA/mig-parted deployments/systemd: the MIG manager stops
them first), and provision's boot unit."""

MODULES = ("nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia_peermem")
"""NVIDIA kernel modules whose presence in ``/sys/module`` is read."""

_NO_MIG = "No MIG-enabled devices found"
_NO_INSTANCES = "No GPU instances found"
_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d{1,2})\s+MIG\s+(?P<profile>[1-8]g\.\d{1,4}gb\S{0,16})\s+(?P<pid>\d{1,3})\s+"
    r"(?P<gi>\d{1,3})\s+(?P<start>\d{1,2}):(?P<size>\d{1,2})\s*\|$"
)


class GpuInstance(Frozen):
    """One MIG GPU instance (``nvidia-smi mig -lgi`` row).

    Attributes:
        gpu: nvidia-smi's index of the GPU it is on.
        profile: Its profile name (``1g.18gb``, ``1g.10gb+me``).
        profile_id: The GPU instance profile id (``19``).
        instance_id: Its GPU instance id.
        start, size: Its placement in memory slices.
    """

    gpu: int = Field(ge=0)
    profile: str
    profile_id: int
    instance_id: int
    start: int
    size: int


class MigInstances(Frozen):
    """Every MIG GPU instance; empty when no GPU is in MIG mode or none has instances."""

    instances: tuple[GpuInstance, ...] = ()

    def layout(self, gpu: int) -> dict[str, int]:
        """Profile -> count of GPU ``gpu``'s instances, sorted by profile name."""
        counts: dict[str, int] = {}
        for inst in self.instances:
            if inst.gpu == gpu:
                counts[inst.profile] = counts.get(inst.profile, 0) + 1
        return dict(sorted(counts.items()))


def parse_mig_instances(output: str, rc: int) -> MigInstances | Unknown:
    """``nvidia-smi mig -lgi`` -> every GPU instance; "No MIG-enabled devices found." (exit 6) and
    "No GPU instances found" are none."""
    if _NO_MIG in output or _NO_INSTANCES in output:
        return MigInstances()
    if (bad := failure("nvidia-smi", output, rc)) is not None:
        return bad
    if "GPU instances:" not in output:
        return Unknown(unknown=f"unexpected nvidia-smi mig -lgi output: {first_line(output)}")
    rows = (_ROW.match(line.strip()) for line in output.splitlines())
    return MigInstances(
        instances=tuple(
            GpuInstance(
                gpu=int(m["gpu"]),
                profile=m["profile"],
                profile_id=int(m["pid"]),
                instance_id=int(m["gi"]),
                start=int(m["start"]),
                size=int(m["size"]),
            )
            for m in rows
            if m
        )
    )


class LoadedModules(Frozen):
    """The NVIDIA kernel modules of :data:`MODULES` present in ``/sys/module``."""

    names: tuple[str, ...] = ()


def parse_modules(output: str, rc: int) -> LoadedModules | Unknown:
    """One module name per line (the probe prints only names of :data:`MODULES`)."""
    if (bad := failure("sh", output, rc)) is not None:
        return bad
    return LoadedModules(
        names=tuple(n for n in (line.strip() for line in output.splitlines()) if n in MODULES)
    )


class MigInstancesFact(Fact[MigInstances]):
    """MIG GPU instances: ``nvidia-smi mig -lgi``."""

    id = "mig-lgi"
    argv = ("nvidia-smi", "mig", "-lgi")
    timeout = 20.0
    parse = staticmethod(parse_mig_instances)


class GpuServicesFact(Fact[RefreshUnits]):
    """The persistence daemon, fabric manager, DCGM and the boot unit: ``systemctl show``."""

    id = "gpu-services"
    argv = ("systemctl", "show", "-p", "Id,LoadState,ActiveState,UnitFileState,Result", *HOLDER_UNITS)
    parse = staticmethod(parse_refresh_units)


class NvidiaModulesFact(Fact[LoadedModules]):
    """NVIDIA kernel modules loaded (``/sys/module/<name>``; no lsmod needed)."""

    id = "nvidia-modules"
    argv = sh('for m in "$@"; do [ -d "/sys/module/$m" ] && echo "$m"; done; true', *MODULES)
    parse = staticmethod(parse_modules)


class BootUnitFact(Fact[UnitFile]):
    """provision's GPU settings boot unit (``cat``; a marker line when absent)."""

    id = "gpu-settings-unit"
    argv = sh('if [ -e "$1" ]; then cat "$1"; else echo "=== absent"; fi', BOOT_UNIT_PATH)
    parse = staticmethod(parse_unit_file)


class GpuRuntime(Frozen):
    """What the GPU settings and MIG components read beside ``nvidia-smi -q``; each part Unknown
    with its reason where it could not be read."""

    mig: MigInstances | Unknown
    services: RefreshUnits | Unknown
    modules: LoadedModules | Unknown
    boot_unit: UnitFile | Unknown

    def unit(self, name: str) -> UnitState | None:
        """The unit's state, None when systemd could not be asked."""
        return None if isinstance(self.services, Unknown) else self.services.units.get(name)

    def active(self, name: str) -> bool:
        state = self.unit(name)
        return state is not None and state.active == "active"

    def holders(self) -> tuple[str, ...]:
        """What keeps the GPUs open and so blocks a GPU reset: ``nvidia_drm`` loaded, and the
        persistence daemon, fabric manager and DCGM running (NVIDIA/mig-parted README and
        deployments/systemd)."""
        drm = (
            ()
            if isinstance(self.modules, Unknown) or "nvidia_drm" not in self.modules.names
            else ("nvidia_drm",)
        )
        running = tuple(u.removesuffix(".service") for u in HOLDER_UNITS[:4] if self.active(u))
        return drm + running


FACTS: tuple[type[Fact[Any]], ...] = (MigInstancesFact, GpuServicesFact, NvidiaModulesFact, BootUnitFact)


def _runtime(parsed: Parsed) -> GpuRuntime | None:
    if not parsed.any_ran(FACTS):
        return None  # a capture older than these probes: "not probed"
    return GpuRuntime(
        mig=parsed.of(MigInstancesFact),
        services=parsed.of(GpuServicesFact),
        modules=parsed.of(NvidiaModulesFact),
        boot_unit=parsed.of(BootUnitFact),
    )


FIELDS: dict[str, Derive] = {"gpu_runtime": _runtime}
