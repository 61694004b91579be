"""One test (or more) per field failure of docs/field-failures.md, FF-01 to FF-16.

Each builds the entry's reproducing input (spec values plus detected facts) and asserts the
plan's steps, blockers and messages, with the right value (a bound, a package name) exact.
"""

from __future__ import annotations

import re
from pathlib import Path

from provision.detect.facts import (
    DkmsStatus,
    FabricState,
    Gpu,
    Kernel,
    LoadedDriver,
    MokState,
    NouveauState,
    PackageOrigins,
    PciDevice,
    Topology,
)
from provision.detect.runner import facts_from_raw
from provision.plan.models import Action, Component, Plan
from provision.plan.planner import make_plan
from provision.spec.rules import check_spec
from provision.versions import DriverVersion
from tests.unit.factories import CATALOG, ROOT, fresh_ubuntu, pkg, spec, step

SYNTH_FF14 = ROOT / "tests" / "fixtures" / "hardware" / "synth-2gpu-ff14"
H100_SXM = "NVIDIA H100 80GB HBM3"


def rules(plan: Plan) -> list[str]:
    return [f.rule for f in (*plan.blockers, *plan.warnings)]


def finding(plan: Plan, rule: str) -> str:
    return next(f.message for f in (*plan.blockers, *plan.warnings) if f.rule == rule)


def nvswitch_box(count: int = 8) -> list[PciDevice]:
    gpus = [
        PciDevice(
            bdf=f"0000:{0x18 + i:02x}:00.0",
            class_code="0302",
            device_id="2330",
            description="3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB]",
        )
        for i in range(count)
    ]
    switches = [
        PciDevice(
            bdf=f"0000:{0x05 + i:02x}:00.0",
            class_code="0680",
            device_id="22a3",
            description="Bridge: NVIDIA Corporation GH100 [NVSwitch]",
        )
        for i in range(4)
    ]
    return gpus + switches


# FF-01: NVML "Driver/library version mismatch" after an unattended upgrade -----------------------

FF01_SPEC = {
    "driver__branch": 550,
    "driver__flavor": "proprietary",
    "driver__version": None,
    "cuda": None,
    "python": None,
}


def ff01_facts(on_disk: str, status: str = "install ok installed"):  # type: ignore[no-untyped-def]
    return fresh_ubuntu(
        driver=LoadedDriver(version="550.90.07", flavor="proprietary"),
        driver_on_disk=DriverVersion(on_disk),
        packages=(
            pkg("cuda-drivers-550", "550.107.02-1", "hold ok installed"),
            pkg("libnvidia-compute-550", "550.107.02-0ubuntu0.24.04.1", status),
            pkg("nvidia-dkms-550", "550.107.02-0ubuntu0.24.04.1"),
        ),
    )


def test_ff01_reboot_pending_not_reinstall() -> None:
    plan = make_plan(spec(**FF01_SPEC), ff01_facts("550.107.02"), CATALOG)
    assert step(plan, Component.DRIVER).action is Action.NOOP
    assert (
        step(plan, Component.REBOOT).reason
        == "reboot pending (module 550.90.07 loaded, 550.107.02 installed)"
    )


def test_ff01_broken_package_state_repair_first() -> None:
    plan = make_plan(spec(**FF01_SPEC), ff01_facts("550.107.02", "install ok half-configured"), CATALOG)
    expected = (
        "broken package state: libnvidia-compute-550 (install ok half-configured); "
        "run `dpkg --configure -a`; if a maintainer script of libnvidia-compute-550 fails again, "
        "dpkg's error names it: fix its cause, or remove that package with `dpkg --remove`, "
        "before anything else (FF-01)"
    )
    assert expected in finding(plan, "broken-package-state")


def test_ff01_module_on_disk_differs_from_userspace() -> None:
    plan = make_plan(spec(**FF01_SPEC), ff01_facts("550.90.07"), CATALOG)
    assert "driver-userspace-mismatch" in [b.rule for b in plan.blockers]
    assert "on disk is 550.90.07 but the userspace packages are 550.107.02" in finding(
        plan, "driver-userspace-mismatch"
    )


