"""An installed nvidia.ko is loaded, and a fabric an NVSwitch system has is registered.

Both are facts of a working machine that a package manager's exit code does not prove: DKMS's
package scriptlet exits 0 when the build fails (NVIDIA/open-gpu-kernel-modules#805), a module
signed by a key the firmware does not trust is refused at load time under Secure Boot (dkms(8)
README, "Secure Boot"), and an installed fabric manager whose service is not running leaves every
GPU of an NVSwitch fabric "In Progress", so CUDA fails with error 802 (NVIDIA Fabric Manager User
Guide). Each verdict names the cause it sees and the fix chosen from it.
"""

from __future__ import annotations

import shlex

from provision.catalog import Catalog
from provision.detect.domains.containers import UnitState
from provision.detect.domains.driver import DKMS_MOK, UBUNTU_MOK, DkmsStatus, ModuleSigner, MokState
from provision.detect.domains.firmware import SecureBoot
from provision.detect.facts import Facts, LoadedDriver, Unknown
from provision.invariants.base import Invariant, Verdict
from provision.spec.models import Spec

DKMS_SOURCE = (
    "NVIDIA/open-gpu-kernel-modules#805 (the DKMS scriptlet exits 0 on a failed build) "
    "(https://github.com/NVIDIA/open-gpu-kernel-modules/issues/805); dkms(8) README, Secure Boot "
    "(https://github.com/dkms-project/dkms#secure-boot)"
)
FM_SOURCE = (
    "NVIDIA Fabric Manager User Guide (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/): "
    "a GPU's fabric registration stays In Progress until the fabric manager has programmed the NVSwitches"
)
FM_UNIT = "nvidia-fabricmanager.service"


class DriverLoaded(Invariant):
    """nvidia.ko is loaded wherever one is installed (``modinfo`` finds it, or DKMS registered it)."""

    id = "driver-loaded"
    title = "the installed kernel module is loaded"
    layer = "modules"
    source = DKMS_SOURCE
    reads = ("driver", "driver_on_disk", "dkms", "kernel", "hardware", "mok", "module_signer")
    severity = "warning"
    verify_check = "driver-consistency"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        if isinstance(facts.driver, LoadedDriver):
            return self.holds(f"nvidia.ko {facts.driver.version} loaded")
        dkms = facts.dkms if isinstance(facts.dkms, DkmsStatus) else DkmsStatus()
        disk = facts.on_disk_driver()
        if disk is None and not dkms.modules:
            return self.not_applicable("no nvidia.ko installed (modinfo finds none, DKMS has none)")
        kernel = "" if isinstance(facts.kernel, Unknown) else facts.kernel.release
        observed = f"nvidia.ko not loaded (/proc/driver/nvidia/version absent) on kernel {kernel or '?'}"
        found = _dkms_cause(dkms, kernel) if disk is None else _signer_cause(facts, str(disk))
        if found is None:
            return self.not_applicable(
                "nvidia.ko is installed and not loaded, with nothing seen refusing it "
                "(gpu-bound plans the reboot)"
            )
        return self.violated(observed, *found)


def _dkms_cause(dkms: DkmsStatus, kernel: str) -> tuple[str, str] | None:
    """Why no module is on disk for the running kernel, from ``dkms status``."""
    state = dkms.state_for(kernel) or next((s for _, k, s in dkms.modules if not k), None)
    version = next((v for v, k, _ in dkms.modules if k in (kernel, "")), dkms.modules[0][0])
    # the module is nvidia (Ubuntu, NVIDIA's Ubuntu repository), nvidia-open (NVIDIA's RHEL
    # repository) or nvidia-current (Debian): the glob names each one's log
    log = f"/var/lib/dkms/nvidia*/{version}/build/make.log"
    if state == "installed":
        return None
    if state in ("added", "built"):
        return (
            f"DKMS left nvidia {version} '{state}', not 'installed', for kernel {kernel}: the build "
            "or install failed although the package manager reported success",
            f"read {log}, install what it lacks (the kernel's headers and compiler), then "
            f"`dkms autoinstall -k {kernel}`",
        )
    built_for = ", ".join(sorted({k for _, k, _ in dkms.modules if k})) or "no kernel"
    return (
        f"DKMS built nvidia {version} for {built_for}, not for the running kernel {kernel}",
        f"install linux-headers-{kernel} and run `dkms autoinstall -k {kernel}`; read {log} if it fails",
    )


