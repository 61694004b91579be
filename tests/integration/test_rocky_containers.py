"""containers: on the Rocky-like target (real dnf 4.14 and rpm 4.18, harness/rockylike.py), apply
installs the toolkit from its own RPM repository whose metadata is signed (``repo_gpgcheck=1``, as
NVIDIA's ``nvidia-container-toolkit.repo``), writes the CDI spec, locks the four packages with the
stack (provision's versionlock block and ``dnf versionlock add``), converges, and a second apply
changes nothing; real podman then consumes the generated CDI spec.

Stand-ins and what could not run here (say so, do not hide it):
- the toolkit's RPMs and ``nvidia-ctk`` are stand-ins (harness/rhel_toolkit.py): NVIDIA's repository
  cannot be reached; names, versions, releases and relations follow the real ones, the metadata is
  signed by a throwaway key, not NVIDIA's;
- the target's userland is Debian 12's with real dnf and rpm; its podman is Debian 12's 4.3.1 with
  runc, cgroupfs, vfs (as on the Debian containers test) and lower nofile/nproc limits (:data:`ULIMITS`),
  not Rocky's own build; the GPUs are
  character devices under /var/lib/nvidia-standin/dev and the driver is the CUDA stand-in's
  (``libcuda.so`` only), never loaded;
- no systemd runs in the root: the refresh units are not armed (the role says so).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.harness import golden, rockylike, timings
from tests.integration.harness.dnfroot import OS_RELEASE
from tests.integration.harness.packages import STANDIN_DEV
from tests.integration.harness.rhel_toolkit import ToolkitRpmRepo, publish_toolkit_rpm_repo
from tests.integration.harness.rockylike import RhelRepos, rpm_installed
from tests.integration.harness.server import StaticServer
from tests.integration.harness.target import Target, start_target
from tests.integration.helpers import provision
from tests.integration.test_containers import CDI_SPEC, ROOTFS, TOOLKIT, _prepare
from tests.integration.test_dnf_real import MISSING
from tests.integration.test_rocky_apply import rhel_repos, rocky_spec
from tests.unit.factories import one_plan

__all__ = ["rhel_repos"]  # the session fixture, shared with test_rocky_apply
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"Rocky-like target needs {', '.join(MISSING)}")
REPO_FILE = "etc/yum.repos.d/provision-nvidia-container-toolkit.repo"
ULIMITS = '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
"""podman 4.3.1 sets the container's nofile and nproc limits above this build machine's hard limits
(runc: "error setting rlimit type 7: operation not permitted"); lower ones, set as an administrator
would in containers.conf. podman 5.4.2 on the Debian 13 root needs none."""


@pytest.fixture(scope="session")
def rocky_containers_root() -> golden.GoldenRoot:
    """The Rocky-like root with podman, runc and busybox-static (its own cached variant)."""
    root = rockylike.ensure_rockylike_root(containers=True)
    label = (
        "rocky-like root with podman build" if root.build_seconds else "rocky-like root with podman (cached)"
    )
    timings.record(label, root.build_seconds)
    return root


@pytest.fixture(scope="session")
def ctk_repo(http_server: StaticServer, tmp_path_factory: pytest.TempPathFactory) -> ToolkitRpmRepo:
    with timings.timed("toolkit RPM stand-in repo (rpms + index + signed metadata)"):
        return publish_toolkit_rpm_repo(http_server, golden.cache_dir(), tmp_path_factory.mktemp("ctk-rpm"))


@pytest.fixture()
def rocky_podman(rocky_containers_root: golden.GoldenRoot, tmp_path: Path) -> Iterator[Target]:
    """A Rocky-like 9.5 target with two stand-in GPUs, a busybox rootfs and podman's settings."""
    with timings.timed("rocky-like target with podman up"):
        box = start_target(rocky_containers_root.path, rocky_containers_root.ssh_key, tmp_path / "target")
    try:
        _prepare(box)
        conf = box.root / "etc/containers/containers.conf"
        conf.write_text(conf.read_text() + ULIMITS)
        yield box
    finally:
        box.close()