def test_ff01_pin_holds_concrete_packages_and_guards_unattended_upgrades() -> None:
    plan = make_plan(spec(**FF01_SPEC), ff01_facts("550.107.02"), CATALOG)
    holds = step(plan, Component.HOLDS)
    assert holds.action is Action.HOLD
    assert holds.packages == ("libnvidia-compute-550", "nvidia-dkms-550")
    guard = plan.role_vars("nvidia_holds")["nvidia_holds_unattended_guard"]
    for prefix in ('"nvidia-";', '"libnvidia-";', '"cuda-";', '"xserver-xorg-video-nvidia-";'):
        assert prefix in guard


# FF-02: fabric manager drifts from the driver ----------------------------------------------------


def test_ff02_fabric_manager_version_drift() -> None:
    s = spec(
        gpus__model="h100-sxm",
        gpus__count=8,
        driver__branch=535,
        driver__version="535.216.03",
        cuda=None,
        python=None,
    )
    facts = fresh_ubuntu(
        nvidia_pci=tuple(nvswitch_box()),
        packages=(pkg("nvidia-fabricmanager-535", "535.183.01-1", "hold ok installed"),),
    )
    plan = make_plan(s, facts, CATALOG)
    fm = step(plan, Component.FABRIC_MANAGER)
    assert (fm.action, fm.current, fm.target) == (Action.UPGRADE, "535.183.01", "535.216.03")
    assert fm.packages == ("nvidia-fabricmanager-535=535.216.03-*",)
    assert "GPUs need a reset or reboot" in fm.reason
    pins = plan.role_vars("nvidia_repository")["nvidia_repository_preferences"]
    assert (
        "Package: nvidia-* libnvidia-* cuda-drivers* xserver-xorg-video-nvidia-*\nPin: version 535.216.03-*"
        in pins
    )


def test_ff02_package_name_changes_at_r580() -> None:
    s = spec(gpus__model="h100-sxm", gpus__count=8)
    fm = step(make_plan(s, fresh_ubuntu(nvidia_pci=tuple(nvswitch_box())), CATALOG), Component.FABRIC_MANAGER)
    assert fm.packages == ("nvidia-fabricmanager=580.95.05-*",)


# FF-03: no fabric manager on an NVSwitch system ---------------------------------------------------


def test_ff03_nvswitch_detected_and_fm_disabled_is_refused() -> None:
    s = spec(gpus__model="h100-sxm", gpus__count=8, fabric_manager="disabled")
    facts = fresh_ubuntu(
        nvidia_pci=tuple(nvswitch_box()), fabric=FabricState(states=(("In Progress", "N/A"),) * 8)
    )
    plan = make_plan(s, facts, CATALOG)
    assert "CUDA fails with error 802" in finding(plan, "fm-disabled-on-detected-nvswitch")
    assert "4 NVSwitch function(s) in lspci" in finding(plan, "fm-disabled-on-detected-nvswitch")


def test_ff03_fabric_state_alone_reveals_nvswitch() -> None:
    s = spec(gpus__model="h100-sxm", gpus__count=8)
    facts = fresh_ubuntu(fabric=FabricState(states=(("In Progress", "N/A"),) * 8))
    fm = step(make_plan(s, facts, CATALOG), Component.FABRIC_MANAGER)
    assert fm.action is Action.INSTALL


# FF-04: fabric manager on a machine without NVSwitch -----------------------------------------------

PCIE_PAIR = tuple(
    PciDevice(
        bdf=f"0000:{b}:00.0",
        class_code="0302",
        device_id="20b5",
        description="3D controller: NVIDIA Corporation GA100",
    )
    for b in ("41", "61")
)


def test_ff04_required_without_nvswitch_is_refused() -> None:
    plan = make_plan(spec(fabric_manager="required"), fresh_ubuntu(nvidia_pci=PCIE_PAIR), CATALOG)
    assert "no NVSwitch was found (lspci shows NVIDIA GPUs and no NVSwitch bridge)" in finding(
        plan, "fm-required-without-nvswitch"
    )


