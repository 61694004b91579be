"""The lock of what apply left, and rollback to it: a real Debian 12 root, real apt/dpkg, real Ansible.

NVIDIA's packages are the harness's stand-ins (tests/integration/harness/packages.py), which
serve two patch levels of the 580 driver (580.82.07, 580.95.05), of cuDNN and of NCCL, and
NVIDIA's nvidia-driver-pinning-580 preferences file.
"""

from __future__ import annotations

import json
import os
import stat
import tarfile
from pathlib import Path

from provision.plan.models import Plan
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.harness.target import Target
from tests.integration.helpers import provision, write_spec
from tests.unit.factories import by_host

PINS = "etc/apt/preferences.d/00-provision-nvidia"
LEGACY_PINS = "etc/apt/preferences.d/provision-nvidia"


def _spec(path: Path, repo: NvidiaRepo, wheels: WheelIndex, driver: str, cudnn: str, nccl: str) -> Path:
    return write_spec(
        path,
        repo.url,
        repo,
        wheels,
        driver={"branch": 580, "flavor": "open", "version": driver, "source": "nvidia-repo"},
        cuda={"toolkit": "13.0", "cudnn": cudnn, "nccl": nccl},
    )


def _lock(target: Target) -> dict:  # type: ignore[type-arg]
    return json.loads((target.root / "var/lib/provision/lock.json").read_text())


def _locked(target: Target, lock: dict) -> dict[str, tuple[str, str]]:  # type: ignore[type-arg]
    status = target.dpkg_status()
    return {p["name"]: status[p["name"]] for p in lock["packages"] if p["name"] in status}


def test_apply_records_a_lock_and_rollback_returns_to_it(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    inv = str(target.inventory)
    spec_a = _spec(tmp_path / "a.yaml", nvidia_repo, wheel_index, "580.82.07", "9.14", "2.28.3")
    spec_b = _spec(tmp_path / "b.yaml", nvidia_repo, wheel_index, "580.95.05", "9.20", "2.29.2")
    # Pins an older provision wrote under the name apt reads after NVIDIA's pinning file: apply removes them.
    legacy = target.root / LEGACY_PINS
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text("Package: libnccl*\nPin: version 2.29.2-*\nPin-Priority: 1001\n")

    first = provision("apply", str(spec_a), "-i", inv, "--yes")
    assert first.exit_code == 0, first.output
    assert "lock 1 recorded in /var/lib/provision/lock.json" in first.output
    assert not legacy.exists()
    directory = target.root / "var/lib/provision"
    for path, mode in ((directory, 0o755), (directory / "locks", 0o755), (directory / "lock.json", 0o644)):
        info = os.lstat(path)
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, mode), path
    lock_a = _lock(target)
    assert lock_a["number"] == 1 and lock_a["spec_digest"].startswith("sha256:")
    assert lock_a["repository"]["fingerprint"] == nvidia_repo.fingerprint
    packages = {p["name"]: (p["version"], p["hold"]) for p in lock_a["packages"]}
    assert packages["nvidia-open"] == ("580.82.07-1", True)
    assert packages["libnccl2"] == ("2.28.3-1+cuda13.0", True)
    assert packages["libcudnn9-cuda-13"] == ("9.14.0.64-1", True)
    wheels = {w["name"]: w for w in lock_a["venv"]["wheels"]}
    assert wheels["torch"]["version"] == "2.11.0+cu130"
    assert len(wheels["torch"]["record_sha256"]) == 64
    assert lock_a["pins"] == (target.root / PINS).read_text()
    status_a, pins_a = _locked(target, lock_a), (target.root / PINS).read_text()
    assert all(held == "hold ok installed" for _, held in status_a.values())

    verified = provision("verify", str(spec_a), "-i", inv, "--json")
    assert verified.exit_code == 1  # no GPU in the target: the checks fail, and the lock says so
    recorded = _lock(target)["verify"]
    assert recorded["passed"] is False and recorded["spec_digest"] == lock_a["spec_digest"]
    assert recorded["counts"]["fail"] == len(recorded["failed"]) > 0
    _check_verify_bundle(by_host(json.loads(verified.stdout))["target"]["support_bundle"], runs)

    # B moves the held driver within its branch, and cuDNN and NCCL up.
    second = provision("apply", str(spec_b), "-i", inv, "--yes", "--replace-held")
    assert second.exit_code == 0, second.output
    assert "lock 2 recorded" in second.output
    status_b = target.dpkg_status()
    assert status_b["nvidia-open"][0] == "580.95.05-1" and status_b["libnccl2"][0] == "2.29.2-1+cuda13.0"
    assert status_b["libcudnn9-headers-cuda-13"] == ("9.20.0.48-1", "hold ok installed")
    shown = provision("lock", "show", "-i", inv, "--json")
    assert shown.exit_code == 0, shown.output
    host = by_host(json.loads(shown.stdout))["target"]
    assert host["current"]["number"] == 2
    assert [h["number"] for h in host["history"]] == [1, 2]

    unconsented = provision("rollback", "-i", inv, "--dry-run")  # refused as the real run would be
    assert unconsented.exit_code == 1 and "pass --replace-held" in unconsented.output, unconsented.output
    dry = provision("rollback", "-i", inv, "--dry-run", "--replace-held")
    assert dry.exit_code == 0, dry.output
    assert "rolling back to lock 1" in dry.output and "downgrade" in dry.output
    assert target.dpkg_status()["libnccl2"][0] == "2.29.2-1+cuda13.0"

    # Back to A: the driver down within the branch (apt reads provision's pins before NVIDIA's
    # nvidia-driver-pinning-580), the held cuDNN and NCCL down.
    back = provision("rollback", "-i", inv, "--yes", "--replace-held")
    assert back.exit_code == 0, back.output
    assert "Converged: a fresh plan shows no changes." in back.output
    assert "lock 3 recorded" in back.output
    assert _locked(target, lock_a) == status_a  # A's exact versions, each held again
    assert (target.root / PINS).read_text() == pins_a
    assert [p for p in _lock(target)["packages"]] == lock_a["packages"]
    replan = provision("plan", str(spec_a), "-i", inv, "--detailed-exitcode")
    assert replan.exit_code == 0, replan.output


