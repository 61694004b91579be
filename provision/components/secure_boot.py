"""Secure Boot: a DKMS-built module loads only when signed by an enrolled MOK (FF-11).

The certificate named is the one DKMS signs with (the ``mok-key`` fact: ``mok_certificate=`` in
DKMS's framework files, https://github.com/dell/dkms/blob/master/README.md#module-signing); the
manual step carries it as its ``current``, for the console instructions
(:func:`provision.reboot.mok.certificate`). Source: field failure FF-11 (Secure Boot rejects an
unenrolled DKMS module: canonical/nvidia-graphics-drivers#62).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.dkms import driver_changes
from provision.components.driver import signed_driver, uses_dkms
from provision.components.steps import noop
from provision.detect.unknown import Unknown
from provision.fieldfailures import ff_ref
from provision.findings import Finding


class SecureBoot(InstallableComponent):
    """MOK enrollment, a manual step at the console; no role (nothing Ansible can do)."""

    name = Component.SECURE_BOOT
    spec_section = "driver"
    facts = ("hardware", "mok")
    stage = 1

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        built = secure_boot_step(ctx, driver_changes(ctx))
        return (built,) if built is not None else ()


def secure_boot_step(ctx: PlanContext, driver_changes: bool) -> Step | Finding | None:
    """Under Secure Boot a DKMS-built module loads only when signed by an enrolled MOK (FF-11)."""
    from provision.detect.domains.driver import DKMS_MOK

    spec, hw = ctx.spec, ctx.facts.hardware
    sb = None if isinstance(hw, Unknown) or isinstance(hw.secure_boot, Unknown) else hw.secure_boot
    if sb is None or not sb.enabled:
        return None
    signed = signed_driver(ctx)
    if signed is not None:
        return noop(
            Component.SECURE_BOOT,
            reason=f"Secure Boot on; {signed.module[0]} is signed by the distribution "
            f"({signed.archive.signed.signer if signed.archive.signed else 'its key'}), which shim trusts: "
            "no MOK enrollment",
        )
    if not uses_dkms(ctx):
        return None
    mok = ctx.facts.mok
    cert = DKMS_MOK if isinstance(mok, Unknown) else mok.signing_certificate
    if not isinstance(mok, Unknown) and mok.signing_enrolled:
        return noop(Component.SECURE_BOOT, reason=f"Secure Boot on; DKMS signing key {cert} is enrolled")
    if not driver_changes and isinstance(mok, Unknown):
        return None
    if not spec.driver.console:
        return Finding(
            rule="secure-boot-needs-console",
            severity="blocker",
            source=f"field failures FF-11 ({ff_ref(11)})",
            message="Secure Boot is enabled and the DKMS signing key is not enrolled; enrolling it "
            "needs the firmware console at the next boot, and driver.console is false (headless). "
            "Enroll a key out of band, or disable Secure Boot (checklist item secure-boot)",
        )
    return Step(
        component=Component.SECURE_BOOT,
        action=Action.MANUAL,
        current=cert,
        target="MOK enrolled",
        reason=f"Secure Boot is on: DKMS signs nvidia.ko with {cert}; run `mokutil --import "
        f"{shlex.quote(cert)}` (choose a one-time password), then confirm MOK enrollment at the "
        "console on the next boot (checklist item secure-boot)",
    )
