"""gpu: on a real Debian 13 (trixie) root: apply's own runner (argument specs, host variables file,
real ansible-playbook over ssh) runs the ``gpu_settings`` role planned from the real H200 capture;
the role runs exactly the planned nvidia-smi argv lists in the GPU's order and writes the boot
unit, which the root's real ``systemd-analyze verify`` accepts, and which detection's own probe
reads back as the planned text; with the gpu: section dropped, the next run removes the unit.
After apply, ``provision import`` of the machine (the unit read back from the root, the GPU's side
edited into the capture as apply leaves it) writes the applied section and plans no change.

Stand-ins and what could not run here (say so, do not hide it):
- the GPU: no GPU is here, so ``/usr/local/bin/nvidia-smi`` in the root is a stand-in that only
  records its argv (one line per call) and exits 0; the plan is made from the real H200 capture
  (tests/fixtures/raw/h200-ubuntu2404-2026-12-01) edited to bare metal with nothing holding the
  GPU (the persistence daemon installed but stopped: the role starts it after the reset), so that
  the MIG mode, the GPU reset and the instances are all applied in this run;
- no systemd runs in the root: the persistence daemon and the boot unit are not enabled (the
  role says so); the unit's syntax is checked by ``systemd-analyze verify`` offline instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.apply.runner import run_playbook
from provision.catalog import load_catalog
from provision.detect.domains.gpu_runtime import BOOT_UNIT_PATH, BootUnitFact
from provision.plan.planner import make_plan
from tests.integration.harness import golden
from tests.integration.harness import target as target_mod
from tests.integration.harness.target import Target
from tests.unit.captures import edited_facts, edited_spec

STUB = "/usr/local/bin/nvidia-smi"
LOG = "/var/log/nvidia-smi-argv"
STUB_TEXT = f"""#!/bin/sh
# Stand-in for nvidia-smi (no GPU in this test root): record the argv, one line per call.
printf '%s\\n' "$*" >> {LOG}
exit 0
"""
UUID = "GPU-00000000-1111-2222-3333-444444444444"
SVC = (
    "systemctl show -p Id,LoadState,ActiveState,UnitFileState,Result nvidia-persistenced.service "
    "nvidia-fabricmanager.service nvidia-dcgm.service dcgm.service provision-gpu-settings.service"
)
IDLE = (
    "Id=nvidia-persistenced.service\nLoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n\n"
    + "\n".join(
        f"Id={u}\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\nResult=success\n"
        for u in (
            "nvidia-fabricmanager.service",
            "nvidia-dcgm.service",
            "dcgm.service",
            "provision-gpu-settings.service",
        )
    )
)
CASE = {
    "edits": {
        "nvidia-smi-q": [
            ["Virtualization Mode                            : Pass-Through",
             "Virtualization Mode                            : None"],
        ]
    },
    "add": {
        "gpu-services": {"command": SVC, "output": IDLE, "rc": 0},
        "nvidia-modules": {"command": "sh", "output": "nvidia\nnvidia_uvm\n", "rc": 0},
        "mig-lgi": {"command": "nvidia-smi mig -lgi", "output": "No MIG-enabled devices found.\n", "rc": 6},
    },
    "spec": {
        "gpu": {
            "persistence": True,
            "settings": {"gpus": "all", "power_limit_w": 450, "locked_gpu_clocks": {"min_mhz": 1200,
                                                                                  "max_mhz": 1980},
                         "ecc": False},
            "mig": {"gpus": [0], "layout": {"3g.71gb": 1, "1g.18gb": 2}},
        }
    },
}  # fmt: skip


@pytest.fixture(scope="session")
def golden_trixie() -> golden.GoldenRoot:
    """The cached debootstrapped trixie root (it has systemd-analyze)."""
    return golden.ensure_golden_root(suite=golden.TRIXIE)


@pytest.fixture()
def trixie(golden_trixie: golden.GoldenRoot, tmp_path: Path) -> Iterator[Target]:
    box = target_mod.start_target(golden_trixie.path, golden_trixie.ssh_key, tmp_path / "target")
    try:
        stub = box.root / STUB.lstrip("/")
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text(STUB_TEXT)
        stub.chmod(0o755)
        yield box
    finally:
        box.close()


def test_the_role_runs_the_planned_argv_lists_in_order_and_writes_a_unit_systemd_accepts(
    trixie: Target, tmp_path: Path, runs: Path
) -> None:
    plan = make_plan(edited_spec(CASE), edited_facts(CASE), load_catalog())
    assert not plan.blockers, plan.blockers
    planned = plan.extravars["roles"]["gpu_settings"]

    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    result = run_playbook({"target": plan}, trixie.inventory, run_dir)
    assert result.succeeded, (result.status, result.hosts)

    calls = (trixie.root / LOG.lstrip("/")).read_text().splitlines()
    assert calls == [
        f"-i {UUID} -e 0",  # ECC first: its pending mode waits for a reboot
        "mig -i 0 -dci",  # instances go before the mode changes (here: none to destroy yet)
        "mig -i 0 -dgi",
        "-i 0 -mig 1",  # the MIG mode, then the reset that makes it current (nothing holds the GPU)
        "-i 0 -r",
        "mig -i 0 -cgi 3g.71gb,1g.18gb,1g.18gb -C",  # largest first
        f"-i {UUID} -pl 450",  # after the reset, which clears the settings
        f"-i {UUID} -lgc 1200,1980",
    ]
    assert [" ".join(a[1:]) for a in planned["gpu_settings_ecc_commands"]] == calls[:1]

    unit = trixie.root / BOOT_UNIT_PATH.lstrip("/")
    assert unit.read_text() == planned["gpu_settings_unit_text"]
    assert oct(unit.stat().st_mode & 0o777) == "0o644"
    checked = trixie.run(["systemd-analyze", "verify", "--man=no", BOOT_UNIT_PATH])
    # Units it names that this root lacks (nvidia-persistenced and friends) are warnings only.
    assert "provision-gpu-settings.service:" not in checked.stderr, checked.stderr
    assert checked.returncode == 0 or "nvidia-persistenced.service" in checked.stderr, checked

    # Detection's own probe, run in the root, reads the unit back as the text the plan compares.
    probe = trixie.run(list(BootUnitFact.argv))
    read = BootUnitFact.parse(probe.stdout, probe.returncode)
    assert not hasattr(read, "unknown") and read.present and read.text == planned["gpu_settings_unit_text"]

    # The spec drops its gpu: section: planned from the unit detection just read in the root, the
    # next run disables and removes it, so that no boot sets the old values again.
    gone = {
        "add": {
            "gpu-settings-unit": {"command": " ".join(BootUnitFact.argv), "output": probe.stdout, "rc": 0}
        }
    }
    later = make_plan(edited_spec(gone), edited_facts(gone), load_catalog())
    assert {s.component.value: s.action.value for s in later.changes} == {"gpu_settings": "remove"}
    again = tmp_path / "run-2"
    again.mkdir(mode=0o700)
    assert run_playbook({"target": later}, trixie.inventory, again).succeeded
    assert not unit.exists()


def test_after_apply_the_import_reads_the_applied_gpu_section_back_and_its_plan_is_empty(
    trixie: Target, tmp_path: Path, runs: Path
) -> None:
    """The role writes the unit in the root; detection's probe reads it back there; the import of
    the machine as apply left it (the GPU's side edited into the capture: the stand-in has no GPU)
    writes the applied settings, the locked clocks read from that unit, and plans no change."""
    from provision.importing.workflow import import_one

    plan = make_plan(edited_spec(CASE), edited_facts(CASE), load_catalog())
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    assert run_playbook({"target": plan}, trixie.inventory, run_dir).succeeded
    probe = trixie.run(list(BootUnitFact.argv))
    enabled = IDLE.replace(
        "ActiveState=inactive\nUnitFileState=disabled", "ActiveState=active\nUnitFileState=enabled"
    ).replace(
        "Id=provision-gpu-settings.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=",
        "Id=provision-gpu-settings.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled",
    )
    rows = [("3g.71gb", 9, "4:4"), ("1g.18gb", 19, "0:1"), ("1g.18gb", 19, "1:1")]
    lgi = "+----+\n| GPU instances: |\n" + "".join(
        f"|   0  MIG {p:<16}{pid:>4}{7 + i:>9}{at:>12}     |\n+----+\n" for i, (p, pid, at) in enumerate(rows)
    )
    after = {
        "edits": {
            "nvidia-smi-q": [
                ["Virtualization Mode                            : Pass-Through",
                 "Virtualization Mode                            : None"],
                ["Current Power Limit                            : 700.00 W",
                 "Current Power Limit                            : 450.00 W"],
                ["Requested Power Limit                          : 700.00 W",
                 "Requested Power Limit                          : 450.00 W"],
                ["    ECC Mode\n        Current                                        : Enabled\n"
                 "        Pending                                        : Enabled",
                 "    ECC Mode\n        Current                                        : Enabled\n"
                 "        Pending                                        : Disabled"],
                ["    MIG Mode\n        Current                                        : Disabled\n"
                 "        Pending                                        : Disabled",
                 "    MIG Mode\n        Current                                        : Enabled\n"
                 "        Pending                                        : Enabled"],
            ]
        },
        "add": {
            "nvidia-modules": {"command": "sh", "output": "nvidia\nnvidia_uvm\n", "rc": 0},
            "gpu-services": {"command": SVC, "output": enabled, "rc": 0},
            "mig-lgi": {"command": "nvidia-smi mig -lgi", "output": lgi, "rc": 0},
            "gpu-settings-unit": {"command": " ".join(BootUnitFact.argv), "output": probe.stdout, "rc": 0},
        },
    }  # fmt: skip
    imported = import_one(edited_facts(after), load_catalog())
    assert imported.data["gpu"]["persistence"] is True
    assert imported.data["gpu"]["settings"] == [  # CASE's, the locked clocks from the unit in the root
        {
            "gpus": "all",
            "power_limit_w": 450,
            "ecc": False,
            "locked_gpu_clocks": {"min_mhz": 1200, "max_mhz": 1980},
        }
    ]
    assert [g["layout"] for g in imported.data["gpu"]["mig"]] == [{"1g.18gb": 2, "3g.71gb": 1}]
    assert not imported.plan.changes and not imported.plan.blockers, [s.reason for s in imported.plan.changes]