def _spec(path: Path, repos: RhelRepos, ctk: ToolkitRpmRepo, **containers: Any) -> Path:
    """The Rocky 9 spec of test_rocky_apply without CUDA (the driver is what the CDI spec names),
    with containers: podman, the stand-in's repository as the mirror."""
    rocky_spec(path, repos)
    spec = yaml.safe_load(path.read_text())
    spec.pop("cuda")
    spec["name"] = "rocky9-containers-target"
    spec["containers"] = {
        "runtime": "podman",
        "toolkit": "1.18.2",
        "verify_image": ROOTFS,
        # The stand-in serves its key over loopback http, which key_url refuses: read it as a file.
        "repository": {"url": ctk.url, "key_file": str(ctk.key.armored), "fingerprint": ctk.fingerprint},
        **containers,
    }
    path.write_text(yaml.safe_dump(spec))
    return path


def test_apply_on_rocky_installs_the_toolkit_from_its_rpm_repository_locked_and_converges(
    rocky_podman: Target, rhel_repos: RhelRepos, ctk_repo: ToolkitRpmRepo, tmp_path: Path, runs: Path
) -> None:
    box, spec = rocky_podman, _spec(tmp_path / "spec.yaml", rhel_repos, ctk_repo)
    inv = str(box.inventory)
    with timings.timed("provision apply on Rocky with containers (first)"):
        first = provision("apply", str(spec), "-i", inv, "--yes")
    assert first.exit_code == 0, first.output
    assert "Converged: a fresh plan shows no changes." in first.output
    installed = rpm_installed(box.root)
    assert {n: installed.get(n) for n in TOOLKIT} == dict.fromkeys(TOOLKIT, "0:1.18.2-1")
    repo_file = (box.root / REPO_FILE).read_text()
    assert f"baseurl={ctk_repo.url}\n" in repo_file and "repo_gpgcheck=1\ngpgcheck=0\n" in repo_file
    # Locked with the stack: provision's block bounds the release, the holds role locks each package.
    locks = box.ssh("dnf", "-q", "versionlock", "list").stdout
    assert "nvidia-container-toolkit*-1.18.2-*" in locks and "libnvidia-container*-1.18.2-*" in locks, locks
    for name in TOOLKIT:
        assert f"{name}-0:1.18.2-1.*" in locks, (name, locks)
    other = box.ssh("dnf", "-y", "-q", "install", "nvidia-container-toolkit-1.17.8-1")
    assert other.returncode != 0, other.stdout  # the other release is in the repository, locked out
    assert rpm_installed(box.root)["nvidia-container-toolkit"] == "0:1.18.2-1"
    cdi = (box.root / CDI_SPEC).read_text()
    assert "/usr/lib64/libcuda.so.580.95.05" in cdi and f"{STANDIN_DEV}/nvidia1" in cdi
    rule = (box.root / "lib/udev/rules.d/71-nvidia-dev-char.rules").read_text()
    assert "create-dev-char-symlinks --create-all" in rule

    # Real podman reads the generated spec: the container's /dev holds exactly the injected nodes.
    argv = ["podman", "run", "--rm", "--network=none", "--device", "nvidia.com/gpu=all", "--rootfs", ROOTFS]
    seen = box.run([*argv, "/bin/sh", "-c", "ls /dev | grep nvidia"])
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.split() == ["nvidia0", "nvidia1"]

    replan = provision("plan", str(spec), "-i", inv, "--detailed-exitcode", "--json")
    assert replan.exit_code == 0, replan.output
    assert not [s for s in one_plan(json.loads(replan.stdout))["steps"] if s["action"] != "noop"]
    with timings.timed("provision apply on Rocky with containers (second)"):
        second = provision("apply", str(spec), "-i", inv, "--yes")
    assert second.exit_code == 0 and "Nothing to do: Ansible was not started." in second.output, second.output


def test_a_release_the_rpm_repository_lacks_is_one_line_and_leaves_no_repository_file(
    rocky_podman: Target, rhel_repos: RhelRepos, ctk_repo: ToolkitRpmRepo, tmp_path: Path, runs: Path
) -> None:
    inv = str(rocky_podman.inventory)
    # 1.19.1 writes CDI spec v0.7.0, which the target's real podman 4.3.1 cannot read: refused
    # before anything changes, with the version detection read on the target.
    refused = provision(
        "apply",
        str(_spec(tmp_path / "v070.yaml", rhel_repos, ctk_repo, toolkit="1.19.1")),
        "-i",
        inv,
        "--yes",
    )
    assert refused.exit_code != 0 and "[containers-cdi-version] podman 4.3.1" in refused.output, (
        refused.output
    )
    assert "Refused: 1 blocker(s); nothing will be changed." in refused.output
    # 1.19.0 is a real release the catalog knows; the stand-in repository does not carry it.
    spec = _spec(tmp_path / "spec.yaml", rhel_repos, ctk_repo, toolkit="1.19.0")
    result = provision("apply", str(spec), "-i", inv, "--yes")
    assert result.exit_code != 0, result.output
    said = [
        line.strip()
        for line in result.output.splitlines()
        if "Stop with the package manager's reason:" in line
    ]
    assert said and "nvidia-container-toolkit-1.19.0-*" in said[-1], result.output
    installed = rpm_installed(rocky_podman.root)
    assert not set(installed) & set(TOOLKIT)
    assert not (rocky_podman.root / REPO_FILE).exists()
    assert not (rocky_podman.root / CDI_SPEC).exists()
    # the driver the same run installed is the spec's and stays
    assert installed["nvidia-open"] == "3:580.95.05-1.el9"


