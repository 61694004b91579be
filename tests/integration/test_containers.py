"""containers: on a real Debian 13 (trixie) root with the distribution's real podman 5.4.2, apply
installs the stand-in toolkit from its own signed repository, writes the CDI spec and the
/dev/char rule, holds the four packages with the stack, converges; real podman then consumes the
generated CDI spec: a container started from a local root filesystem (``--rootfs``) gets the
stand-in GPU device nodes the spec injects, and provision's own verify check says so.

Stand-ins and what could not run here (say so, do not hide it):
- the toolkit's packages and ``nvidia-ctk`` are stand-ins (tests/integration/harness/toolkit.py):
  NVIDIA's repository cannot be reached; names, versions and exact-version relations are real;
- the GPUs are character devices the test makes under /var/lib/nvidia-standin/dev (a chroot
  shares the host's /dev); the driver is the harness's stand-in of NVIDIA's CUDA repository
  (libcuda.so.<v>, nvidia-smi), installed by the same apply, never loaded (no kernel here);
- podman runs with runc and cgroupfs (crun refuses this machine's hybrid cgroup hierarchy) and
  the vfs storage driver (overlay on the overlay root is refused), set in the target's
  containers.conf/storage.conf as a host's administrator would;
- no systemd runs in the root: ``systemctl daemon-reload`` cannot be exercised, so the
  after-reload check is a skip with that reason, and the refresh units are not armed (the role
  says so). The real H200 run is where the reload is proven.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.harness import golden, timings
from tests.integration.harness import target as target_mod
from tests.integration.harness.packages import STANDIN_DEV
from tests.integration.harness.server import StaticServer
from tests.integration.harness.services import NvidiaRepo
from tests.integration.harness.target import Target
from tests.integration.harness.toolkit import ToolkitRepo, publish_toolkit_repo
from tests.integration.helpers import provision

TOOLKIT = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)
ROOTFS = "/srv/rootfs"
CONTAINERS_CONF = '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
STORAGE_CONF = (
    '[storage]\ndriver = "vfs"\nrunroot = "/run/containers/storage"\n'
    'graphroot = "/var/lib/containers/storage"\n'
)
CDI_SPEC = "run/cdi/nvidia.yaml"
"""/var/run/cdi/nvidia.yaml in the target: /var/run is an absolute link to /run, so read it there."""


@pytest.fixture(scope="session")
def golden_trixie() -> golden.GoldenRoot:
    """The cached debootstrapped trixie root with podman (built on first use, ~2 min)."""
    root = golden.ensure_golden_root(suite=golden.TRIXIE)
    timings.record(
        "golden trixie root build" if root.build_seconds else "golden trixie root (cached)",
        root.build_seconds,
    )
    return root


@pytest.fixture(scope="session")
def toolkit_repo(http_server: StaticServer, tmp_path_factory: pytest.TempPathFactory) -> ToolkitRepo:
    with timings.timed("toolkit stand-in repo (debs + index + sign)"):
        return publish_toolkit_repo(http_server, golden.cache_dir(), tmp_path_factory.mktemp("toolkit"))


@pytest.fixture()
def trixie(golden_trixie: golden.GoldenRoot, tmp_path: Path) -> Iterator[Target]:
    """A Debian 13 target with the stand-in driver user space, two stand-in GPUs and a rootfs."""
    box = target_mod.start_target(golden_trixie.path, golden_trixie.ssh_key, tmp_path / "target")
    try:
        _prepare(box)
        yield box
    finally:
        box.close()


def _prepare(box: Target) -> None:
    box.bind_cgroups()
    nodes = box.root / STANDIN_DEV.lstrip("/")
    nodes.mkdir(parents=True)
    for n in (0, 1):  # NVIDIA's major 195 (devices.txt); nothing opens them, podman injects them
        os.mknod(nodes / f"nvidia{n}", 0o666 | stat.S_IFCHR, os.makedev(195, n))
    rootfs = box.root / ROOTFS.lstrip("/")
    for sub in ("bin", "proc", "sys", "dev", "etc", "tmp"):
        (rootfs / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy2(box.root / "usr/bin/busybox", rootfs / "bin/busybox")
    for applet in ("sh", "sleep", "ls", "cat", "mv"):
        (rootfs / "bin" / applet).symlink_to("busybox")
    conf = box.root / "etc/containers"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "containers.conf").write_text(CONTAINERS_CONF)
    (conf / "storage.conf").write_text(STORAGE_CONF)


def _spec(path: Path, repo: ToolkitRepo, cuda: NvidiaRepo, **containers: Any) -> Path:
    spec = {
        "schema_version": 1,
        "name": "debian13-containers",
        "os": {"distro": "debian", "version": "13"},
        "gpus": {"model": "a100x", "count": 2},
        "driver": {"branch": 580, "flavor": "open", "version": "580.95.05", "source": "nvidia-repo"},
        "repository": {"url": cuda.url, "key_file": str(cuda.keyring), "fingerprint": cuda.fingerprint},
        "containers": {
            "runtime": "podman",
            "toolkit": "1.18.2",
            "verify_image": ROOTFS,
            # The stand-in serves its key over loopback http, which key_url refuses: read it as a file.
            "repository": {"url": repo.url, "key_file": str(repo.keyring), "fingerprint": repo.fingerprint},
            **containers,
        },
    }
    path.write_text(yaml.safe_dump(spec))
    return path


def _checks(result: Any) -> dict[str, dict[str, Any]]:
    report = json.loads(result.stdout)
    hosts = report.get("hosts")
    found = (
        hosts[0]
        if isinstance(hosts, list)
        else next(iter(hosts.values()))
        if isinstance(hosts, dict)
        else report
    )
    rows = found.get("results") or found.get("report", {}).get("results")
    assert rows, report
    return {r["id"]: r for r in rows}


def test_apply_installs_the_toolkit_writes_the_cdi_spec_that_real_podman_consumes_and_converges(
    trixie: Target, toolkit_repo: ToolkitRepo, nvidia_repo: NvidiaRepo, tmp_path: Path, runs: Path
) -> None:
    spec = _spec(tmp_path / "spec.yaml", toolkit_repo, nvidia_repo)
    inv = str(trixie.inventory)

    first = provision("apply", str(spec), "-i", inv, "--yes")
    assert first.exit_code == 0, first.output
    assert "Converged: a fresh plan shows no changes." in first.output
    status = trixie.dpkg_status()
    for name in TOOLKIT:
        assert status[name] == ("1.18.2-1", "hold ok installed"), name  # one release, held with the stack
    cdi = (trixie.root / CDI_SPEC).read_text()
    assert "libcuda.so.580.95.05" in cdi and f"{STANDIN_DEV}/nvidia1" in cdi
    rule = (trixie.root / "lib/udev/rules.d/71-nvidia-dev-char.rules").read_text()
    assert "create-dev-char-symlinks --create-all" in rule
    pins = (trixie.root / "etc/apt/preferences.d/00-provision-nvidia").read_text()
    assert "Package: nvidia-container-toolkit* libnvidia-container*\nPin: version 1.18.2-*" in pins
    source = (trixie.root / "etc/apt/sources.list.d/provision-nvidia-container-toolkit.sources").read_text()
    assert (
        f"Signed-By: /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg {toolkit_repo.fingerprint}"
        in source
    )

    # Real podman reads the generated spec: the container's /dev holds exactly the injected nodes.
    seen = trixie.run(
        ["podman", "run", "--rm", "--network=none", "--device", "nvidia.com/gpu=all", "--rootfs", ROOTFS,
         "/bin/sh", "-c", "ls /dev | grep nvidia"]
    )  # fmt: skip
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.split() == ["nvidia0", "nvidia1"]

    # provision's own verify: the host probe runs podman on the target, through Ansible.
    result = provision("verify", str(spec), "-i", inv, "--json")
    checks = _checks(result)
    assert checks["container-gpus"]["status"] == "pass", checks["container-gpus"]
    assert checks["container-gpus"]["detail"] == "GPU-standin-0, GPU-standin-1"
    after = checks["container-gpus-after-daemon-reload"]
    assert after["status"] == "skip" and "systemctl daemon-reload" in after["detail"], after
    cdi_check = checks["cdi-spec-driver"]
    assert cdi_check["status"] == "skip" and "no driver loaded" in cdi_check["detail"], cdi_check

    replan = provision("plan", str(spec), "-i", inv, "--detailed-exitcode", "--json")
    assert replan.exit_code == 0, replan.output
    second = provision("apply", str(spec), "-i", inv, "--yes")
    assert second.exit_code == 0 and "Nothing to do: Ansible was not started." in second.output, second.output

    # A driver upgrade leaves the spec naming the old libraries: the plan regenerates it.
    spec_text = cdi.replace("580.95.05", "580.82.07")
    (trixie.root / CDI_SPEC).write_text(spec_text)
    drift = json.loads(provision("plan", str(spec), "-i", inv, "--json").stdout)
    hosts = drift.get("hosts")
    planned = hosts[0] if isinstance(hosts, list) else drift
    planned = planned.get("plan", planned)
    steps = [s for s in planned["steps"] if s["component"] == "containers"]
    cdi_step = next(s for s in steps if s["target"] == "/var/run/cdi/nvidia.yaml")
    assert cdi_step["action"] == "configure", steps
    assert (
        cdi_step["current"] == "names driver 580.82.07's libraries, the driver is 580.95.05 (a driver change)"
    )
    again = provision("apply", str(spec), "-i", inv, "--yes")
    assert again.exit_code == 0 and "Converged" in again.output, again.output
    assert "libcuda.so.580.95.05" in (trixie.root / CDI_SPEC).read_text()


def test_a_toolkit_release_the_repository_lacks_is_one_line_and_leaves_no_source(
    trixie: Target, toolkit_repo: ToolkitRepo, nvidia_repo: NvidiaRepo, tmp_path: Path, runs: Path
) -> None:
    # 1.19.1 is a real release the catalog knows; the stand-in repository does not carry it.
    spec = _spec(tmp_path / "spec.yaml", toolkit_repo, nvidia_repo, toolkit="1.19.1")
    before = trixie.installed()
    result = provision("apply", str(spec), "-i", str(trixie.inventory), "--yes")
    assert result.exit_code != 0, result.output
    said = [
        line.strip()
        for line in result.output.splitlines()
        if "Stop with the package manager's reason:" in line
    ]
    assert said, result.output
    assert said[-1].endswith("no available installation candidate for nvidia-container-toolkit=1.19.1-*"), (
        said
    )
    # The toolkit left nothing behind; the driver the same run installed is the spec's and stays.
    assert not (set(trixie.installed()) - set(before)) & set(TOOLKIT)
    assert not (trixie.root / "etc/apt/sources.list.d/provision-nvidia-container-toolkit.sources").exists()
    assert not (trixie.root / CDI_SPEC).exists()
