"""Driver checks: nvidia-smi health, one exact driver version everywhere, branch, flavour,
persistence mode, and the fabric manager on NVSwitch machines (FF-01, FF-02, FF-03, FF-04, FF-06).
"""

from __future__ import annotations

import shlex

from provision.detect.domains.driver import DKMS_MOK
from provision.detect.facts import LoadedDriver, Unknown
from provision.fieldfailures import ff_ref
from provision.unknown import because
from provision.verify.context import Context, result, unknown
from provision.verify.hints import no_driver, not_on_the_bus
from provision.verify.models import CheckResult, Measured, Status, Threshold

_NO_FABRIC = {"N/A", "Not Supported", ""}


def nvidia_smi(ctx: Context) -> list[CheckResult]:
    """``nvidia-smi`` answers and lists GPUs."""
    gpus = ctx.gpus
    title = "nvidia-smi answers"
    if isinstance(gpus, Unknown):
        hint = (
            not_on_the_bus(ctx.facts)
            or no_driver(ctx.facts, ctx.pm.upstream)
            or "Is the module loaded (lsmod | grep nvidia, dmesg | grep NVRM)? A version mismatch is FF-01."
        )
        return [unknown("nvidia-smi", title, gpus, hint=hint)]
    status: Status = "pass" if gpus else "fail"
    measured = Measured(value=float(len(gpus)), unit="GPUs")
    hint = "nvidia-smi sees no GPU: check lspci -d 10de: and dmesg for RmInitAdapter errors (FF-06)."
    return [result("nvidia-smi", title, status, measured=measured, hint=hint)]


def userspace_versions(ctx: Context) -> dict[str, str]:
    """Userspace driver versions by origin: nvidia-smi's driver_version and the driver packages."""
    found: dict[str, str] = {}
    if not isinstance(ctx.gpus, Unknown):
        for gpu in ctx.gpus:
            if gpu.driver_version:
                found[f"nvidia-smi gpu{gpu.index}"] = gpu.driver_version
    return found | ctx.facts.driver_packages(ctx.pm.upstream)


def driver_consistency(ctx: Context) -> list[CheckResult]:
    """Loaded module == on-disk module == userspace (packages, nvidia-smi), exact x.y.z (FF-01)."""
    title = "driver versions agree (loaded, on disk, userspace)"
    loaded = ctx.facts.driver
    if isinstance(loaded, Unknown):
        hint = no_driver(ctx.facts, ctx.pm.upstream) or "Load the module or reboot (modprobe nvidia)."
        return [unknown("driver-consistency", title, loaded, hint=hint)]
    versions = {"loaded": loaded.version.text, **userspace_versions(ctx)}
    on_disk = ctx.facts.driver_on_disk
    if on_disk is not None and not isinstance(on_disk, Unknown):
        versions["on-disk"] = on_disk.text
    unknowns = "; " + because("on-disk unknown", on_disk.unknown) if isinstance(on_disk, Unknown) else ""
    differ = {k: v for k, v in versions.items() if v != loaded.version.text}
    measured = ", ".join(f"{k} {v}" for k, v in versions.items()) + unknowns
    hint = (
        f"Module {loaded.version} is loaded but {', '.join(f'{k} is {v}' for k, v in differ.items())}: "
        f"reboot if the newer version is installed; run {ctx.pm.repair_command} if packages are "
        "half-installed."
    )
    return [
        result(
            "driver-consistency",
            title,
            "fail" if differ else "pass",
            measured=Measured(value=measured),
            threshold=Threshold(op="all", value="equal, exact x.y.z", source=f"FF-01 ({ff_ref(1)})"),
            hint=hint,
        )
    ]


def driver_branch(ctx: Context) -> list[CheckResult]:
    """The loaded driver is the spec's branch (and exact version, when the spec pins one)."""
    title = "driver branch and version as specified"
    loaded = ctx.facts.driver
    if isinstance(loaded, Unknown):
        return [unknown("driver-branch", title, loaded)]
    want = ctx.spec.driver.version.text if ctx.spec.driver.version else f"{ctx.spec.driver.branch}.*"
    ok = loaded.version.branch == ctx.spec.driver.branch and (
        ctx.spec.driver.version is None or ctx.spec.driver.version == loaded.version
    )
    return [
        result(
            "driver-branch",
            title,
            "pass" if ok else "fail",
            measured=Measured(value=loaded.version.text),
            threshold=Threshold(op="==", value=want, source="spec driver.branch/driver.version"),
            hint="Run provision plan/apply to install the specified driver, then reboot.",
        )
    ]


