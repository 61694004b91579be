"""The container toolkit catalog (``data/containers.yaml``): the NVIDIA Container Toolkit's four
packages and its own repository, its releases and the features that came with them, the CDI
spec's paths and what each container runtime needs. Every row names its sources
(``data/sources.yaml``).

Public API::

    from provision.catalog.containers import load_containers
    ctk = load_containers()                      # cached; raises CatalogError naming the problem
    ctk.release(DottedVersion("1.18.2"))         -> ToolkitRelease | None
    ctk.repository("rpm").urls["x86_64"]         -> "https://nvidia.github.io/.../stable/rpm/x86_64"
    ctk.runtime("podman").v070_min               -> DottedVersion("5.1.0")
    ctk.has_refresh(DottedVersion("1.17.8"))     -> False
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import get_args

from provision.catalog.models import Sourced
from provision.catalog.packages import PackageFormat
from provision.catalog.tables import DATA_DIR, SourcesFile, _check_sources, _load
from provision.errors import CatalogError
from provision.models import Frozen
from provision.versions import Dotted, DottedVersion


class ToolkitPackages(Sourced):
    """The four packages of one toolkit release, installed as ``NAME=VERSION-REVISION``."""

    names: tuple[str, ...]
    revision: str


class ToolkitRepository(Sourced):
    """NVIDIA's libnvidia-container repository for one package format (one URL per architecture)
    and its key.

    Attributes:
        urls: Architecture -> the repository (apt: the flat suite ``/``; dnf: the ``baseurl``).
        keyring: Where the verified key goes on the target.
        sources_file: The source (deb822) or repository (``.repo``) file provision writes.
        repo_id: dnf's repository id (the ``.repo`` file's section); None for apt.
    """

    urls: dict[str, str]
    key_url: str
    key_hosts: tuple[str, ...]
    fingerprint: str
    keyring: str
    sources_file: str
    repo_id: str | None = None


class ToolkitRelease(Sourced):
    """One toolkit release (its date where the release notes give one)."""

    version: Dotted
    date: str | None = None


class Feature(Sourced):
    """A behaviour that came with a release."""

    since: Dotted


class Features(Frozen):
    """The releases that changed what provision does."""

    cdi_refresh: Feature
    cdi_v070_default: Feature


class CdiPaths(Sourced):
    """Where the NVIDIA CDI spec goes, and the device kind it defines."""

    spec_file: str
    persistent_spec_file: str
    kind: str


class DevChar(Sourced):
    """The udev rule that keeps the ``/dev/char`` links of NVIDIA's devices."""

    rule: str


class Runtime(Sourced):
    """One container runtime.

    Attributes:
        configure: ``nvidia-ctk runtime configure --runtime=<name>`` takes it.
        config_file: The file that command edits; None when it takes no configuration.
        service: The systemd unit restarted after the configuration changed.
        cdi_min: The first release that reads CDI specs; None where every release the toolkit
            supports does (or the catalog has no source saying otherwise).
        v070_min: The first release that reads CDI spec v0.7.0.
        install: Package format -> where the runtime comes from, for the refusal of a host
            without it (``the distribution's podman``; Docker CE from Docker's repository on the
            RHEL family, whose own engine is podman).
    """

    name: str
    configure: bool
    config_file: str | None
    service: str | None
    cdi_min: Dotted | None
    v070_min: Dotted
    install: dict[PackageFormat, str]


class ContainersCatalog(Frozen):
    """``data/containers.yaml``, validated."""

    packages: ToolkitPackages
    repositories: dict[PackageFormat, ToolkitRepository]
    releases: tuple[ToolkitRelease, ...]
    features: Features
    cdi: CdiPaths
    dev_char: DevChar
    runtimes: tuple[Runtime, ...]

    def repository(self, package_format: str) -> ToolkitRepository:
        """The toolkit's repository for ``package_format`` (``deb``, ``rpm``).

        Raises:
            KeyError: For a format the catalog has no repository for (a packaging bug: the
                loader checks both are present).
        """
        return self.repositories[package_format]  # type: ignore[index]

    def release(self, version: DottedVersion) -> ToolkitRelease | None:
        """The catalog's row of toolkit ``version`` (exact), None when it knows no such release."""
        return next((r for r in self.releases if r.version == version), None)

    def runtime(self, name: str) -> Runtime:
        """The row of runtime ``name`` (the spec's Literal keeps it to the catalog's)."""
        return next(r for r in self.runtimes if r.name == name)

    def has_refresh(self, toolkit: DottedVersion) -> bool:
        """Whether ``toolkit`` ships the ``nvidia-cdi-refresh`` units."""
        return toolkit >= self.features.cdi_refresh.since

    def writes_v070(self, toolkit: DottedVersion) -> bool:
        """Whether ``toolkit``'s ``nvidia-ctk cdi generate`` writes CDI spec v0.7.0 by default."""
        return toolkit >= self.features.cdi_v070_default.since

    def spec_file(self, toolkit: DottedVersion) -> str:
        """Where apply writes the NVIDIA CDI spec for ``toolkit`` (the refresh units' file, else /etc/cdi)."""
        return self.cdi.spec_file if self.has_refresh(toolkit) else self.cdi.persistent_spec_file


@functools.cache
def load_containers(directory: Path = DATA_DIR) -> ContainersCatalog:
    """The container toolkit catalog, validated and its source keys checked once per process.

    Raises:
        CatalogError: If the file is invalid or names an undefined source (a packaging bug).
    """
    data = _load(directory, "containers.yaml", ContainersCatalog)
    sources = _load(directory, "sources.yaml", SourcesFile).sources
    _check_sources("containers.yaml", data, sources)
    if len({r.version for r in data.releases}) != len(data.releases):
        raise CatalogError("catalog file containers.yaml: duplicate toolkit release")
    if set(data.repositories) != set(get_args(PackageFormat)):
        raise CatalogError("catalog file containers.yaml: repositories must name every package format")
    if any(r.repo_id is None for fmt, r in data.repositories.items() if fmt != "deb"):
        raise CatalogError("catalog file containers.yaml: a dnf repository needs its repo_id")
    return data
