"""Monitoring plans for Rocky Linux 9 and 10 (issue 28): DCGM 4 and dcgm-exporter from NVIDIA's
rhel9/rhel10 repositories, EPEL's node exporter, and the Prometheus server refused with its reason.

The facts are the constructed Rocky 9.5 capture (tests/fixtures/raw/rocky9-dual-a100x-fresh) and edits
of it; the spec is specs/rocky9-a100x-monitoring.yaml. Sources: NVIDIA/DCGM CMakeLists.txt
(``CPACK_RPM_PACKAGE_EPOCH 1``) and cmake/packaging.cmake (the RPM names), NVIDIA "Install DCGM
Exporter" (RPM package versions identify the exporter version), Fedora Packages node-exporter (EPEL 9
and 10, ``/usr/bin/node_exporter``, ``prometheus-node-exporter.service``) and golang-github-prometheus
(no EPEL 10 build).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.catalog.monitoring import load_monitoring
from provision.components.base import Component
from provision.components.monitoring_files import managed_files
from provision.components.registry import COMPONENTS
from provision.detect.domains.monitoring import Listening, ManagedFiles
from provision.detect.facts import Facts, OsRelease, PciDevice
from provision.os.models import Package
from provision.plan.models import Action, Plan
from provision.plan.planner import make_plan
from provision.spec.models import Spec
from tests.unit.factories import CATALOG, spec_from
from tests.unit.test_redhat_plan import _rocky

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "rocky9-a100x-monitoring.yaml"
GPU = PciDevice(bdf="0000:41:00.0", class_code="0302", device_id="20b8")
OS = {
    "9": OsRelease(id="rocky", version_id="9.5", id_like=("rhel", "centos", "fedora")),
    "10": OsRelease(id="rocky", version_id="10.0", id_like=("rhel", "centos", "fedora")),
}
DROPIN = "/etc/systemd/system/prometheus-node-exporter.service.d/provision.conf"


def _spec(major: str, **monitoring: object) -> Spec:
    spec = spec_from(SPEC, os__version=major)
    assert spec.monitoring is not None
    return spec.model_copy(update={"monitoring": spec.monitoring.model_copy(update=monitoring)})


def _facts(major: str, *installed: Package, files: dict[str, str] | None = None) -> Facts:
    facts = _rocky(os=OS[major], nvidia_pci=(GPU,), listening=Listening())
    assert isinstance(facts.packages, tuple)
    return facts.model_copy(
        update={
            "packages": (*facts.packages, *installed),
            "monitoring_files": ManagedFiles(sha256=files or {}),
        }
    )


def _plan(major: str, spec: Spec | None = None, facts: Facts | None = None) -> Plan:
    return make_plan(spec or _spec(major), facts or _facts(major), CATALOG)


def _vars(plan: Plan, role: str) -> dict[str, Any]:
    found = plan.role_vars(role)
    assert found is not None, role
    return found


def _steps(plan: Plan, component: Component) -> list[tuple[Action, tuple[str, ...], str]]:
    return [(s.action, s.packages, s.reason) for s in plan.steps if s.component is component]


@pytest.mark.parametrize("major", ["9", "10"])
def test_rocky_plans_dcgm_from_nvidia_and_the_node_exporter_from_epel(major: str) -> None:
    plan = _plan(major)
    assert not plan.blockers, plan.blockers
    ((action, packages, _),) = _steps(plan, Component.DCGM)
    # RPM names as on Debian; no epoch in a dnf request (it matches DCGM's epoch 1 as nvidia-open-580.95.05-*
    # matches the driver's 3)
    assert action is Action.INSTALL and packages == (
        "datacenter-gpu-manager-4-core-4.5.3-*",
        "datacenter-gpu-manager-4-cuda13-4.5.3-*",
        "datacenter-gpu-manager-exporter-4.8.2-*",
    )
    assert set(packages) <= set(_vars(plan, "nvidia_packages")["nvidia_packages_list"])
    install, configure = _steps(plan, Component.MONITORING)
    assert install[:2] == (Action.INSTALL, ("node-exporter",))
    assert install[2] == "install node-exporter from the distribution's archive and epel"
    assert configure[0] is Action.CONFIGURE
    repo = _vars(plan, "nvidia_repository")
    assert repo["nvidia_repository_add_on_packages"] == ["epel-release"]  # DKMS and the node exporter
    assert repo["nvidia_repository_url"].endswith(f"/rhel{major}/x86_64/")
    pins = repo["nvidia_repository_preferences"]
    assert (
        "datacenter-gpu-manager-4-*-4.5.3-*\n" in pins and "datacenter-gpu-manager-exporter-4.8.2-*\n" in pins
    )
    role = _vars(plan, "monitoring")
    assert role["monitoring_packages"] == ["node-exporter"]
    assert role["monitoring_services"] == ["nvidia-dcgm", "nvidia-dcgm-exporter", "prometheus-node-exporter"]
    files = {f["dest"]: f for f in role["monitoring_files"]}
    assert (
        "/etc/default/prometheus-node-exporter" not in files and "/etc/prometheus/prometheus.yml" not in files
    )
    assert files[DROPIN]["content"].endswith(
        "[Service]\nExecStart=\nExecStart=/usr/bin/node_exporter --web.listen-address=0.0.0.0:9100 "
        "--collector.textfile.directory=/var/lib/prometheus/node-exporter\n"
    )
    assert role["monitoring_textfile_dir"] == "/var/lib/prometheus/node-exporter"


@pytest.mark.parametrize("major", ["9", "10"])
def test_a_prometheus_server_is_refused_on_rocky_and_the_rest_is_not(major: str) -> None:
    plan = _plan(major, _spec(major, prometheus=True))
    refused = {b.rule: b for b in plan.blockers}
    assert list(refused) == ["monitoring-prometheus-unsupported"], plan.blockers
    finding = refused["monitoring-prometheus-unsupported"]
    assert f"rocky {major}" in finding.message and "EPEL 10 has no Prometheus build" in finding.message
    assert "prometheus: false here" in finding.message
    assert "https://packages.fedoraproject.org/pkgs/golang-github-prometheus/" in finding.source
    # validate says the same from the spec alone
    rules = {f.rule for c in COMPONENTS for f in c.spec_rules(_spec(major, prometheus=True), CATALOG)}
    assert "monitoring-prometheus-unsupported" in rules


def _converged(major: str, with_epel: bool = True) -> Facts:
    spec = _spec(major)
    assert spec.monitoring is not None
    dist = f"el{major}"
    cat = load_monitoring().for_format("rpm")
    installed = [
        Package(name="datacenter-gpu-manager-4-core", version="1:4.5.3-1", arch="x86_64"),
        Package(name="datacenter-gpu-manager-4-cuda13", version="1:4.5.3-1", arch="x86_64"),
        Package(name="datacenter-gpu-manager-exporter", version="4.8.2-1", arch="x86_64"),
        Package(name="node-exporter", version=f"1.9.1-2.{dist}", arch="x86_64"),
    ]
    if with_epel:
        installed.append(Package(name="epel-release", version=f"{major}-8.{dist}", arch="noarch"))
    files = {f.dest: f.sha256 for f in managed_files(spec.monitoring, cat)}
    return _facts(major, *installed, files=files)


@pytest.mark.parametrize("major", ["9", "10"])
def test_installed_monitoring_plans_no_monitoring_change(major: str) -> None:
    plan = _plan(major, facts=_converged(major))
    for component in (Component.DCGM, Component.MONITORING):
        assert all(s.action is Action.NOOP for s in plan.steps if s.component is component), plan.steps
    (_, _, reason), (_, _, files) = _steps(plan, Component.MONITORING)
    assert reason == f"node-exporter 1.9.1-2.el{major} installed from the distribution and epel"
    assert files.startswith(
        "3 monitoring files match the spec (counters file, dcgm-exporter drop-in, node exporter drop-in"
    )


def test_epel_removed_alone_is_enabled_again_by_the_repository_step() -> None:
    """Nothing else from NVIDIA to install (the driver the image's, no CUDA, DCGM there): EPEL's release
    package gone with node-exporter still installed, nothing installs from EPEL, so nothing enables it;
    with node-exporter gone too, the repository step alone installs epel-release."""
    spec = spec_from(
        SPEC, driver__source="preinstalled", driver__version=None, driver__hold=False, cuda=None, python=None
    )
    plan = _plan("9", spec, _converged("9", with_epel=False))
    assert not any(s.component is Component.REPOSITORY and s.changes for s in plan.steps), plan.steps
    facts = _converged("9", with_epel=False)
    assert isinstance(facts.packages, tuple)
    gone = facts.model_copy(
        update={"packages": tuple(p for p in facts.packages if p.name != "node-exporter")}
    )
    plan = _plan("9", spec, gone)
    (step,) = (s for s in plan.steps if s.component is Component.REPOSITORY)
    assert step.changes and step.reason.startswith("enable epel (epel-release)")
    assert _vars(plan, "nvidia_repository")["nvidia_repository_add_on_packages"] == ["epel-release"]


def test_a_dcgm_3_install_on_rocky_is_refused_as_on_debian() -> None:
    legacy = Package(name="datacenter-gpu-manager", version="1:3.3.9-1", arch="x86_64")
    plan = _plan("9", facts=_facts("9", legacy))
    finding = next(b for b in plan.blockers if b.rule == "dcgm-3-installed")
    assert "dnf remove datacenter-gpu-manager" in finding.message
