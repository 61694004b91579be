"""Plans for Rocky Linux and RHEL hosts: the RedHat family on the OS seam (issue 28).

The facts are the constructed Rocky 9.5 capture (tests/fixtures/raw/rocky9-dual-a100x-fresh, its README
says how it was made) and edits of it; the spec is specs/rocky9-dual-a100x.yaml. Sources of what the
plan must say: NVIDIA Driver Installation Guide, Kernel Modules (module streams on 8/9, versionlock on
10) and Version locking; CUDA Installation Guide, RHEL (kernel-devel per kernel, EPEL for DKMS).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from provision.components.base import Component
from provision.detect.facts import Facts, OsRelease, PackageLocks
from provision.detect.runner import facts_from_raw
from provision.os import os_family, package_manager
from provision.os.redhat.dnf import DNF
from provision.plan.models import Plan
from provision.plan.planner import make_plan
from provision.spec.models import OsSpec, Spec
from tests.unit.factories import CATALOG, by_host, invoke, spec_from

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "rocky9-dual-a100x.yaml"
RAW = ROOT / "tests" / "fixtures" / "raw" / "rocky9-dual-a100x-fresh"
UBUNTU_RAW = ROOT / "tests" / "fixtures" / "raw" / "h200x2-ubuntu2404-spec"


def _rocky(**changes: object) -> Facts:
    return facts_from_raw(RAW).model_copy(update=changes)


def _step(plan: Plan, component: Component) -> object:
    return next(s for s in plan.steps if s.component is component)


def _plan(spec: Spec | None = None, facts: Facts | None = None) -> Plan:
    return make_plan(spec or spec_from(SPEC), facts or _rocky(), CATALOG)


def test_the_capture_reads_as_a_rocky_host_through_the_redhat_family() -> None:
    facts = _rocky()
    assert facts.os_family("") == "RedHat" and facts.package_manager() is DNF
    assert isinstance(facts.packages, tuple)
    assert {p.name for p in facts.packages} >= {"kernel-core", "gcc"}
    assert DNF.packaged_kernels(facts.packages) == ("5.14.0-503.14.1.el9_5.x86_64",)
    assert facts.kernel.release == "5.14.0-503.14.1.el9_5.x86_64"  # type: ignore[union-attr]


def test_rocky9_plans_the_module_stream_versionlock_kernel_devel_and_epel() -> None:
    plan = _plan()
    assert not plan.blockers, plan.blockers
    driver = _step(plan, Component.DRIVER)
    assert driver.packages == ("nvidia-open-580.95.05-*",)  # type: ignore[attr-defined]
    assert "module stream nvidia-driver:580-open" in driver.reason  # type: ignore[attr-defined]
    assert plan.role_vars("nvidia_packages")["nvidia_packages_module_stream"] == "nvidia-driver:580-open"  # type: ignore[index]
    forbidden = plan.role_vars("nvidia_packages")["nvidia_packages_forbidden_regex"]  # type: ignore[index]
    assert (
        "kmod\\-nvidia\\-latest\\-dkms" in forbidden and "nvidia\\-driver)" not in forbidden
    )  # nvidia-driver: userspace
    dkms = _step(plan, Component.DKMS)
    assert dkms.packages == ("dkms", "kernel-devel-5.14.0-503.14.1.el9_5", "kernel-devel", "gcc-c++")  # type: ignore[attr-defined]
    assert "dkms from epel" in dkms.reason  # type: ignore[attr-defined]
    repo = plan.role_vars("nvidia_repository")
    assert (
        repo["nvidia_repository_url"]
        == "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/"
    )  # type: ignore[index]
    assert repo["nvidia_repository_fingerprint"] == "610C7B14E068A878070DA4E99CD0A493D42D0685"  # type: ignore[index]
    assert repo["nvidia_repository_sources_file"] == "/etc/yum.repos.d/provision-nvidia-cuda.repo"  # type: ignore[index]
    assert repo["nvidia_repository_preferences_file"] == "/etc/dnf/plugins/versionlock.list"  # type: ignore[index]
    assert repo["nvidia_repository_add_on_packages"] == ["epel-release"]  # type: ignore[index]
    pins = repo["nvidia_repository_preferences"]  # type: ignore[index]
    assert "kmod-nvidia-*-580.95.05-*\n" in pins and "libnccl*-2.28.3-*+cuda13.0\n" in pins
    assert "Pin-Priority" not in pins  # versionlock entries, not apt preferences
    holds = plan.role_vars("nvidia_holds")
    assert holds["nvidia_holds_unattended_file"] == "/etc/dnf/plugins/versionlock.conf"  # type: ignore[index]
    assert plan.role_vars("nvidia_kernel")["nvidia_kernel_initramfs_argv"] == [
        "dracut",
        "--regenerate-all",
        "--force",
    ]  # type: ignore[index]


def test_rocky10_has_no_modules_and_holds_the_branch_with_versionlock() -> None:
    os10 = OsRelease(id="rocky", version_id="10.0", id_like=("rhel", "centos", "fedora"))
    plan = _plan(spec_from(SPEC, os__version="10"), _rocky(os=os10))
    assert not [b for b in plan.blockers if b.rule == "os-mismatch"]
    assert plan.role_vars("nvidia_packages")["nvidia_packages_module_stream"] == ""  # type: ignore[index]
    assert "module stream" not in _step(plan, Component.DRIVER).reason  # type: ignore[attr-defined]
    repo = plan.role_vars("nvidia_repository")
    assert "/repos/rhel10/" in repo["nvidia_repository_url"]  # type: ignore[index]
    assert "nvidia-*-580.95.05-*\n" in repo["nvidia_repository_preferences"]  # type: ignore[index]


def test_the_repository_of_another_major_is_refused_with_modular_filtering_as_the_reason() -> None:
    os10 = OsRelease(id="rocky", version_id="10.0", id_like=("rhel", "centos", "fedora"))
    plan = _plan(facts=_rocky(os=os10))
    mismatch = next(b for b in plan.blockers if b.rule == "os-mismatch")
    assert "rhel9 repository" in mismatch.message and "filtered out by modular filtering" in mismatch.message
    assert "own rhel10" in mismatch.message
    assert "kernel-modules.html" in mismatch.source and "modularity" in mismatch.source


def test_a_flavour_switch_switches_the_module_stream() -> None:
    locks = PackageLocks(streams=("nvidia-driver:580-dkms",))
    reason = _step(_plan(facts=_rocky(package_locks=locks)), Component.DRIVER).reason  # type: ignore[attr-defined]
    assert "switched from nvidia-driver:580-dkms to nvidia-driver:580-open" in reason


def test_rhel_and_rocky_releases_9_and_10_only() -> None:
    assert OsSpec(distro="rhel", version="9.5").repo_code == "rhel9"
    assert OsSpec(distro="rocky", version="10").repo_code == "rhel10"
    for version in ("8", "11"):
        with pytest.raises(ValidationError, match="releases 9 and 10"):
            OsSpec(distro="rocky", version=version)
    with pytest.raises(ValidationError, match="x86_64 only"):
        OsSpec(distro="rhel", version="9", architecture="aarch64")


def test_lock_and_rollback_take_the_hosts_family_from_the_spec() -> None:
    assert package_manager(os_family((), "rocky")) is DNF
    assert package_manager(os_family(("rocky", "rhel", "centos", "fedora"), "")) is DNF
    assert package_manager(os_family(("ubuntu", "debian"), "")).family == "Debian"


def test_an_inventory_mixing_ubuntu_and_rocky_plans_each_host_with_its_own_family(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw / "rocky01")
    shutil.copytree(UBUNTU_RAW, raw / "ubuntu01")
    (tmp_path / "hosts.ini").write_text(
        "rocky01 ansible_connection=local\nubuntu01 ansible_connection=local\n"
    )
    ubuntu_spec = ROOT / "specs" / "h200x2-ubuntu2404.yaml"
    (tmp_path / "fleet.yaml").write_text(
        f"inventory: hosts.ini\nspecs:\n  rocky01: {SPEC}\n  ubuntu01: {ubuntu_spec}\n"
    )
    done = invoke("plan", "--fleet", str(tmp_path / "fleet.yaml"), "--from-raw", str(raw), "--json")
    hosts = by_host(json.loads(done.stdout))
    rocky = hosts["rocky01"]["plan"]["steps"]
    assert any(s["component"] == "driver" and "nvidia-driver:580-open" in s["reason"] for s in rocky)
    ubuntu = hosts["ubuntu01"]["plan"]["steps"]
    assert not any("module stream" in s["reason"] or "versionlock" in s["reason"] for s in ubuntu)


def test_validate_plan_and_apply_dry_run_on_the_rocky_spec(tmp_path: Path) -> None:
    assert invoke("validate", str(SPEC)).exit_code == 0
    out = tmp_path / "plan.json"
    planned = invoke("plan", str(SPEC), "--from-raw", str(RAW), "--out", str(out))
    assert planned.exit_code == 0, planned.stdout
    assert "nvidia-driver:580-open" in planned.stdout


def test_an_installed_kernel_devel_of_the_kernels_version_satisfies_the_dkms_step() -> None:
    """rpm installs one kernel-devel per kernel under one name: the request names the version
    (measured on the Rocky-like target: the plan must converge once it is installed)."""
    from provision.os.models import Package

    facts = _rocky()
    assert isinstance(facts.packages, tuple)
    devel = Package(name="kernel-devel", version="5.14.0-503.14.1.el9_5", arch="x86_64")
    dkms = Package(name="dkms", version="3.2.1-1.el9", arch="noarch")
    cxx = Package(name="gcc-c++", version="11.5.0-2.el9", arch="x86_64")
    done = _plan(facts=facts.model_copy(update={"packages": (*facts.packages, devel, dkms, cxx)}))
    step = _step(done, Component.DKMS)
    assert not step.changes, step  # type: ignore[attr-defined]


def test_the_distributions_own_driver_is_refused_with_why_on_the_family() -> None:
    """No RHEL-family release ships NVIDIA's open modules signed with its own key (releases.py):
    driver.source distro is refused with that reason and the way that works (DKMS + MOK)."""
    plan = _plan(spec_from(SPEC, driver__source="distro", driver__version=None))
    refusal = next(b for b in plan.blockers if b.rule == "driver-distro-unknown")
    assert "no NVIDIA open kernel modules of its own" in refusal.message and "MOK" in refusal.message


def test_the_holds_step_names_only_what_the_role_holds() -> None:
    holds = _step(_plan(), Component.HOLDS)
    assert "kernel-devel" not in holds.packages and "dkms" not in holds.packages  # type: ignore[attr-defined]
    assert "nvidia-open" in holds.packages  # type: ignore[attr-defined]
