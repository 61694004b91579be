"""The open kernel modules have the GSP firmware of their own release.

The open nvidia.ko runs the GPU through its GSP and loads the firmware from
``/lib/firmware/nvidia/<its version>/gsp_*.bin``; firmware of another release does not do (the
modules "must be used with GSP firmware ... from a corresponding driver release"). Without it
RmInitAdapter fails and no GPU comes up. Judged for the driver loaded now (``nvidia-smi -q``
"GSP Firmware Version" shows what it loaded) and the module the next boot loads (``modinfo``),
whose firmware must be on disk. Sources: NVIDIA/open-gpu-kernel-modules README and CHANGELOG
530.30.02 (catalog ``gsp_firmware``, ``data/drivers.yaml``).
"""

from __future__ import annotations

from provision.catalog import Catalog
from provision.detect.facts import Facts, LoadedDriver, Unknown
from provision.invariants.base import Invariant, Verdict
from provision.spec.models import Spec
from provision.spec.rules import resolve_flavor
from provision.versions import DriverVersion

OGKM = "NVIDIA/open-gpu-kernel-modules README and CHANGELOG 530.30.02 (https://github.com/NVIDIA/open-gpu-kernel-modules/blob/main/CHANGELOG.md)"


class GspFirmwareMatches(Invariant):
    """The open modules, loaded now or at the next boot, find the GSP firmware of their release."""

    id = "gsp-firmware"
    title = "GSP firmware of the driver's release"
    layer = "driver"
    source = OGKM
    reads = ("driver", "driver_on_disk", "gpu_health", "gsp_firmware")
    severity = "warning"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        loaded = facts.driver if isinstance(facts.driver, LoadedDriver) else None
        if (loaded.flavor if loaded else resolve_flavor(spec, catalog)) != "open":
            return self.not_applicable("proprietary kernel modules (GSP firmware is optional there)")
        on_disk = facts.on_disk_driver()
        seen = self._running(loaded, facts)
        wanted = [v for v in (loaded.version if loaded else None, on_disk) if v is not None]
        if not wanted:
            return self.not_applicable("no NVIDIA kernel module installed yet")
        needed = [v for v in dict.fromkeys(wanted) if not (seen and loaded and v == loaded.version)]
        if not needed:
            return self.holds(seen)
        files = facts.gsp_firmware
        if isinstance(files, Unknown):
            return self.unknown(files)
        missing = [v for v in needed if not files.has(str(v))]
        if not missing:
            present = ", ".join(f"{catalog.gsp_firmware.path.format(version=v)}" for v in needed)
            return self.holds("; ".join(p for p in (seen, f"GSP firmware in {present}") if p))
        return self._violation(spec, facts, catalog, missing[0], loaded, files.versions)

    def _running(self, loaded: LoadedDriver | None, facts: Facts) -> str:
        """What nvidia-smi shows the running driver loaded, when every GPU runs its own release."""
        health = facts.gpu_health
        if loaded is None or isinstance(health, Unknown) or not health:
            return ""
        if all(h.gsp_firmware == str(loaded.version) for h in health):
            return f"GSP firmware {loaded.version} loaded on {len(health)} GPU(s) (nvidia-smi -q)"
        return ""

    def _violation(
        self,
        spec: Spec,
        facts: Facts,
        catalog: Catalog,
        version: DriverVersion,
        loaded: LoadedDriver | None,
        installed: dict[str, tuple[str, ...]],
    ) -> Verdict:
        path = catalog.gsp_firmware.path.format(version=version)
        when = "loaded now" if loaded is not None and loaded.version == version else "the next boot loads"
        others = ", ".join(sorted(installed)) or "none"
        return self.violated(
            f"no gsp_*.bin in {path} (GSP firmware installed for: {others})",
            f"the open nvidia.ko {version} ({when}) needs the GSP firmware of its own release; without it "
            "RmInitAdapter fails and no GPU comes up",
            _fix(spec, facts, catalog, version),
        )


def _fix(spec: Spec, facts: Facts, catalog: Catalog, version: DriverVersion) -> str:
    distro = facts.os.id if not isinstance(facts.os, Unknown) else spec.os.distro
    package = catalog.gsp_firmware.package(spec.driver.source, distro)
    if package is not None:
        return (
            f"install {package.request(version.branch, str(version))} (the {distro} archive's package for it)"
        )
    if spec.driver.source == "preinstalled":
        return (
            f"the host image's driver {version} lacks its firmware: reinstall it with its firmware "
            f"(the .run installer writes {catalog.gsp_firmware.path.format(version=version)})"
        )
    return (
        f"reinstall the driver {version} from NVIDIA's repository "
        f"({facts.package_manager(spec.os.distro).reinstall_command(('<its kernel module package>',))}); "
        "the package carrying the firmware there is not in the catalog"
    )
