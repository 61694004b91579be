"""``apply --reboot`` and ``provision resume`` on the real Debian root: one apply, one reboot.

The target's reboot is performed by the harness (tests/integration/harness/reboot.py): Ansible's
own reboot module runs the target's reboot command, waits for the connection and a new boot id,
and provision then detects and plans the target again. The resume half runs ``provision resume``
on a record written by apply's own code for that target, after a hold was released by hand, so the
resume really applies something (within what the first plan changed) and then removes its record.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from provision.apply.reboot import RebootOptions, write_resume
from provision.hosts import Hosts, HostSpec
from provision.reboot import record, unit
from provision.spec.loader import load_spec
from tests.integration.harness import reboot
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.harness.target import BOOT_ID, Target
from tests.integration.helpers import provision, write_spec
from tests.unit.factories import by_host, systemd_analyze_verify


def test_apply_reboots_the_target_then_resume_finishes_what_is_left(
    target: Target, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, tmp_path: Path, runs: Path
) -> None:
    spec = write_spec(
        tmp_path / "spec.yaml", nvidia_repo.url, nvidia_repo, wheel_index, python=None, cuda=None
    )
    first_boot = reboot.install(target)
    inv = str(target.inventory)

    with reboot.performing_reboots(target) as reboots:
        applied = provision(
            "apply", str(spec), "-i", inv, "--yes", "--reboot", "--reboot-timeout", "120", "--json"
        )
    assert applied.exit_code == 0, applied.output
    doc = json.loads(applied.stdout)
    assert doc["outcome"] == "applied" and doc["converged"] is True
    assert doc["reboot"] == [
        {
            "host": "target",
            "state": "rebooted",
            "outcome": "rebooted; a fresh plan shows no changes",
            "ok": True,
        }
    ]
    assert doc["after_reboot"] is None  # nothing was left to apply after the boot
    assert len(reboots.boot_ids) == 1 and reboots.boot_ids[0] != first_boot
    assert (target.root / BOOT_ID).read_text().strip() == reboots.boot_ids[0]
    assert target.dpkg_status()["nvidia-open"] == ("580.95.05-1", "hold ok installed")
    reboot_events = Path(doc["run_dir"]) / "reboot" / "artifacts"
    assert any(reboot_events.rglob("job_events/*.json"))  # the reboot play's own run, kept with the apply's

    # The resume: a record for the target (as apply writes one for a host waiting on its console),
    # then a change within the confirmed plan's components (a hold released), applied by resume.
    first_plan = json.loads(next(Path(doc["run_dir"]).glob("plan-target.json")).read_text())
    consented = [
        s["component"] for s in first_plan["steps"] if s["action"] not in ("noop", "manual", "reboot")
    ]
    assert "holds" in consented
    hosts = Hosts(target.inventory, {"target": HostSpec(load_spec(spec), str(spec))})
    resume_dir = runs / "resume-test"
    resume_dir.mkdir()
    path = write_resume(hosts, ["target"], {"target": consented}, [], resume_dir, runs, RebootOptions(True))
    target.run(["apt-mark", "unhold", "nvidia-open"], check=True)

    resumed = provision("resume", str(path), "--json")
    assert resumed.exit_code == 0, resumed.output
    rdoc = json.loads(resumed.stdout)
    assert rdoc["outcome"] == "resumed", rdoc
    assert by_host(rdoc)["target"]["ok"] is True and rdoc["apply"]["converged"] is True
    assert target.dpkg_status()["nvidia-open"] == ("580.95.05-1", "hold ok installed")
    assert not path.exists()  # it ran once
    assert "Resuming the apply of" in (resume_dir / record.LOG_NAME).read_text()
    assert provision("plan", str(spec), "-i", inv, "--detailed-exitcode").exit_code == 0


def test_the_resume_unit_passes_systemd_analyze_in_the_target_root(target: Target, tmp_path: Path) -> None:
    """This machine's half: the unit as apply writes it, read by systemd's own verifier."""
    path = unit.install_unit(unit.unit_text(unit.resume_argv()), target.root)
    link = target.root / "etc/systemd/system/multi-user.target.wants" / unit.UNIT_NAME
    assert link.is_symlink() and str(link.readlink()) == f"/etc/systemd/system/{unit.UNIT_NAME}"
    verifier = shutil.which("systemd-analyze")
    if verifier is not None:
        done = systemd_analyze_verify(path)
        assert done.returncode == 0, done.stderr
    unit.remove_unit(target.root)
    assert not link.exists() and not path.exists()
    if verifier is None:
        pytest.skip("systemd-analyze is not installed: the unit was written and removed, not verified")