def _check_verify_bundle(bundle: str, runs: Path) -> None:
    """The failed verify's archive: private, in a verify run directory, with what the issue lists."""
    path = Path(bundle)
    assert path.parent.parent == runs and path.parent.name.endswith("-verify")
    assert path.name == "support-target.tar.gz" and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with tarfile.open(path) as tar:
        members = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}  # type: ignore[union-attr]
    wanted = {"verify.json", "facts.json", "plan.json", "verify-agent.json", "host/dmesg-nvidia.txt"}
    assert wanted <= set(members)  # read over ssh directly: the agent's steps stand for the play's events
    steps = json.loads(members["verify-agent.json"])
    assert steps["trust"]["stdout"] == "trusted\n" and steps["gpu"]["ran"] is False  # no nvidia-smi there
    assert "nvidia-open\t580.82.07-1\thold ok installed" in members["raw/dpkg-nvidia.txt"]
    assert members["host/dkms-status.txt"].startswith("$ dkms status (rc ")
    assert json.loads(members["host/lock.json"])["number"] == 1
    assert (
        Plan.model_validate_json(members["plan.json"]).changes == ()
    )  # A is applied: only the checks failed
    assert json.loads(members["verify.json"])["results"]


def test_rollback_to_a_lock_the_repository_no_longer_serves_is_refused(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    inv = str(target.inventory)
    spec = _spec(tmp_path / "a.yaml", nvidia_repo, wheel_index, "580.95.05", "9.14", "2.28.3")
    assert provision("apply", str(spec), "-i", inv, "--yes").exit_code == 0
    lock = target.root / "var/lib/provision/locks/0001.json"
    data = json.loads(lock.read_text())
    for package in data["packages"]:
        if package["name"] == "nvidia-open":
            package["version"] = "580.65.06-1"  # a patch level the stand-in repository never served
    lock.write_text(json.dumps(data))

    refused = provision("rollback", "-i", inv, "--to", "1", "--yes")
    assert refused.exit_code == 1, refused.output
    assert "rollback-versions-not-served" in refused.output
    assert "nvidia-open=580.65.06-1" in refused.output
    assert target.dpkg_status()["nvidia-open"][0] == "580.95.05-1"
    missing = provision("rollback", "-i", inv, "--to", "7")
    assert missing.exit_code == 1 and "no lock 7; the host has 1" in missing.output


def test_a_failed_apply_leaves_one_private_support_bundle(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    spec = write_spec(tmp_path / "spec.yaml", nvidia_repo.bad("unsigned"), nvidia_repo, wheel_index)
    result = provision("apply", str(spec), "-i", str(target.inventory), "--yes")
    assert result.exit_code == 1, result.output
    said = [line for line in result.output.splitlines() if line.startswith("Support bundle")]
    assert len(said) == 1 and said[0].startswith("Support bundle for target "), result.output
    path = Path(said[0].rpartition(": ")[2])
    assert path.parent.parent == runs and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with tarfile.open(path) as tar:
        names = set(tar.getnames())
        dkms = tar.extractfile("host/dkms-status.txt").read().decode()  # type: ignore[union-attr]
        dpkg = tar.extractfile("raw/dpkg-nvidia.txt").read().decode()  # type: ignore[union-attr]
    assert {"plan.json", "plan-after.json", "ansible/stdout", "facts.json", "host/dmesg-nvidia.txt"} <= names
    assert any(n.startswith("ansible/job_events/") for n in names)
    assert dpkg.startswith("$ dpkg-query -W") and dpkg.rstrip().endswith("[exit 0]")  # the raw probe output
    assert dkms.startswith("$ dkms status (rc ") and len(dkms.splitlines()) >= 2  # the target has no DKMS
    assert "host/lock.json" not in names  # no apply converged there