def test_metadata_signed_by_another_key_is_refused_and_leaves_no_repository_file(
    rocky_podman: Target, rhel_repos: RhelRepos, ctk_repo: ToolkitRpmRepo, tmp_path: Path, runs: Path
) -> None:
    # The spec pins the CUDA stand-in's key for the toolkit repository: its metadata's signature
    # (made with the toolkit stand-in's key) cannot verify, and dnf refuses before installing.
    spec = _spec(tmp_path / "spec.yaml", rhel_repos, ctk_repo)
    text = yaml.safe_load(spec.read_text())
    text["containers"]["repository"] |= {
        "key_file": str(rhel_repos.key.armored),
        "fingerprint": rhel_repos.key.fingerprint,
    }
    spec.write_text(yaml.safe_dump(text))
    result = provision("apply", str(spec), "-i", str(rocky_podman.inventory), "--yes")
    assert result.exit_code != 0, result.output
    said = [
        line.strip()
        for line in result.output.splitlines()
        if "Stop with the package manager's reason:" in line
    ]
    assert (
        said and "metadata of provision-nvidia-container-toolkit does not verify with its gpgkey" in said[-1]
    ), said
    assert "Bad GPG signature" in said[-1]
    assert not set(rpm_installed(rocky_podman.root)) & set(TOOLKIT)
    assert not (rocky_podman.root / REPO_FILE).exists()
    listing = rocky_podman.ssh(shlex.join(["ls", "/etc/pki/rpm-gpg"])).stdout
    assert "RPM-GPG-KEY-provision-nvidia-container-toolkit" not in listing


def test_rocky_10_installs_the_toolkit_from_the_same_repository_and_versionlocks_it(
    rocky_podman: Target, rhel_repos: RhelRepos, ctk_repo: ToolkitRpmRepo, tmp_path: Path, runs: Path
) -> None:
    # The same root as Rocky 10.0 to everything provision reads (as test_rocky_apply's 10 case):
    # NVIDIA's rhel10 CUDA repository, no modules; the toolkit's RPM repository is the same one.
    box = rocky_podman
    (box.root / "etc/os-release").write_text(OS_RELEASE[10])
    (box.root / "etc/rocky-release").write_text("Rocky Linux release 10.0 (Red Quartz)\n")
    spec = _spec(tmp_path / "spec.yaml", rhel_repos, ctk_repo)
    text = yaml.safe_load(spec.read_text())
    text["os"] = {"distro": "rocky", "version": "10"}
    text["repository"]["url"] = rhel_repos.url(10)
    spec.write_text(yaml.safe_dump(text))
    inv = str(box.inventory)
    with timings.timed("provision apply on Rocky 10 with containers"):
        first = provision("apply", str(spec), "-i", inv, "--yes")
    assert first.exit_code == 0, first.output
    assert "Converged: a fresh plan shows no changes." in first.output
    installed = rpm_installed(box.root)
    assert {n: installed.get(n) for n in TOOLKIT} == dict.fromkeys(TOOLKIT, "0:1.18.2-1")
    assert installed["nvidia-driver"] == "3:580.95.05-1.el10"
    locks = box.ssh("dnf", "-q", "versionlock", "list").stdout
    assert "nvidia-container-toolkit*-1.18.2-*" in locks, locks
    assert all(f"{name}-0:1.18.2-1.*" in locks for name in TOOLKIT), locks
    assert not box.ssh("dnf", "-q", "module", "list", "--enabled").stdout.strip()
    assert "/usr/lib64/libcuda.so.580.95.05" in (box.root / CDI_SPEC).read_text()
    second = provision("apply", str(spec), "-i", inv, "--yes")
    assert second.exit_code == 0 and "Nothing to do: Ansible was not started." in second.output, second.output
