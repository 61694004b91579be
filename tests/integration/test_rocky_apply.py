"""Real Ansible (``ansible.builtin.dnf``) over ssh to a Rocky-like target whose dnf and rpm are real.

The target (harness/rockylike.py) is Debian 12's userland with real dnf 4.14 and rpm 4.18,
made to look like Rocky Linux 9.5, so Ansible sets ``ansible_os_family=RedHat`` and
``ansible_pkg_mgr=dnf`` and the RedHat task files run for real. The repositories are the
stand-ins of NVIDIA's rhel9/rhel10 (signed) and of EPEL, served over http.

Two layers:
- the harness itself, with a small playbook doing what NVIDIA documents for RHEL 9
  (harness/playbooks/nvidia_open_el9.yml): facts, module-profile install, re-apply, a cut apply,
  a killed rpm transaction and its repair;
- provision itself with the stack of ``specs/rocky9-dual-a100x.yaml`` (its python section left
  out: the target's interpreter is Debian's 3.11): validate, plan and ``apply --dry-run`` over
  ssh pass; ``apply`` (converged, re-apply changes nothing) and an interrupted apply run the
  roles' ``tasks/RedHat.yml`` for real, on 9 and on 10, and so does a flavour switch (open to
  proprietary kmod: ``dnf module switch-to --allowerasing``, then the install with allowerasing,
  since switch-to leaves a flavour installed by name behind).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from provision.apply import runner as apply_runner
from provision.os.models import PackageOrigins
from provision.os.redhat.parse import RPM_QA_QUERYFORMAT, duplicates, parse_module_list, parse_rpm_qa
from provision.os.redhat.probes import ORIGINS
from provision.plan.models import Plan
from tests.integration.harness import golden, rockylike, runner, timings
from tests.integration.harness.dnfroot import OS_RELEASE
from tests.integration.harness.rockylike import RhelRepos, rpm_installed
from tests.integration.harness.server import StaticServer
from tests.integration.harness.target import Target, start_target
from tests.integration.helpers import provision
from tests.integration.test_dnf_real import MISSING
from tests.integration.test_faults import _interrupt_when
from tests.unit.factories import one_plan

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = Path(__file__).parent / "harness" / "playbooks" / "nvidia_open_el9.yml"
ROCKY_SPEC = REPO / "specs" / "rocky9-dual-a100x.yaml"
ROLES_WITH_PACKAGES = ("nvidia_repository", "nvidia_packages", "nvidia_holds", "nvidia_kernel")
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"Rocky-like target needs {', '.join(MISSING)}")

CLOSURE_580 = {
    "nvidia-open",
    "nvidia-driver",
    "nvidia-driver-libs",
    "nvidia-driver-cuda",
    "nvidia-driver-cuda-libs",
    "nvidia-persistenced",
    "nvidia-kmod-common",
    "kmod-nvidia-open-dkms",
}


@pytest.fixture(scope="session")
def rocky_root() -> golden.GoldenRoot:
    root = rockylike.ensure_rockylike_root()
    timings.record(
        "rocky-like root build" if root.build_seconds else "rocky-like root (cached)", root.build_seconds
    )
    return root


@pytest.fixture(scope="session")
def rhel_repos(http_server: StaticServer, tmp_path_factory: pytest.TempPathFactory) -> RhelRepos:
    with timings.timed("stand-in rhel9/rhel10/EPEL repositories"):
        return rockylike.publish_rhel_repos(http_server, golden.cache_dir(), tmp_path_factory.mktemp("rhel"))


@pytest.fixture()
def rocky(rocky_root: golden.GoldenRoot, tmp_path: Path) -> Iterator[Target]:
    with timings.timed("rocky-like target up"):
        box = start_target(rocky_root.path, rocky_root.ssh_key, tmp_path / "target")
    try:
        yield box
    finally:
        box.close()


def extravars(
    repos: RhelRepos, stream: str = "580-open", driver_version: str = "580.95.05"
) -> dict[str, str]:
    return {
        "repo_url": repos.url(9),
        "key_url": repos.key_url,
        "epel_url": repos.epel_url,
        "stream": stream,
        "driver_version": driver_version,
    }


def apply(target: Target, variables: dict[str, str], **kwargs: object) -> Any:
    return runner.run_playbook(target.inventory, PLAYBOOK, target.workdir, extravars=variables, **kwargs)


def nvidia(target: Target) -> dict[str, str]:
    return {n: v for n, v in rpm_installed(target.root).items() if "nvidia" in n}


def _rpm_qa(target: Target) -> str:
    """The detect probe's ``rpm -qa --qf`` run by the target's own rpm."""
    return target.run(["rpm", "-qa", "--qf", RPM_QA_QUERYFORMAT], check=True).stdout


def test_ansible_sees_a_rocky_9_host_with_dnf(rocky: Target) -> None:
    result = runner.run_module(
        rocky.inventory, "ansible.builtin.setup", "gather_subset=!all,distribution,pkg_mgr", rocky.workdir
    )
    assert result.status == "successful", result.stdout.read()
    facts = runner.task_results(result)
    (res,) = facts.values()
    got = res["ansible_facts"]
    assert (got["ansible_os_family"], got["ansible_distribution"], got["ansible_pkg_mgr"]) == (
        "RedHat",
        "Rocky",
        "dnf",
    )
    assert got["ansible_distribution_major_version"] == "9"


def test_stream_install_through_ansible_dnf_then_nothing_changes(
    rocky: Target, rhel_repos: RhelRepos
) -> None:
    with timings.timed("rocky apply: key + repos + module profile + fabric manager"):
        first = apply(rocky, extravars(rhel_repos))
    assert first.status == "successful", first.stdout.read()
    installed = nvidia(rocky)
    assert {n: installed.get(n) for n in CLOSURE_580} == dict.fromkeys(CLOSURE_580, "3:580.95.05-1.el9")
    assert installed["nvidia-fabricmanager"] == "0:580.95.05-1"
    assert "kmod-nvidia-latest-dkms" not in installed
    listing = rocky.ssh("dnf", "-q", "module", "list", "nvidia-driver")
    rows = {r.stream: r for r in parse_module_list(listing.stdout)}
    assert rows["580-open"].enabled and rows["580-open"].installed_profiles == ("default",), listing.stdout
    with timings.timed("rocky apply: second run"):
        again = apply(rocky, extravars(rhel_repos))
    assert again.status == "successful", again.stdout.read()
    assert again.stats["changed"] == {}


def test_apply_cut_after_the_driver_converges(rocky: Target, rhel_repos: RhelRepos) -> None:
    # The controller stopped between tasks: repository and driver done, fabric manager not.
    cut = apply(rocky, extravars(rhel_repos), skip_tags="fabricmanager")
    assert cut.status == "successful", cut.stdout.read()
    assert "nvidia-fabricmanager" not in nvidia(rocky) and "nvidia-open" in nvidia(rocky)
    rest = apply(rocky, extravars(rhel_repos))
    assert rest.status == "successful", rest.stdout.read()
    assert nvidia(rocky)["nvidia-fabricmanager"] == "0:580.95.05-1"
    assert apply(rocky, extravars(rhel_repos)).stats["changed"] == {}


def test_a_killed_rpm_transaction_shows_as_duplicates_and_dnf_repairs_it(
    rocky: Target, rhel_repos: RhelRepos
) -> None:
    assert apply(rocky, extravars(rhel_repos)).status == "successful"
    # What rpm leaves when killed mid-upgrade: the other version's header added, the old not
    # yet erased. Here the older release is added to the database only (--justdb).
    old = rhel_repos.nvidia.path / "nvidia-driver-libs-580.82.07-1.el9.x86_64.rpm"
    (rocky.root / "tmp/old.rpm").write_bytes(old.read_bytes())
    rocky.run(
        ["rpm", "-i", "--justdb", "--nodeps", "--oldpackage", "--replacefiles", "/tmp/old.rpm"], check=True
    )
    assert duplicates(parse_rpm_qa(_rpm_qa(rocky))) == ("nvidia-driver-libs",)
    check = rocky.ssh("dnf", "check", "--duplicates")
    assert check.returncode != 0 and "duplicate" in (check.stdout + check.stderr)
    repair = rocky.ssh("dnf", "-y", "remove", "--duplicates")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert duplicates(parse_rpm_qa(_rpm_qa(rocky))) == ()
    assert nvidia(rocky)["nvidia-driver-libs"] == "3:580.95.05-1.el9"
    assert apply(rocky, extravars(rhel_repos)).stats["changed"] == {}


def rocky_spec(path: Path, repos: RhelRepos, **over: object) -> Path:
    """A Rocky Linux 9 spec for the Rocky-like target (the flagship spec's stack, without its
    python section: the target's interpreter is Debian's 3.11, not Rocky's 3.12)."""
    spec: dict[str, object] = {
        "schema_version": 1,
        "name": "rocky9-target",
        "os": {"distro": "rocky", "version": "9"},
        "gpus": {"model": "a100x", "count": 2},
        "driver": {
            "branch": 580,
            "flavor": "open",
            "version": "580.95.05",
            "source": "nvidia-repo",
            "hold": True,
        },
        "cuda": {"toolkit": "13.0", "cudnn": "9.14", "nccl": "2.28.3"},
        "repository": {
            "url": repos.url(9),
            # The stand-in serves its key over loopback http, which key_url refuses: read it as a file.
            "key_file": str(repos.key.armored),
            "fingerprint": repos.key.fingerprint,
        },
    }
    spec.update(over)
    path.write_text(yaml.safe_dump(spec))
    return path


def test_detect_and_plan_read_the_rocky_target_through_real_rpm_and_dnf(
    rocky: Target, rhel_repos: RhelRepos, tmp_path: Path, runs: Path
) -> None:
    spec = rocky_spec(tmp_path / "spec.yaml", rhel_repos)
    inv = str(rocky.inventory)
    assert provision("validate", str(spec)).exit_code == 0
    planned = provision("plan", str(spec), "-i", inv, "--json")
    assert planned.exit_code == 0, planned.output
    plan = one_plan(json.loads(planned.stdout))
    steps = {s["component"]: s for s in plan["steps"]}
    assert "nvidia-driver:580-open" in json.dumps(steps["driver"])
    # kernel-devel for the kernel the target's rpm database holds (kernel-core, the stand-in)
    assert "kernel-devel-5.14.0-503.14.1.el9_5" in json.dumps(steps["dkms"])
    assert not plan.get("refusals"), plan.get("refusals")
    before = rpm_installed(rocky.root)
    dry = provision("apply", str(spec), "-i", inv, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "Dry run: nothing was changed." in dry.output
    assert rpm_installed(rocky.root) == before


def test_provision_apply_on_rocky_converges_and_reapplies_nothing(
    rocky: Target, rhel_repos: RhelRepos, tmp_path: Path, runs: Path
) -> None:
    spec = rocky_spec(tmp_path / "spec.yaml", rhel_repos)
    inv = str(rocky.inventory)
    with timings.timed("provision apply on Rocky (first)"):
        first = provision("apply", str(spec), "-i", inv, "--yes")
    assert first.exit_code == 0, first.output
    assert "Converged: a fresh plan shows no changes." in first.output
    installed = rpm_installed(rocky.root)
    assert {n: installed.get(n) for n in CLOSURE_580} == dict.fromkeys(CLOSURE_580, "3:580.95.05-1.el9")
    assert installed["cuda-toolkit-13-0"] == "0:13.0.2-1"
    assert installed["libcudnn9-devel-cuda-13"] == "0:9.14.0.64-1"
    assert installed["libnccl-devel"] == "0:2.28.3-1+cuda13.0"
    assert installed["dkms"].startswith("0:3.2.1") and installed["kernel-devel"] == "0:5.14.0-503.14.1.el9_5"
    assert "kmod-nvidia-latest-dkms" not in installed and "cuda-drivers" not in installed
    streams = {
        r.stream: r
        for r in parse_module_list(rocky.ssh("dnf", "-q", "module", "list", "nvidia-driver").stdout)
    }
    assert streams["580-open"].enabled
    locks = rocky.ssh("dnf", "-q", "versionlock", "list").stdout
    assert "nvidia-driver-3:580.95.05-1.el9.*" in locks, locks
    replan = provision("plan", str(spec), "-i", inv, "--detailed-exitcode", "--json")
    assert replan.exit_code == 0, replan.output
    replanned = one_plan(json.loads(replan.stdout))
    assert not [s for s in replanned["steps"] if s["action"] != "noop"]
    # the driver came from the stand-in on 127.0.0.1 under provision's repository id: its origin is
    # the stand-in's host (the dnf-origins probe over ssh), which the spec names, not NVIDIA's
    probed = rocky.ssh(shlex.join(ORIGINS.argv))
    origins = ORIGINS.parse(probed.stdout + probed.stderr, probed.returncode)
    assert isinstance(origins, PackageOrigins), origins
    assert origins.origins["nvidia-driver"] == urlsplit(rhel_repos.url(9)).netloc, origins
    assert not [w for w in replanned.get("warnings", []) if "origin" in w["rule"] or "sources" in w["rule"]]
    with timings.timed("provision apply on Rocky (second)"):
        second = provision("apply", str(spec), "-i", inv, "--yes")
    assert second.exit_code == 0, second.output
    assert "Nothing to do: Ansible was not started." in second.output


def test_interrupted_apply_on_rocky_converges(
    rocky: Target, rhel_repos: RhelRepos, tmp_path: Path, runs: Path
) -> None:
    spec = rocky_spec(tmp_path / "spec.yaml", rhel_repos)
    inv = str(rocky.inventory)
    repo_file = rocky.root / "etc/yum.repos.d/provision-nvidia-cuda.repo"
    with _interrupt_when(repo_file.exists):
        interrupted = provision("apply", str(spec), "-i", inv, "--yes")
    assert interrupted.exit_code == 130, interrupted.output
    assert "Interrupted" in interrupted.output
    again = provision("apply", str(spec), "-i", inv, "--yes")
    assert again.exit_code == 0, again.output
    assert "Converged: a fresh plan shows no changes." in again.output
    assert duplicates(parse_rpm_qa(_rpm_qa(rocky))) == ()
    assert rpm_installed(rocky.root)["nvidia-open"] == "3:580.95.05-1.el9"


def test_rocky_10_has_no_module_stream_and_versionlock_bounds_the_branch(
    rocky: Target, rhel_repos: RhelRepos, tmp_path: Path, runs: Path
) -> None:
    # The same root as Rocky 10.0 to everything provision reads (os-release, rocky-release);
    # NVIDIA's rhel10 repository has no modules and carries 590.48.01 beside 580.95.05.
    (rocky.root / "etc/os-release").write_text(OS_RELEASE[10])
    (rocky.root / "etc/rocky-release").write_text("Rocky Linux release 10.0 (Red Quartz)\n")
    repository = {
        "url": rhel_repos.url(10),
        "key_file": str(rhel_repos.key.armored),
        "fingerprint": rhel_repos.key.fingerprint,
    }
    spec = rocky_spec(
        tmp_path / "spec.yaml", rhel_repos, os={"distro": "rocky", "version": "10"}, repository=repository
    )
    inv = str(rocky.inventory)
    planned = provision("plan", str(spec), "-i", inv, "--json")
    assert planned.exit_code == 0, planned.output
    plan = one_plan(json.loads(planned.stdout))
    roles = plan["extravars"]["roles"]
    assert roles["nvidia_packages"]["nvidia_packages_module_stream"] == ""
    assert roles["nvidia_repository"]["nvidia_repository_url"] == rhel_repos.url(10)
    assert "module stream" not in next(s for s in plan["steps"] if s["component"] == "driver")["reason"]
    # Whether the apply converges is test_provision_apply_on_rocky_converges_and_reapplies_nothing's
    # question (on 9); this one asks what real dnf installed and locked on 10.
    provision("apply", str(spec), "-i", inv, "--yes")
    installed = rpm_installed(rocky.root)
    assert installed["nvidia-open"] == installed["nvidia-driver"] == "3:580.95.05-1.el10"  # not 590.48.01
    locks = rocky.ssh("dnf", "-q", "versionlock", "list").stdout
    assert "nvidia-open-3:580.95.05-1.el10.*" in locks and "nvidia-*-580.95.05-*" in locks, locks
    assert not rocky.ssh("dnf", "-q", "module", "list", "--enabled").stdout.strip()


def test_flavour_switch_on_rocky_replaces_the_kmod(
    rocky: Target, rhel_repos: RhelRepos, tmp_path: Path, runs: Path
) -> None:
    inv = str(rocky.inventory)
    provision("apply", str(rocky_spec(tmp_path / "open.yaml", rhel_repos)), "-i", inv, "--yes")
    assert rpm_installed(rocky.root)["kmod-nvidia-open-dkms"] == "3:580.95.05-1.el9"
    driver = {
        "branch": 580,
        "flavor": "proprietary",
        "version": "580.95.05",
        "source": "nvidia-repo",
        "hold": True,
    }
    spec = rocky_spec(tmp_path / "proprietary.yaml", rhel_repos, driver=driver)
    switched = provision("apply", str(spec), "-i", inv, "--yes", "--replace-held")
    assert switched.exit_code == 0, switched.output
    installed = rpm_installed(rocky.root)
    assert installed["kmod-nvidia-latest-dkms"] == installed["cuda-drivers"] == "3:580.95.05-1.el9"
    assert "kmod-nvidia-open-dkms" not in installed and "nvidia-open" not in installed


def test_a_transaction_bringing_a_forbidden_package_is_refused_before_anything_changes(
    rocky: Target, rhel_repos: RhelRepos, tmp_path: Path, runs: Path
) -> None:
    # As Debian's FF-08 case (test_apply_locks): the plan's own extravars, with one dependency of
    # the driver (nvidia-kmod-common, which nvidia-open requires) made forbidden, so the refusal
    # comes from what dnf resolves, not from what the plan requests.
    spec = rocky_spec(tmp_path / "spec.yaml", rhel_repos)
    saved = tmp_path / "plan.json"
    planned = provision("plan", str(spec), "-i", str(rocky.inventory), "--out", str(saved))
    assert planned.exit_code == 0, planned.output
    plan = Plan.model_validate_json(saved.read_text())
    roles = plan.extravars["roles"]
    packages = {**roles["nvidia_packages"], "nvidia_packages_forbidden_regex": "nvidia-kmod-common"}
    tampered = {**plan.extravars, "roles": {**roles, "nvidia_packages": packages}}
    bad = plan.model_copy(update={"extravars": tampered})
    before = rpm_installed(rocky.root)
    run_dir = apply_runner.new_run_dir(runs, "ff08")
    result = apply_runner.run_playbook({"target": bad}, rocky.inventory, run_dir)
    assert not result.succeeded
    failures = result.hosts["target"].failures
    assert any("nvidia-kmod-common" in f and "FF-08" in f for f in failures), result.hosts
    after = rpm_installed(rocky.root)
    # The repository role's own packages came in before (EPEL's release package for DKMS, the
    # versionlock plugin); nothing of the refused transaction did, and nothing went.
    assert set(before) <= set(after), sorted(set(before) - set(after))
    assert set(after) - set(before) <= {"epel-release", "python3-dnf-plugin-versionlock"}, after
    assert not rocky.ssh("dnf", "-q", "module", "list", "--enabled").stdout.strip()  # the stream reset