def test_ff04_auto_skips_and_warns_about_an_installed_fm() -> None:
    facts = fresh_ubuntu(nvidia_pci=PCIE_PAIR, packages=(pkg("nvidia-fabricmanager", "580.95.05-1"),))
    plan = make_plan(spec(), facts, CATALOG)
    assert step(plan, Component.FABRIC_MANAGER).action is Action.NOOP
    assert "NV_WARN_NOTHING_TO_DO" in finding(plan, "fm-installed-without-nvswitch")


# FF-05: Blackwell HGX needs NVLSM with the fabric manager ---------------------------------------------


def test_ff05_nvlink5_adds_subnet_manager() -> None:
    s = spec(gpus__model="b200", gpus__count=8, cuda=None, python=None)
    fm = step(make_plan(s, fresh_ubuntu(), CATALOG), Component.FABRIC_MANAGER)
    assert fm.packages == ("nvidia-fabricmanager=580.95.05-*", *CATALOG.naming("deb").nvlink5(580))
    assert "nvlsm" in CATALOG.naming("deb").nvlink5(580)


# FF-06 / FF-07: module flavour by the GPUs the machine has ---------------------------------------------

RTX_5090 = PciDevice(
    bdf="0000:01:00.0",
    class_code="0300",
    device_id="2b85",
    description="VGA compatible controller: NVIDIA Corporation GB202 [GeForce RTX 5090]",
)
GT_1030 = PciDevice(
    bdf="0000:09:00.0",
    class_code="0300",
    device_id="1d01",
    description="VGA compatible controller: NVIDIA Corporation GP108 [GeForce GT 1030]",
)


def test_ff06_blackwell_with_proprietary_flavor_is_refused() -> None:
    plan = make_plan(spec(driver__flavor="proprietary"), fresh_ubuntu(nvidia_pci=(RTX_5090,)), CATALOG)
    message = finding(plan, "flavor-open-required")
    assert "GB202" in message and "10de:2b85" in message and "requires flavor: open" in message


def test_ff07_pre_turing_with_open_flavor_is_refused() -> None:
    plan = make_plan(spec(), fresh_ubuntu(nvidia_pci=(GT_1030,)), CATALOG)
    assert "no GSP" in finding(plan, "flavor-proprietary-required")


def test_ff07_pre_turing_above_r580_is_refused() -> None:
    s = spec(driver__flavor="proprietary", driver__branch=590, driver__version=None, cuda=None, python=None)
    plan = make_plan(s, fresh_ubuntu(nvidia_pci=(GT_1030,)), CATALOG)
    assert "R580 is the last driver branch that supports it" in finding(plan, "driver-branch-too-new-for-gpu")


def test_ff06_ff07_mixed_box_is_unsatisfiable() -> None:
    plan = make_plan(spec(), fresh_ubuntu(nvidia_pci=(RTX_5090, GT_1030)), CATALOG)
    assert "no single driver serves both" in finding(plan, "flavor-unsatisfiable")


# FF-08: driver-pulling meta-packages ---------------------------------------------------------------------


def test_ff08_toolkit_only_and_metas_forbidden_in_the_simulated_transaction() -> None:
    plan = make_plan(spec(cuda={"toolkit": "12.8"}, python=None), fresh_ubuntu(), CATALOG)
    assert step(plan, Component.CUDA_TOOLKIT).packages == ("cuda-toolkit-12-8",)
    forbidden = re.compile(
        "^Inst " + plan.role_vars("nvidia_packages")["nvidia_packages_forbidden_regex"] + " "
    )
    for name in ("cuda", "cuda-12-8", "cuda-drivers", "cuda-drivers-570", "nvidia-driver"):
        assert forbidden.match(f"Inst {name} (1 repo)"), name
    for name in ("cuda-toolkit-12-8", "nvidia-open", "libnvidia-compute"):
        assert not forbidden.match(f"Inst {name} (1 repo)"), name