def driver_flavor(ctx: Context) -> list[CheckResult]:
    """Kernel module flavour (open / proprietary) as specified; Blackwell and later need open (FF-06)."""
    title = "kernel module flavour"
    loaded = ctx.facts.driver
    if isinstance(loaded, Unknown):
        return [unknown("driver-flavor", title, loaded)]
    want, source = _wanted_flavor(ctx, loaded)
    status: Status = "pass" if want in ("open or proprietary", loaded.flavor) else "fail"
    return [
        result(
            "driver-flavor",
            title,
            status,
            measured=Measured(value=loaded.flavor),
            threshold=Threshold(op="==", value=want, source=source),
            hint=f"Install the {want} kernel modules for the same driver version and reboot.",
        )
    ]


def _wanted_flavor(ctx: Context, loaded: LoadedDriver) -> tuple[str, str]:
    if ctx.spec.driver.flavor != "auto":
        return ctx.spec.driver.flavor, "spec driver.flavor"
    model = ctx.model
    rules = ctx.catalog.kernel_modules
    if model is not None and model.architecture in rules.open_required.archs:
        return "open", f"catalog drivers.yaml open_required ({', '.join(rules.open_required.source)})"
    return "open or proprietary", "spec driver.flavor: auto"


def persistence(ctx: Context) -> list[CheckResult]:
    """Persistence mode on every GPU (else each CUDA start re-initialises the GPU); warn when off."""
    title = "persistence mode enabled"
    gpus = ctx.gpus
    if isinstance(gpus, Unknown):
        return [unknown("persistence-mode", title, gpus, status="skip")]
    off = [f"gpu{g.index}" for g in gpus if g.persistence_mode is False]
    value = "enabled on all" if not off else f"disabled on {', '.join(off)}"
    return [
        result(
            "persistence-mode",
            title,
            "warn" if off else "pass",
            measured=Measured(value=value),
            threshold=Threshold(
                op="==", value="Enabled", source="NVIDIA driver persistence guide (nvidia-persistenced)"
            ),
            hint="Set gpu.persistence: true: apply enables nvidia-persistenced (NVIDIA's recommended path; "
            "nvidia-smi -pm 1 is the legacy mode).",
        )
    ]


def nvswitch_reason(ctx: Context) -> str | None:
    """Why this machine needs the fabric manager, or None when it does not (FF-03/FF-04)."""
    if ctx.spec.fabric_manager == "required":
        return "spec fabric_manager: required"
    fabric = ctx.inputs.fabric_states()
    if not isinstance(fabric, Unknown) and any(f.state not in _NO_FABRIC for f in fabric):
        return "nvidia-smi -q reports a GPU fabric state (NVSwitch system)"
    return None


def fabric_manager(ctx: Context) -> list[CheckResult]:
    """On NVSwitch machines: FM version == loaded driver, and every GPU's fabric Completed/Success."""
    why = nvswitch_reason(ctx)
    if why is None:
        detail = f"{_fabric_seen(ctx)} and the spec does not require FM (FF-04)"
        return [
            result("fabricmanager-version", "fabric manager version = driver", "skip", detail=detail),
            result("fabric-state", "GPU fabric state Completed/Success", "skip", detail=detail),
        ]
    return [_fm_version(ctx, why), _fabric_state(ctx, why)]


def _fabric_seen(ctx: Context) -> str:
    """No NVSwitch fabric, as the fabric states read say it: N/A on every GPU, or why they were not
    read (then no fabric was seen, which is not proof of none)."""
    fabric = ctx.inputs.fabric_states()
    if isinstance(fabric, Unknown):
        return f"no NVSwitch fabric seen ({because('fabric state not read', fabric.unknown)})"
    return (
        "no NVSwitch fabric (Fabric State N/A on every GPU)" if fabric else "no GPU reported a fabric state"
    )


