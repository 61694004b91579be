"""The harness is real: Ansible over ssh, signed apt, pip, and apt's refusals, measured."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.integration.harness import runner, timings
from tests.integration.harness.aptrepo import BadKind
from tests.integration.harness.golden import GoldenRoot
from tests.integration.harness.packages import NO_DRIVER_MESSAGE, NVCC_13_0
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.harness.target import Target, start_target

PLAYBOOKS = Path(__file__).parent / "harness" / "playbooks"
KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
DRIVER_CLOSURE_580_95 = {
    "nvidia-open",
    "nvidia-driver-open",
    "libnvidia-compute",
    "nvidia-utils",
    "nvidia-kernel-open-dkms",
}


def _configure_repo(target: Target, repo: NvidiaRepo, url: str) -> None:
    """Trust the good key and point apt at ``url``, as NVIDIA's instructions do."""
    shutil.copy(repo.keyring, target.root / KEYRING.lstrip("/"))
    (target.root / "etc/apt/sources.list.d/cuda.list").write_text(f"deb [signed-by={KEYRING}] {url} /\n")


def test_ansible_reaches_target_over_ssh(target: Target) -> None:
    result = runner.run_module(target.inventory, "ansible.builtin.ping", "", target.workdir)

    assert result.status == "successful", result.stdout.read()
    assert result.stats["ok"] == {"target": 1}


def test_apply_installs_exact_driver_closure_from_signed_repo(
    target: Target, nvidia_repo: NvidiaRepo
) -> None:
    extravars = {
        "keyring_src": str(nvidia_repo.keyring),
        "repo_url": nvidia_repo.url,
        "driver_version": "580.95.05-1",
    }
    with timings.timed("apply: repo + pin + nvidia-open"):
        result = runner.run_playbook(
            target.inventory, PLAYBOOKS / "nvidia_open.yml", target.workdir, extravars=extravars
        )

    assert result.status == "successful", result.stdout.read()
    for task, seconds in runner.task_durations(result).items():
        timings.record(f"task: {task}", seconds)
    status = target.dpkg_status()
    assert {name: status[name][0] for name in DRIVER_CLOSURE_580_95} == dict.fromkeys(
        DRIVER_CLOSURE_580_95, "580.95.05-1"
    )
    assert status["nvidia-open"][1] == "hold ok installed"
    assert "nvidia-kernel-dkms" not in target.installed()
    smi = target.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    assert smi.stdout == "580.95.05\n"


def test_second_apply_changes_nothing(target: Target, nvidia_repo: NvidiaRepo) -> None:
    extravars = {
        "keyring_src": str(nvidia_repo.keyring),
        "repo_url": nvidia_repo.url,
        "driver_version": "580.95.05-1",
    }
    runner.run_playbook(target.inventory, PLAYBOOKS / "nvidia_open.yml", target.workdir, extravars=extravars)
    with timings.timed("apply: second run (no change)"):
        again = runner.run_playbook(
            target.inventory, PLAYBOOKS / "nvidia_open.yml", target.workdir, extravars=extravars
        )

    assert again.status == "successful"
    assert again.stats["changed"] == {}


def test_without_pinning_apt_cannot_install_an_older_release(target: Target, nvidia_repo: NvidiaRepo) -> None:
    """Real apt behaviour the planner must plan around: ``=version`` does not cascade to deps."""
    _configure_repo(target, nvidia_repo, nvidia_repo.url)
    assert target.run(["apt-get", "update"]).returncode == 0

    install = target.run(["apt-get", "install", "-y", "nvidia-open=580.95.05-1"])

    assert install.returncode == 100
    assert "nvidia-driver-open (= 580.95.05-1) but 590.48.01-1 is to be installed" in install.stdout
    assert not target.installed().keys() & DRIVER_CLOSURE_580_95


def test_branch_pin_keeps_580_while_590_is_newest(target: Target, nvidia_repo: NvidiaRepo) -> None:
    _configure_repo(target, nvidia_repo, nvidia_repo.url)
    target.run(["apt-get", "update"], check=True)
    target.run(["apt-get", "install", "-y", "nvidia-driver-pinning-580"], check=True)

    target.run(["apt-get", "install", "-y", "nvidia-open", "nvidia-fabricmanager"], check=True)

    installed = target.installed()
    assert installed["nvidia-open"] == installed["nvidia-fabricmanager"] == "580.95.05-1"
    upgrade = target.run(["apt-get", "-s", "dist-upgrade"])
    assert "590.48.01" not in upgrade.stdout


def test_stand_in_tools_behave_like_the_real_ones(target: Target, nvidia_repo: NvidiaRepo) -> None:
    _configure_repo(target, nvidia_repo, nvidia_repo.url)
    target.run(["apt-get", "update"], check=True)
    target.run(["apt-get", "install", "-y", "nvidia-driver-pinning-580"], check=True)
    target.run(["apt-get", "install", "-y", "nvidia-open", "cuda-toolkit-13-0"], check=True)

    smi = target.run(["nvidia-smi"])
    nvcc = target.run(["/usr/local/cuda/bin/nvcc", "--version"])

    assert (smi.returncode, smi.stdout.strip()) == (9, NO_DRIVER_MESSAGE)
    assert nvcc.stdout == NVCC_13_0
    assert "cuda-drivers" not in target.installed()


@pytest.mark.parametrize(
    ("kind", "apt_says"),
    [("unsigned", "is not signed"), ("tampered", "Hash Sum mismatch"), ("other-key", "NO_PUBKEY")],
)
def test_apt_refuses_bad_repository(
    target: Target, nvidia_repo: NvidiaRepo, kind: BadKind, apt_says: str
) -> None:
    _configure_repo(target, nvidia_repo, nvidia_repo.bad(kind))
    before = target.installed()

    update = target.run(["apt-get", "update"])
    install = target.run(["apt-get", "install", "-y", "nvidia-open"])

    assert update.returncode == 100
    assert apt_says in update.stdout + update.stderr
    assert install.returncode == 100
    assert target.installed() == before


def test_pip_installs_torch_from_wheel_index(target: Target, wheel_index: WheelIndex) -> None:
    extravars = {"index_url": wheel_index.url, "torch_version": "2.11.0+cu130"}
    with timings.timed("apply: venv + pip torch"):
        result = runner.run_playbook(
            target.inventory, PLAYBOOKS / "torch_venv.yml", target.workdir, extravars=extravars
        )

    assert result.status == "successful", result.stdout.read()
    code = "import torch; print(torch.version.__version__, torch.version.cuda, torch.cuda.is_available())"
    probe = target.run(["/opt/provision/venv/bin/python", "-c", code])
    assert probe.stdout == "2.11.0+cu130 13.0 False\n"


def test_target_cleanup_leaves_no_mounts(golden_root: GoldenRoot, tmp_path: Path) -> None:
    box = start_target(golden_root.path, golden_root.ssh_key, tmp_path / "t")
    assert box.ssh("true").returncode == 0
    box.close()

    assert str(tmp_path) not in Path("/proc/mounts").read_text()