def test_ff08_driver_packages_from_two_origins_are_reported() -> None:
    origins = PackageOrigins(
        origins={
            "libnvidia-compute-580": "archive.ubuntu.com",
            "nvidia-fabricmanager-580": "developer.download.nvidia.com",
        }
    )
    plan = make_plan(spec(), fresh_ubuntu(origins=origins), CATALOG)
    assert finding(plan, "mixed-driver-sources").startswith(
        "the driver's packages come from 2 origins (archive.ubuntu.com: libnvidia-compute-580; "
        "developer.download.nvidia.com: nvidia-fabricmanager-580)"
    )
    assert finding(plan, "driver-origin-not-spec").startswith(
        "libnvidia-compute-580 come from another origin"
    )


def test_ff08_preinstalled_driver_forbids_any_driver_package() -> None:
    plan = make_plan(
        spec(driver__source="preinstalled", driver__version=None, python=None),
        fresh_ubuntu(driver=LoadedDriver(version="580.95.05", flavor="open")),
        CATALOG,
    )
    forbidden = re.compile(
        "^Inst " + plan.role_vars("nvidia_packages")["nvidia_packages_forbidden_regex"] + " "
    )
    assert forbidden.match("Inst nvidia-driver-open (580.126.20-1 repo)")
    assert forbidden.match("Inst libnvidia-compute (580.126.20-1 repo)")
    assert not forbidden.match("Inst libcudnn9-cuda-13 (9.14.0.64-1 repo)")


# FF-09 / FF-10: wheels that fit the GPU and the driver ------------------------------------------------


def test_ff09_wheel_without_the_gpu_arch_is_refused() -> None:
    s = spec(
        gpus__model="rtx-5090",
        gpus__count=1,
        cuda=None,
        python={"interpreter": "3.12", "venv": "/opt/v", "torch": "2.6.0", "cuda_variant": "cu124"},
    )
    message = next(f.message for f in check_spec(s, CATALOG) if f.rule == "torch-arch-missing")
    assert "12.0" in message and "2.7" in message and "cu128" in message


def test_ff09_index_url_pinned_to_the_variant() -> None:
    s = spec(
        gpus__model="rtx-5090",
        gpus__count=1,
        cuda=None,
        python={"interpreter": "3.12", "venv": "/opt/v", "torch": "2.7.0", "cuda_variant": "cu128"},
    )
    py = make_plan(s, fresh_ubuntu(), CATALOG).role_vars("python_env")
    assert py["python_env_torch_index_url"] == "https://download.pytorch.org/whl/cu128"
    assert py["python_env_torch_requirements"] == ["torch==2.7.0+cu128"]


def test_ff10_cu130_on_driver_575_is_refused() -> None:
    s = spec(driver__branch=575, driver__version=None, cuda=None)
    message = next(f.message for f in check_spec(s, CATALOG) if f.rule == "torch-driver-floor")
    assert "580" in message and "580.65.06" in message


# FF-11: Secure Boot with an unenrolled DKMS key -------------------------------------------------------


def test_ff11_secure_boot_needs_mok_enrollment_at_the_console() -> None:
    facts = facts_from_raw(SYNTH_FF14).model_copy(
        update={"os": fresh_ubuntu().os, "packages": (), "mok": MokState(key_present=True, enrolled=False)}
    )
    plan = make_plan(spec(), facts, CATALOG)
    sb = step(plan, Component.SECURE_BOOT)
    assert sb.action is Action.MANUAL
    assert "confirm MOK enrollment at the console on the next boot" in sb.reason


def test_ff11_headless_machine_is_refused() -> None:
    facts = facts_from_raw(SYNTH_FF14).model_copy(update={"os": fresh_ubuntu().os, "packages": ()})
    plan = make_plan(spec(driver__console=False), facts, CATALOG)
    assert "driver.console is false" in finding(plan, "secure-boot-needs-console")


# FF-12 / FF-13: DKMS, headers for every kernel, the kernel's own compiler ------------------------------

UBUNTU_KERNEL = Kernel(
    release="6.8.0-60-generic",
    machine="x86_64",
    compiler="x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0",
)