def _fm_version(ctx: Context, why: str) -> CheckResult:
    title = "fabric manager version = driver"
    loaded, fm = ctx.facts.driver, ctx.inputs.fm_version
    hint = "Install nvidia-fabricmanager at exactly the loaded driver's version and hold it (FF-02)."
    if isinstance(fm, Unknown) and fm.unknown.endswith(": not found") and _fabric_up(ctx):
        return result(
            "fabricmanager-version",
            title,
            "skip",
            detail=(
                "no fabric manager in this OS and every GPU's fabric is Completed/Success: the fabric is "
                "managed outside it (shared NVSwitch virtualization, e.g. a VM on an HGX host; NVIDIA Fabric "
                "Manager User Guide)"
            ),
        )
    if isinstance(loaded, Unknown) or isinstance(fm, Unknown):
        reason = loaded if isinstance(loaded, Unknown) else fm
        return unknown("fabricmanager-version", title, reason, hint=hint)
    return result(
        "fabricmanager-version",
        title,
        "pass" if fm == loaded.version.text else "fail",
        measured=Measured(value=fm),
        threshold=Threshold(op="==", value=loaded.version.text, source=f"FF-02 ({ff_ref(2)}); {why}"),
        hint=hint,
    )


def _fabric_up(ctx: Context) -> bool:
    fabric = ctx.inputs.fabric_states()
    return (
        not isinstance(fabric, Unknown)
        and bool(fabric)
        and all((f.state, f.status) == ("Completed", "Success") for f in fabric)
    )


def _fabric_state(ctx: Context, why: str) -> CheckResult:
    title = "GPU fabric state Completed/Success"
    fabric = ctx.inputs.fabric_states()
    hint = "Start nvidia-fabricmanager (and nvlsm on NVLink 5), then reset the GPUs or reboot (FF-02, FF-05)."
    if isinstance(fabric, Unknown):
        return unknown("fabric-state", title, fabric, hint=hint)
    bad = [
        f"gpu{i} {f.state}/{f.status}"
        for i, f in enumerate(fabric)
        if (f.state, f.status) != ("Completed", "Success")
    ]
    return result(
        "fabric-state",
        title,
        "fail" if bad or not fabric else "pass",
        measured=Measured(value=", ".join(bad) if bad else f"Completed/Success on {len(fabric)} GPUs"),
        threshold=Threshold(op="all", value="Completed/Success", source=f"FF-02 ({ff_ref(2)}); {why}"),
        hint=hint,
    )


def _dkms_certificate(ctx: Context) -> str:
    """The certificate DKMS signs with, quoted for the shell (the ``mok-key`` fact), else its default."""
    mok = ctx.facts.mok
    return shlex.quote(DKMS_MOK if isinstance(mok, Unknown) else mok.signing_certificate)


def module_signer(ctx: Context) -> list[CheckResult]:
    """Under Secure Boot the nvidia module must be signed by a key the firmware or shim trusts
    (``modinfo -F signer nvidia``): the distribution's key for its signed precompiled modules (the
    catalog's ``signed.signer``), any signer for a DKMS build (whose MOK enrollment the MOK state
    shows). No row when Secure Boot is off or not readable: any module loads then (FF-11)."""
    check_id, title = "module-signer", "nvidia module signed for Secure Boot"
    hw = ctx.facts.hardware
    sb = None if isinstance(hw, Unknown) or isinstance(hw.secure_boot, Unknown) else hw.secure_boot
    if sb is None or not sb.enabled:
        return []
    signer = ctx.facts.module_signer
    hint = (
        f"Secure Boot loads only signed modules (FF-11, {ff_ref(11)}): install the distribution's signed "
        f"module package, or enroll the DKMS key (mokutil --import {_dkms_certificate(ctx)}) and reboot."
    )
    if isinstance(signer, Unknown):
        return [unknown(check_id, title, signer, hint=hint)]
    wanted = _distro_signer(ctx)
    if wanted is not None:
        ok = signer.signer == wanted
        threshold = Threshold(
            op="==", value=wanted, source="catalog repos.yaml distro_archives signed.signer"
        )
    else:
        ok = bool(signer.signer)
        threshold = Threshold(op="==", value="any signer (DKMS MOK)", source=f"FF-11 ({ff_ref(11)})")
    return [
        result(
            check_id,
            title,
            "pass" if ok else "fail",
            measured=Measured(value=signer.signer or "unsigned"),
            threshold=threshold,
            hint=hint,
        )
    ]


def _distro_signer(ctx: Context) -> str | None:
    """The signer of the distribution's signed modules when the spec takes the driver from it."""
    if ctx.spec.driver.source != "distro":
        return None
    archive = ctx.catalog.distro_archives.get(ctx.spec.os.repo_code)
    return archive.signed.signer if archive is not None and archive.signed is not None else None


CHECKS = (
    nvidia_smi,
    driver_consistency,
    driver_branch,
    driver_flavor,
    persistence,
    fabric_manager,
    module_signer,
)