def _signer_cause(facts: Facts, disk: str) -> tuple[str, str] | None:
    """Secure Boot refusing the module's signer, when that is what the facts show; else None (also
    when DKMS's configured certificate or Ubuntu's MOK is enrolled: the signer may be that key)."""
    hw = facts.hardware
    secure = not isinstance(hw, Unknown) and isinstance(hw.secure_boot, SecureBoot) and hw.secure_boot.enabled
    signer = facts.module_signer.signer if isinstance(facts.module_signer, ModuleSigner) else None
    mok = facts.mok if isinstance(facts.mok, MokState) else None
    if not secure or signer is None or (mok is not None and mok.trusted is not None):
        return None
    by = f"signed by '{signer}'" if signer else "unsigned"
    tested = f"{mok.signing_certificate} is not enrolled" if mok is not None else "no enrolled MOK"
    return (
        f"Secure Boot is enabled and nvidia.ko {disk} is {by}, a key the firmware does not trust "
        f"({tested}): the kernel refuses to load it ('Key was rejected by service')",
        _enrol_fix(mok),
    )


def _enrol_fix(mok: MokState | None) -> str:
    """The fix: import the certificate DKMS signs with when the facts name it, else the usual two."""
    if mok is None:
        what = f"`mokutil --import <its certificate>`, e.g. {DKMS_MOK} or {UBUNTU_MOK}"
    else:
        what = f"`mokutil --import {shlex.quote(mok.signing_certificate)}`, the certificate DKMS signs with"
    return (
        f"enrol the key that signed it ({what}) and confirm at the console on the next boot; "
        "or install the distribution's signed precompiled module"
    )


class FabricRegistered(Invariant):
    """On an NVSwitch fabric every GPU's registration is Completed / Success."""

    id = "fabric-registered"
    title = "every GPU registered with its NVSwitch fabric"
    layer = "driver"
    source = FM_SOURCE
    reads = ("fabric", "gpu_runtime")
    severity = "warning"
    verify_check = "fabric-state"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        fabric = facts.fabric
        if isinstance(fabric, Unknown):
            return self.unknown(fabric)
        if not fabric.nvswitch:
            return self.not_applicable("nvidia-smi -q shows fabric state N/A on every GPU (no NVSwitch)")
        if fabric.completed:
            return self.holds(f"{len(fabric.states)} GPU(s) Completed / Success")
        shown = ", ".join(f"GPU {i} {st} / {status}" for i, (st, status) in enumerate(fabric.states))
        cause, fix = _fm_cause(_fm_unit(facts))
        return self.violated(f"fabric registration: {shown}", cause, fix)


def _fm_unit(facts: Facts) -> UnitState | Unknown:
    runtime = facts.gpu_runtime
    if runtime is None or isinstance(runtime.services, Unknown):
        return Unknown(unknown="systemd units not read")
    return runtime.services.units.get(FM_UNIT, UnitState(load="not-found"))


def _fm_cause(unit: UnitState | Unknown) -> tuple[str, str]:
    """Cause and fix of a fabric not registered, from the fabric manager unit's state."""
    journal = (
        "`journalctl -u nvidia-fabricmanager` (a version that differs from the driver's is refused there)"
    )
    if isinstance(unit, Unknown):
        return (f"the fabric manager is not serving the fabric ({unit.unknown})", f"start it; read {journal}")
    if not unit.exists:
        return (
            "no fabric manager is installed: nothing programs the NVSwitches, CUDA fails with error 802 "
            "(in a VM under shared NVSwitch virtualization it runs outside the VM, on the host)",
            "install nvidia-fabricmanager at the loaded driver's exact version (fabric_manager: auto), "
            "or, in such a VM, have the host's fabric manager register these GPUs",
        )
    if unit.active == "failed" or unit.result not in ("", "success"):
        return (
            f"{FM_UNIT} failed (result {unit.result or unit.active}): CUDA fails with error 802",
            f"read {journal}, fix it, restart it, then reset the GPUs",
        )
    if unit.active != "active":
        return (
            f"{FM_UNIT} is installed but {unit.active} ({unit.enabled or 'unit state unknown'}): "
            "nothing programs the NVSwitches, CUDA fails with error 802",
            "`systemctl enable --now nvidia-fabricmanager`",
        )
    return (
        "the fabric manager runs but has not finished registering the GPUs",
        f"wait for it, then read {journal}",
    )
