"""GPU monitoring as two components: DCGM 4 with its paired dcgm-exporter from NVIDIA's repository
(in the one package transaction, pinned and held with the stack), and the monitoring services
(the distribution's node exporter and Prometheus, provision's exporter counters, scrape
configuration and alert rules) carried out by the ``monitoring`` role.

On the RHEL family (Rocky, RHEL 9 and 10) DCGM and the exporter have the same names in NVIDIA's
rhel9/rhel10 repositories; the node exporter is EPEL's ``node-exporter`` (the family's seam says
EPEL is enabled for it); the Prometheus server is refused there (``monitoring.yaml``'s
``rpm.prometheus_refused``, with its source).

Sources (keys of ``catalog/data/sources.yaml``): DCGM-GH (NVIDIA/DCGM packaging and unit),
DCGM-255 (a 580 driver reports CUDA 13 and needs ``-cuda13``), DEEPOPS-1394 (the unversioned
``datacenter-gpu-manager`` is 3.3.9 and replaces 4.x), DCGM-EXP and DCGM-EXP-DOC (exporter and
DCGM versions paired), PROM-PORTS, NODE-TEXTFILE.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from provision.catalog import Catalog
from provision.components.base import (
    Action,
    Built,
    Component,
    InstallableComponent,
    PlanContext,
    Step,
)
from provision.components.steps import noop
from provision.detect.unknown import Unknown
from provision.findings import Finding
from provision.os.base import PackageManager, Pin
from provision.os.select import package_format
from provision.spec.models import MonitoringSpec, Spec
from provision.unknown import because
from provision.versions import DottedVersion

if TYPE_CHECKING:
    from provision.catalog.monitoring import MonitoringCatalog
    from provision.components.monitoring_files import ManagedFile
    from provision.detect.facts import Facts

DCGM_SOURCE = (
    "NVIDIA/DCGM (https://github.com/NVIDIA/DCGM); NVIDIA/DCGM#255 "
    "(https://github.com/NVIDIA/DCGM/issues/255); NVIDIA/deepops PR #1394 "
    "(https://github.com/NVIDIA/deepops/pull/1394); NVIDIA/dcgm-exporter release tags "
    "(https://github.com/NVIDIA/dcgm-exporter)"
)
EPEL_PROMETHEUS_SOURCE = (
    "Fedora Packages, golang-github-prometheus (EPEL 9 2.32.1, no EPEL 10 build) "
    "(https://packages.fedoraproject.org/pkgs/golang-github-prometheus/golang-github-prometheus/)"
)
PORTS_SOURCE = (
    "Prometheus wiki, Default port allocations "
    "(https://github.com/prometheus/prometheus/wiki/Default-port-allocations); ss(8)"
)
_PKG_TAGS = ("repository", "packages")
_ROLE_TAGS = ("monitoring",)


def _monitoring_catalog(package_format: str = "deb") -> MonitoringCatalog:
    """``data/monitoring.yaml`` as a host of ``package_format`` sees it, loaded on first use: only
    a spec that monitors reads it."""
    from provision.catalog.monitoring import load_monitoring

    return load_monitoring().for_format(package_format)


def _catalog_for(spec: Spec) -> MonitoringCatalog:
    return _monitoring_catalog(package_format(spec.os.distro))


class Dcgm(InstallableComponent):
    """DCGM 4 (core and the plugin for the driver's CUDA major) and its paired dcgm-exporter."""

    name = Component.DCGM
    spec_section = "monitoring"
    facts = ("packages",)
    role = "nvidia_packages"
    tags = _PKG_TAGS
    transaction = True
    verify_checks = ("monitoring-services", "dcgm-exporter-metrics")

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        mon = ctx.spec.monitoring
        if mon is None:
            return ()
        wanted = dcgm_wanted(ctx.spec, ctx.catalog, _catalog_for(ctx.spec))
        if wanted is None:
            return ()  # refused by spec_findings, which findings() reports
        return (dcgm_step(ctx, wanted),)

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        if spec.monitoring is None:  # its catalog file is read only for a spec that monitors
            return ()
        return spec_findings(spec, catalog, _catalog_for(spec))

    def findings(self, ctx: PlanContext) -> Iterable[Finding]:
        if ctx.spec.monitoring is None:
            return
        yield from self.spec_rules(ctx.spec, ctx.catalog)
        yield from legacy_dcgm(ctx.spec, ctx.facts, _catalog_for(ctx.spec))

    def pins(self, spec: Spec, pm: PackageManager) -> tuple[Pin, ...]:
        mon = spec.monitoring
        if mon is None:
            return ()
        cat = _monitoring_catalog(pm.package_format)
        exporter = cat.exporter_for(mon.dcgm)
        if exporter is None:
            return ()
        return (
            Pin(
                packages=f"{cat.dcgm.core.removesuffix('-core')}-*",
                version=_glob(pm, cat.dcgm.epoch, mon.dcgm),
                why=f"DCGM {mon.dcgm}",
            ),
            Pin(
                packages=cat.exporter.package,
                version=_glob(pm, cat.exporter.epoch, exporter),
                why=f"dcgm-exporter {exporter}, paired with DCGM {mon.dcgm}",
            ),
        )


class DcgmWanted:
    """The DCGM packages a spec asks for: names and versions, resolved from the catalog."""

    def __init__(self, dcgm: DottedVersion, exporter: DottedVersion, cuda_major: int, cat: MonitoringCatalog):
        self.dcgm, self.exporter, self.cuda_major = dcgm, exporter, cuda_major
        self.dcgm_packages = cat.dcgm.packages(cuda_major)
        self.exporter_package = cat.exporter.package
        self.cat = cat


def driver_cuda_major(spec: Spec, catalog: Catalog) -> int | None:
    """The CUDA major the spec's driver branch reports (the catalog's ``max_cuda_major``)."""
    branch = catalog.driver_branch(spec.driver.branch)
    return branch.max_cuda_major if branch else None


def dcgm_wanted(spec: Spec, catalog: Catalog, cat: MonitoringCatalog) -> DcgmWanted | None:
    """What to install, or None when a spec rule refuses the section."""
    mon = spec.monitoring
    if mon is None or any(True for _ in spec_findings(spec, catalog, cat)):
        return None
    exporter = cat.exporter_for(mon.dcgm)
    major = mon.dcgm_cuda or driver_cuda_major(spec, catalog)
    if exporter is None or major is None:
        return None
    return DcgmWanted(mon.dcgm, exporter, major, cat)


def spec_findings(spec: Spec, catalog: Catalog, cat: MonitoringCatalog) -> Iterator[Finding]:
    """The DCGM rules on the spec alone: a release the catalog pairs with an exporter, a CUDA
    plugin matching the driver's CUDA major (DCGM#255), a plugin DCGM 4 ships; and a Prometheus
    server where the distribution has none provision runs (RHEL, Rocky)."""
    mon = spec.monitoring
    if mon is None:
        return
    if mon.prometheus and cat.prometheus_refused is not None:
        yield _finding(
            "monitoring-prometheus-unsupported",
            f"monitoring.prometheus on {spec.os.distro} {spec.os.version}: {cat.prometheus_refused.reason}",
            source=EPEL_PROMETHEUS_SOURCE,
        )
    if cat.exporter_for(mon.dcgm) is None:
        yield _finding(
            "dcgm-release-unpaired",
            f"monitoring.dcgm: {mon.dcgm} has no dcgm-exporter release paired with it in the catalog "
            f"(known: {', '.join(cat.known_dcgm())}); NVIDIA pairs each exporter with one DCGM release",
        )
    driver_major = driver_cuda_major(spec, catalog)
    if mon.dcgm_cuda is not None and driver_major is not None and mon.dcgm_cuda != driver_major:
        yield _finding(
            "dcgm-cuda-mismatch",
            f"monitoring.dcgm_cuda: {mon.dcgm_cuda}, but driver R{spec.driver.branch} reports CUDA "
            f"{driver_major}: DCGM needs datacenter-gpu-manager-4-cuda{driver_major} (its diagnostics "
            f"fail with 'Detected unsupported Cuda version' otherwise); set dcgm_cuda: {driver_major} "
            "or leave it unset",
        )
    major = mon.dcgm_cuda or driver_major
    if major is None:
        yield _finding(
            "dcgm-cuda-unknown",
            f"driver R{spec.driver.branch}: its CUDA major is not in the catalog; set monitoring.dcgm_cuda",
        )
    elif major not in cat.dcgm.cuda_majors:
        majors = ", ".join(str(m) for m in cat.dcgm.cuda_majors)
        yield _finding(
            "dcgm-cuda-unsupported",
            f"DCGM 4 ships CUDA plugins for CUDA {majors} only, not {major}",
        )


def legacy_dcgm(spec: Spec, facts: Facts, cat: MonitoringCatalog) -> Iterator[Finding]:
    """The unversioned 3.x package installed: installing it removes 4.x and the reverse (deepops#1394)."""
    if spec.monitoring is None or isinstance(facts.packages, Unknown):
        return
    legacy = facts.package(cat.dcgm.legacy)
    if legacy is not None and legacy.installed:
        yield _finding(
            "dcgm-3-installed",
            f"{cat.dcgm.legacy} {legacy.version} (DCGM 3) is installed; it and DCGM 4 replace each other. "
            f"Remove it ({facts.package_manager(spec.os.distro).remove_command((cat.dcgm.legacy,))}) "
            "before provisioning DCGM 4",
        )


def dcgm_step(ctx: PlanContext, wanted: DcgmWanted) -> Step:
    """Install DCGM and the exporter at their paired versions, or say they are there."""
    pm, epochs = ctx.pm, wanted.cat
    requests = [(name, wanted.dcgm, epochs.dcgm.epoch) for name in wanted.dcgm_packages] + [
        (wanted.exporter_package, wanted.exporter, epochs.exporter.epoch)
    ]
    missing = [(n, v, e) for n, v, e in requests if not _has(ctx, n, v)]
    target = f"DCGM {wanted.dcgm} (CUDA {wanted.cuda_major}), dcgm-exporter {wanted.exporter}"
    core = ctx.installed(wanted.dcgm_packages[0])
    current = core.version if core else "absent"
    if not missing:
        return noop(
            Component.DCGM,
            current=current,
            target=target,
            reason=f"{', '.join(n for n, _, _ in requests)} installed at the paired versions",
        )
    return Step(
        component=Component.DCGM,
        action=Action.UPGRADE if core else Action.INSTALL,
        current=current,
        target=target,
        packages=tuple(pm.request(n, _glob(pm, e, v)) for n, v, e in missing),
        tags=_PKG_TAGS,
        reason=f"DCGM {wanted.dcgm} with the plugin for the driver's CUDA {wanted.cuda_major} "
        f"(DCGM#255) and dcgm-exporter {wanted.exporter}, the release NVIDIA pairs with it",
    )


def _has(ctx: PlanContext, name: str, version: DottedVersion) -> bool:
    pkg = ctx.installed(name)
    return pkg is not None and ctx.upstream(pkg) == version


def _glob(pm: PackageManager, epoch: int, version: DottedVersion) -> str:
    """``1:4.5.3-*``: the full version with any Debian revision, behind the catalog's epoch; on rpm
    ``4.5.3-*`` (a dnf request or versionlock entry without an epoch matches any, as the driver's
    ``nvidia-open-580.95.05-*`` matches its epoch 3)."""
    glob = pm.version_glob(version)
    return f"{epoch}:{glob}" if epoch and pm.package_format == "deb" else glob


class Monitoring(InstallableComponent):
    """node exporter (and Prometheus on the monitoring server) from the distribution, with
    provision's counters, exporter drop-in, scrape configuration and alert rules."""

    name = Component.MONITORING
    spec_section = "monitoring"
    facts = ("packages", "listening", "monitoring_files", "nvidia_pci", "gpus")
    role = "monitoring"
    tags = _ROLE_TAGS
    verify_checks = (
        "monitoring-services",
        "dcgm-exporter-metrics",
        "node-exporter-metrics",
        "prometheus-targets",
    )
    observer = "provision.verify.checks_monitoring:OBSERVER"

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        mon = ctx.spec.monitoring
        if mon is None:
            return ()
        return (distro_packages_step(ctx, mon), files_step(ctx, mon))

    def findings(self, ctx: PlanContext) -> Iterable[Finding]:
        mon = ctx.spec.monitoring
        if mon is None:
            return
        yield from no_nvidia_gpus(ctx.facts)
        yield from ports_taken(mon, ctx.facts, _catalog_for(ctx.spec))

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        mon = ctx.spec.monitoring
        if mon is None:
            return {}
        cat = _catalog_for(ctx.spec)
        services = [cat.dcgm.service, cat.exporter.service, cat.node_exporter.service]
        return {
            "packages": list(distro_packages(mon, cat)),
            "files": [f.as_var() for f in _files(ctx, mon)],
            "services": services + ([cat.prometheus.service] if _runs_prometheus(mon, cat) else []),
            "textfile_dir": cat.node_exporter.textfile_dir,
        }


def _runs_prometheus(mon: MonitoringSpec, cat: MonitoringCatalog) -> bool:
    """Prometheus on this host: asked for, where the distribution has one provision runs."""
    return mon.prometheus and cat.prometheus_refused is None


def distro_packages(mon: MonitoringSpec, cat: MonitoringCatalog) -> tuple[str, ...]:
    """The distribution's packages: node exporter, and Prometheus on the monitoring server."""
    return (cat.node_exporter.package,) + ((cat.prometheus.package,) if _runs_prometheus(mon, cat) else ())


def distro_packages_step(ctx: PlanContext, mon: MonitoringSpec) -> Step:
    """Install the distribution's node exporter (and Prometheus) when absent; any version the
    distribution ships (they are not part of the held NVIDIA stack, so security updates reach them)."""
    cat = _catalog_for(ctx.spec)
    wanted = distro_packages(mon, cat)
    missing = tuple(p for p in wanted if ctx.installed(p) is None)
    repos = ctx.pm.add_on_repositories(Component.MONITORING.value)
    also = "".join(f" and {r}" for r in repos)
    if not missing:
        versions = ", ".join(f"{p} {pkg.version}" for p in wanted if (pkg := ctx.installed(p)))
        return noop(Component.MONITORING, reason=f"{versions} installed from the distribution{also}")
    return Step(
        component=Component.MONITORING,
        action=Action.INSTALL,
        current="absent",
        target=", ".join(missing),
        packages=missing,
        tags=_ROLE_TAGS,
        reason=f"install {', '.join(missing)} from the distribution's archive{also}",
    )


def _fleet_hosts(ctx: PlanContext) -> tuple[str, ...]:
    return tuple(h for h in ctx.fleet_monitored if h != ctx.facts.host)


def _files(ctx: PlanContext, mon: MonitoringSpec) -> tuple[ManagedFile, ...]:
    from provision.components.monitoring_files import managed_files  # only a spec that monitors

    return managed_files(mon, _catalog_for(ctx.spec), _fleet_hosts(ctx))


def files_step(ctx: PlanContext, mon: MonitoringSpec) -> Step:
    """Write the files whose text differs from provision's (or is unread), and start the services."""
    on_disk = ctx.facts.monitoring_files
    files = _files(ctx, mon)
    if isinstance(on_disk, Unknown):
        stale = files
        why = because("monitoring files unread", on_disk.unknown)
    else:
        stale = tuple(f for f in files if on_disk.sha256.get(f.dest) != f.sha256)
        why = ""
    if not stale:
        return noop(
            Component.MONITORING,
            target="configured",
            reason=f"{len(files)} monitoring files match the spec (" + ", ".join(f.what for f in files) + ")",
        )
    missing = [] if isinstance(on_disk, Unknown) else [f for f in stale if f.dest not in on_disk.sha256]
    state = why or ("absent" if len(missing) == len(stale) else "differs")
    return Step(
        component=Component.MONITORING,
        action=Action.CONFIGURE,
        current=state,
        target="configured",
        tags=_ROLE_TAGS,
        reason="write "
        + ", ".join(f"{f.what} ({f.dest})" for f in stale)
        + "; enable and (re)start the services that read them",
    )


def no_nvidia_gpus(facts: Facts) -> Iterator[Finding]:
    """Monitoring on a machine without NVIDIA GPUs: DCGM has nothing to watch (refused)."""
    pci = facts.nvidia_pci
    if isinstance(pci, Unknown) or any(d.is_gpu for d in pci):
        return
    if not isinstance(facts.gpus, Unknown) and facts.gpus:
        return
    yield _finding(
        "monitoring-without-nvidia-gpus",
        "monitoring: lspci shows no NVIDIA GPU on this machine; DCGM and dcgm-exporter have nothing "
        "to watch. Remove the monitoring section for this host",
        source="lspci -nn (PCI vendor 10de, class 03xx)",
    )


def ports_taken(mon: MonitoringSpec, facts: Facts, cat: MonitoringCatalog) -> Iterator[Finding]:
    """A spec port another program listens on, on an address the service would bind too: the
    service could not start (refused).

    A socket is the service's own when ss names its process, or, when ss shows no process (not
    root), when the service's package is already installed. Two specific addresses (127.0.0.2
    and 127.0.0.3) do not collide; a wildcard collides with every address (bind(2), EADDRINUSE).
    """
    listening = facts.listening
    if isinstance(listening, Unknown):
        return
    for port, field, owner, address in _ports(mon, cat):
        for sock in listening.on_port(port):
            if not _overlaps(sock.address, address) or _is_own(sock.process, owner, facts):
                continue
            who = f"{sock.process}" if sock.process else "another program"
            yield _finding(
                "monitoring-port-taken",
                f"monitoring.{field}: port {port} is taken by {who} (listening on {sock.address}); "
                f"choose another port or stop that program",
                source=PORTS_SOURCE,
            )
            break


_PROCESS_NAMES = {
    "datacenter-gpu-manager-exporter": ("dcgm-exporter",),
    "prometheus-node-exporter": ("prometheus-node", "prometheus-node-exporter", "node_exporter"),
    "node-exporter": ("node_exporter", "prometheus-node"),
    "prometheus": ("prometheus",),
}
"""Names ss shows for each service's process (the kernel's comm, cut to 15 characters)."""


def _ports(mon: MonitoringSpec, cat: MonitoringCatalog) -> list[tuple[int, str, str, str]]:
    ports = [
        (mon.exporter_port, "exporter_port", cat.exporter.package, mon.listen),
        (mon.node_exporter_port, "node_exporter_port", cat.node_exporter.package, mon.listen),
    ]
    if _runs_prometheus(mon, cat):
        ports.append((mon.prometheus_port, "prometheus_port", cat.prometheus.package, mon.prometheus_listen))
    return ports


def _overlaps(bound: str, wanted: str) -> bool:
    """Whether a socket bound to ``bound`` (as ss prints it, ``*`` for any) blocks binding ``wanted``."""
    wildcards = ("*", "0.0.0.0", "::")
    return bound in wildcards or wanted in wildcards or bound == wanted


def _is_own(process: str | None, package: str, facts: Facts) -> bool:
    if process is not None:
        return process in _PROCESS_NAMES.get(package, ())
    pkg = facts.package(package)
    return pkg is not None and pkg.installed


def _finding(rule: str, message: str, source: str = DCGM_SOURCE) -> Finding:
    return Finding(rule=rule, severity="blocker", message=message, source=source)
