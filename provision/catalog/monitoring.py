"""The monitoring catalog (``data/monitoring.yaml``): DCGM 4 and dcgm-exporter package names,
the DCGM/exporter release pairs, and where the distribution's node exporter and Prometheus read
their settings. Every row names its sources (``data/sources.yaml``).

Public API::

    from provision.catalog.monitoring import load_monitoring
    mon = load_monitoring()                  # cached; raises CatalogError naming the problem
    mon.exporter_for(DottedVersion("4.5.3")) -> DottedVersion("4.8.2") | None
    mon.dcgm.packages(13) -> ("datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda13")
    mon.for_format("rpm").node_exporter.package -> "node-exporter"   # EPEL's, on the RHEL family
"""

from __future__ import annotations

import functools
from pathlib import Path

from provision.catalog.models import Sourced
from provision.catalog.tables import DATA_DIR, SourcesFile, _check_sources, _load
from provision.errors import CatalogError
from provision.models import Frozen
from provision.versions import Dotted, DottedVersion


class DcgmPackages(Sourced):
    """DCGM 4's Debian packages (NVIDIA/DCGM cmake/packaging.cmake).

    Attributes:
        core: The engine and tools (``datacenter-gpu-manager-4-core``).
        cuda_package: Pattern of the CUDA-major plugin package, ``{major}`` filled in.
        cuda_majors: CUDA majors DCGM 4 ships a plugin package for.
        legacy: The unversioned 3.x package that replaces 4.x when installed (deepops PR #1394).
        epoch: The Debian epoch of DCGM 4's versions (``1:4.5.3-1``).
        service: The host engine's systemd unit.
    """

    core: str
    cuda_package: str
    cuda_majors: tuple[int, ...]
    legacy: str
    epoch: int
    service: str

    def packages(self, cuda_major: int) -> tuple[str, str]:
        """The core package and the plugin for ``cuda_major``."""
        return self.core, self.cuda_package.format(major=cuda_major)


class ExporterPackage(Sourced):
    """dcgm-exporter's Debian package and unit (NVIDIA/dcgm-exporter packaging/)."""

    package: str
    service: str
    binary: str
    counters_file: str
    epoch: int


class Pair(Sourced):
    """One dcgm-exporter release and the DCGM release it is built for (a ``4.5.3-4.8.2`` tag)."""

    dcgm: Dotted
    exporter: Dotted


class DistroService(Sourced):
    """A distribution package running one service, configured by ``ARGS`` in ``defaults_file``
    (Debian) or, where the package's settings file has no public source, by a systemd drop-in
    running ``binary`` with provision's arguments (EPEL's node exporter).

    Attributes:
        repositories: Repositories beyond the OS's own it comes from (``epel``), enabled by their
            ``<name>-release`` package.
    """

    package: str
    service: str
    defaults_file: str | None = None
    binary: str | None = None
    textfile_dir: str | None = None
    config_file: str | None = None
    rules_file: str | None = None
    repositories: tuple[str, ...] = ()


class Refusal(Sourced):
    """A part provision does not provision on a package format, and why."""

    reason: str


class FormatServices(Frozen):
    """The distribution's services on one package format other than Debian's (``rpm``)."""

    node_exporter: DistroService
    prometheus_refused: Refusal


class MonitoringCatalog(Frozen):
    """``data/monitoring.yaml``, validated."""

    dcgm: DcgmPackages
    exporter: ExporterPackage
    pairs: tuple[Pair, ...]
    node_exporter: DistroService
    prometheus: DistroService
    rpm: FormatServices
    prometheus_refused: Refusal | None = None
    """Set in the view of a format whose distribution provision runs no Prometheus on."""

    def for_format(self, package_format: str) -> MonitoringCatalog:
        """The catalog as a host of ``package_format`` sees it: on ``rpm``, EPEL's node exporter
        and the Prometheus refusal in place of Debian's packages."""
        if package_format == "deb":
            return self
        return self.model_copy(
            update={
                "node_exporter": self.rpm.node_exporter,
                "prometheus_refused": self.rpm.prometheus_refused,
            }
        )

    def exporter_for(self, dcgm: DottedVersion) -> DottedVersion | None:
        """The exporter release paired with DCGM ``dcgm`` (exact release), None when not in the catalog."""
        return next((p.exporter for p in self.pairs if p.dcgm == dcgm), None)

    def known_dcgm(self) -> tuple[str, ...]:
        """DCGM releases the catalog pairs, newest first."""
        return tuple(str(p.dcgm) for p in self.pairs)


@functools.cache
def load_monitoring(directory: Path = DATA_DIR) -> MonitoringCatalog:
    """The monitoring catalog, validated and its source keys checked once per process.

    Raises:
        CatalogError: If the file is invalid or names an undefined source (a packaging bug).
    """
    data = _load(directory, "monitoring.yaml", MonitoringCatalog)
    sources = _load(directory, "sources.yaml", SourcesFile).sources
    _check_sources("monitoring.yaml", data, sources)
    if len({p.dcgm for p in data.pairs}) != len(data.pairs):
        raise CatalogError("catalog file monitoring.yaml: duplicate DCGM release in pairs")
    return data
