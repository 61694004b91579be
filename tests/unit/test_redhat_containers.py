"""containers: on Rocky Linux and RHEL 9 and 10: the toolkit from its own RPM repository, its four
packages in provision's versionlock block and held with the stack, the runtime and CDI steps as on
Debian; the refusals that stay, with their reasons.

The facts are the constructed Rocky 9.5 capture (tests/fixtures/raw/rocky9-dual-a100x-fresh) with the
container facts of the fact cases under tests/fixtures/facts/ (parsed by the real parsers) and one
GPU; the spec is specs/rocky9-containers.yaml. What the plan must say comes from NVIDIA's install
guide (dnf: ``nvidia-container-toolkit-${NVIDIA_CONTAINER_TOOLKIT_VERSION}``, NAME-VERSION-1) and its
``nvidia-container-toolkit.repo`` (``baseurl .../stable/rpm/$basearch``, ``repo_gpgcheck=1``,
``gpgcheck=0``), and Docker's RHEL guide (docker-ce from Docker's own repository).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from provision.apply.rolevars import plan_problems
from provision.catalog.containers import load_containers
from provision.catalog.prebuilt import DATA_DIR
from provision.components.base import Action, Component, Step
from provision.detect.domains.driver import LoadedDriver
from provision.detect.facts import Facts, OsRelease
from provision.detect.runner import facts_from_raw
from provision.errors import CatalogError
from provision.os.models import Package
from provision.plan.models import Plan
from provision.plan.planner import make_plan
from provision.spec.models import Spec
from provision.versions import DriverVersion
from tests.unit.factories import CATALOG, invoke, spec_from
from tests.unit.test_containers import GPU, TOOLKIT, found

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "rocky9-containers.yaml"
RAW = ROOT / "tests" / "fixtures" / "raw" / "rocky9-dual-a100x-fresh"
ROCKY10 = OsRelease(id="rocky", version_id="10.0", id_like=("rhel", "centos", "fedora"))
REPO_FILE = "/etc/yum.repos.d/provision-nvidia-container-toolkit.repo"
KEY_FILE = "/etc/pki/rpm-gpg/RPM-GPG-KEY-provision-nvidia-container-toolkit"


def rocky(**containers: str) -> Facts:
    """The Rocky 9.5 capture with one NVIDIA GPU and the container facts ``containers``."""
    return facts_from_raw(RAW).model_copy(update={"nvidia_pci": (GPU,), "containers": found(**containers)})


def plan_of(spec: Spec | None = None, facts: Facts | None = None) -> Plan:
    return make_plan(spec or spec_from(SPEC), facts or rocky(cdi="none"), CATALOG)


def steps(plan: Plan) -> list[Step]:
    return [s for s in plan.steps if s.component is Component.CONTAINERS]


def role(plan: Plan) -> dict[str, Any]:
    found_vars = plan.role_vars("nvidia_container_toolkit")
    assert found_vars is not None
    return {k.removeprefix("nvidia_container_toolkit_"): v for k, v in found_vars.items()}


def test_the_spec_validates_and_names_the_flagship_stack_with_podman() -> None:
    assert invoke("validate", str(SPEC)).exit_code == 0
    spec = spec_from(SPEC)
    assert spec.os.distro == "rocky" and spec.containers is not None
    assert spec.containers.runtime == "podman"


def test_rocky9_plans_the_four_packages_from_the_toolkits_rpm_repository_locked_and_held() -> None:
    plan = plan_of()
    assert not plan.blockers, plan.blockers
    packages, runtime, cdi, rule = steps(plan)
    # dnf's NAME-VERSION-RELEASE form, any release of 1.18.2 (the guide's 1.18.2-1)
    assert packages.action is Action.INSTALL
    assert packages.packages == tuple(f"{n}-1.18.2-*" for n in TOOLKIT)
    assert runtime.action is Action.NOOP and "podman reads the CDI spec itself" in runtime.reason
    assert cdi.action is Action.CONFIGURE and cdi.target == "/var/run/cdi/nvidia.yaml"
    assert rule.target == "/lib/udev/rules.d/71-nvidia-dev-char.rules"  # /lib is /usr/lib on EL: same path
    # provision's versionlock block bounds the four to the release; the holds step locks them.
    locks = plan.role_vars("nvidia_repository")["nvidia_repository_preferences"]  # type: ignore[index]
    assert "nvidia-container-toolkit*-1.18.2-*\nlibnvidia-container*-1.18.2-*\n" in locks
    assert "Pin-Priority" not in locks
    holds = next(s for s in plan.steps if s.component is Component.HOLDS)
    assert set(TOOLKIT) <= set(holds.packages)
    assert plan_problems(plan.extravars["roles"]) == []


def test_the_repository_file_has_nvidias_settings_and_the_verified_key() -> None:
    got = role(plan_of())
    assert got["url"] == "https://nvidia.github.io/libnvidia-container/stable/rpm/x86_64"
    assert got["sources_file"] == REPO_FILE and got["keyring"] == KEY_FILE
    assert got["repo_id"] == "provision-nvidia-container-toolkit"
    source = got["source"]
    assert "[provision-nvidia-container-toolkit]\n" in source
    assert "baseurl=https://nvidia.github.io/libnvidia-container/stable/rpm/x86_64\n" in source
    assert "repo_gpgcheck=1\ngpgcheck=0\n" in source and f"gpgkey=file://{KEY_FILE}\n" in source
    assert "Signed-By" not in source and "Types: deb" not in source
    key = plan_of().extravars["keys"]["nvidia_container_toolkit"]["nvidia_container_toolkit_keyring_src"]
    assert key == {
        "url": "https://nvidia.github.io/libnvidia-container/gpgkey",
        "file": None,
        "hosts": ["nvidia.github.io"],
        "fingerprint": "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
    }


def test_a_mirror_is_written_as_the_baseurl_with_its_own_key() -> None:
    mirror = {
        "url": "https://mirror.example.org/libnvidia-container/stable/rpm/x86_64",
        "key_url": "https://mirror.example.org/libnvidia-container/gpgkey",
        "key_hosts": ["mirror.example.org"],
        "fingerprint": "0123456789ABCDEF0123456789ABCDEF01234567",
    }
    spec = spec_from(SPEC, containers__repository=mirror)
    got = role(plan_of(spec))
    assert f"baseurl={mirror['url']}\n" in got["source"]
    assert "0123456789ABCDEF0123456789ABCDEF01234567" in got["source"]


def test_rocky10_has_no_module_stream_and_the_same_versionlock_entries() -> None:
    plan = plan_of(spec_from(SPEC, os__version="10"), rocky(cdi="none").model_copy(update={"os": ROCKY10}))
    assert not plan.blockers, plan.blockers
    assert plan.role_vars("nvidia_packages")["nvidia_packages_module_stream"] == ""  # type: ignore[index]
    assert steps(plan)[0].packages == tuple(f"{n}-1.18.2-*" for n in TOOLKIT)
    locks = plan.role_vars("nvidia_repository")["nvidia_repository_preferences"]  # type: ignore[index]
    assert "nvidia-container-toolkit*-1.18.2-*\n" in locks
    assert role(plan)["url"].endswith("/stable/rpm/x86_64")  # one repository for every RPM release


def test_docker_on_rocky_is_configured_by_nvidia_ctk_and_restarted() -> None:
    spec = spec_from(SPEC, containers__runtime="docker")
    plan = plan_of(spec, rocky(cdi="none", docker="debian13"))
    assert not plan.blockers, plan.blockers
    runtime = steps(plan)[1]
    assert runtime.action is Action.CONFIGURE
    got = role(plan)
    assert got["configure_argv"] == [
        "nvidia-ctk",
        "runtime",
        "configure",
        "--runtime=docker",
        "--cdi.enabled",
    ]
    assert got["runtime_service"] == "docker"


def test_a_converged_rocky_host_plans_nothing_for_containers() -> None:
    facts = rocky()
    assert isinstance(facts.packages, tuple)
    ctk = tuple(Package(name=n, version="1.18.2-1", arch="x86_64", held=True) for n in TOOLKIT)
    facts = facts.model_copy(
        update={
            "packages": (*facts.packages, *ctk),
            "driver": LoadedDriver(version=DriverVersion("580.95.05"), flavor="open"),
        }
    )
    # the driver is the host's (a loaded 580.95.05 the spec checks, never installs)
    plan = plan_of(spec_from(SPEC, driver__source="preinstalled"), facts)
    assert [s.action for s in steps(plan)] == [Action.NOOP] * 4, steps(plan)
    assert "NVIDIA Container Toolkit 1.18.2 installed" in steps(plan)[0].reason


def test_refusals_stay_with_their_reasons_on_the_family() -> None:
    # docker is not part of the RHEL family: the advice names Docker's own repository
    plan = plan_of(spec_from(SPEC, containers__runtime="docker"))
    missing = next(b for b in plan.blockers if b.rule == "containers-runtime-missing")
    assert "Docker CE from Docker's own rpm repository" in missing.message
    assert "(DOCKER-RHEL)" in missing.source and "Install Docker Engine on RHEL" in missing.source
    # podman absent: the distribution's own engine
    plan = plan_of(facts=rocky(podman="not-found"))
    missing = next(b for b in plan.blockers if b.rule == "containers-runtime-missing")
    assert "install the distribution's podman" in missing.message
    # a release the catalog does not know
    plan = plan_of(spec_from(SPEC, containers__toolkit="1.16.9"))
    unknown = next(b for b in plan.blockers if b.rule == "containers-toolkit-unknown")
    assert "1.16.9" in unknown.message and "known: 1.20.0" in unknown.message
    # a host without an NVIDIA GPU
    plan = plan_of(facts=rocky(cdi="none").model_copy(update={"nvidia_pci": ()}))
    assert "containers-no-gpu" in {b.rule for b in plan.blockers}
    # and no longer the family refusal
    assert "containers-os-unsupported" not in {b.rule for b in plan_of().blockers}


def test_the_catalog_refuses_a_repository_row_missing_for_a_package_format(tmp_path: Path) -> None:
    for name in ("containers.yaml", "sources.yaml"):
        shutil.copy(DATA_DIR / name, tmp_path / name)
    text = (tmp_path / "containers.yaml").read_text()
    start, end = text.index("  rpm:\n    urls:"), text.index("releases:")
    (tmp_path / "containers.yaml").write_text(text[:start] + text[end:])
    with pytest.raises(CatalogError, match="repositories must name every package format"):
        load_containers(tmp_path)