def test_ff12_headers_for_every_installed_kernel() -> None:
    facts = fresh_ubuntu(
        kernel=UBUNTU_KERNEL,
        packages=(
            pkg("linux-image-6.8.0-60-generic", "6.8.0-60.63"),
            pkg("linux-image-6.8.0-65-generic", "6.8.0-65.68"),
            pkg("linux-image-generic", "6.8.0-65.68"),
            pkg("linux-headers-6.8.0-60-generic", "6.8.0-60.63"),
            pkg("dkms", "3.0.11-1ubuntu13"),
        ),
        dkms=DkmsStatus(modules=(("570.172.08", "6.8.0-60-generic", "installed"),)),
    )
    dkms = step(make_plan(spec(), facts, CATALOG), Component.DKMS)
    assert dkms.packages == ("linux-headers-6.8.0-65-generic", "linux-headers-generic", "gcc-12", "g++-12")


def test_ff13_kernel_compiler_installed_for_the_build() -> None:
    facts = fresh_ubuntu(kernel=UBUNTU_KERNEL, packages=(pkg("linux-image-6.8.0-60-generic", "6.8.0-60.63"),))
    plan = make_plan(spec(driver__flavor="proprietary"), facts, CATALOG)
    assert step(plan, Component.DKMS).packages == ("dkms", "linux-headers-6.8.0-60-generic", "gcc-12")
    assert plan.role_vars("nvidia_packages")["nvidia_packages_dkms"] is True


def test_in_kernel_nouveau_is_blacklisted_with_a_reboot() -> None:
    plan = make_plan(spec(), fresh_ubuntu(nouveau=NouveauState(loaded=True)), CATALOG)
    assert step(plan, Component.KERNEL_MODULES).action is Action.CONFIGURE
    assert "kernel_modules" in step(plan, Component.REBOOT).reason
    assert (
        plan.role_vars("nvidia_kernel")["nvidia_kernel_nouveau_blacklist"]
        == "/etc/modprobe.d/provision-blacklist-nouveau.conf"
    )


# FF-14 / FF-15 / FF-16: reported, not fixable from Linux --------------------------------------------


def test_ff14_acs_on_gpu_bridges_is_reported() -> None:
    facts = facts_from_raw(SYNTH_FF14).model_copy(update={"os": fresh_ubuntu().os})
    message = finding(make_plan(spec(), facts, CATALOG), "acs-redirects-p2p")
    assert "ACS must be disabled on bridges 0000:00:03.1, 0000:20:01.1" in message
    assert "checklist item acs-iommu" in message


def test_ff15_numa_split_and_path_worse_than_required() -> None:
    facts = facts_from_raw(SYNTH_FF14).model_copy(
        update={
            "os": fresh_ubuntu().os,
            "topology": Topology(
                gpus=("GPU0", "GPU1"),
                links={"GPU0": {"GPU0": "X", "GPU1": "SYS"}, "GPU1": {"GPU0": "SYS", "GPU1": "X"}},
            ),
        }
    )
    plan = make_plan(spec(gpus__max_path="PXB"), facts, CATALOG)
    assert "NUMA nodes 0, 1" in finding(plan, "gpus-span-numa-nodes")
    assert "GPU0-GPU1 SYS" in finding(plan, "topology-path")


def test_ff16_degraded_link_width_is_reported_and_idle_gen_is_not() -> None:
    gpus = (
        Gpu(
            index=0,
            name="NVIDIA A100X",
            pci_bus_id="00000000:41:00.0",
            pcie_gen_current=1,
            pcie_gen_max=4,
            pcie_width_current=16,
            pcie_width_max=16,
        ),
        Gpu(
            index=1,
            name="NVIDIA A100X",
            pci_bus_id="00000000:61:00.0",
            pcie_gen_current=4,
            pcie_gen_max=4,
            pcie_width_current=8,
            pcie_width_max=16,
        ),
    )
    plan = make_plan(spec(), fresh_ubuntu(gpus=gpus), CATALOG)
    messages = [f.message for f in plan.warnings if f.rule == "pcie-link-degraded"]
    assert len(messages) == 1 and messages[0].startswith("GPU 1 (00000000:61:00.0) trained at x8 of x16")


def test_fixture_paths_exist() -> None:
    assert Path(SYNTH_FF14).is_dir()
