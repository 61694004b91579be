"""A pending MOK enrollment: the one step of an apply that only a person at the console can do.

Under Secure Boot a DKMS-built module loads only when its signing key (the certificate DKMS is
configured to sign with, ``/var/lib/dkms/mok.pub`` by default; DKMS README, "Module signing",
https://github.com/dell/dkms/blob/master/README.md#module-signing) is enrolled in shim's Machine
Owner Key list (field failure FF-11). The import is queued with ``mokutil --import``, which asks
for a one-time password, and confirmed in shim's MokManager at the next boot, on the console:
"Enroll MOK", "Continue", "Yes", the password, "Reboot". MokManager waits about ten seconds for
a key press and otherwise boots without enrolling, so nobody may reboot such a host unattended and
expect the key enrolled. Sources: mokutil(1)
(``--import``, ``--test-key``); Debian wiki, SecureBoot, "MOK - Machine Owner Key"
(https://wiki.debian.org/SecureBoot#MOK_-_Machine_Owner_Key); Ubuntu wiki, UEFI/SecureBoot/DKMS
(https://wiki.ubuntu.com/UEFI/SecureBoot/DKMS).
"""

from __future__ import annotations

import shlex

from provision.detect.domains.driver import DKMS_MOK
from provision.plan.models import Action, Component, Plan

SOURCE = "https://wiki.debian.org/SecureBoot#MOK_-_Machine_Owner_Key"


def mok_pending(plan: Plan | None) -> bool:
    """Whether ``plan`` still holds the manual MOK enrollment step (the key is not enrolled)."""
    return plan is not None and any(
        s.component is Component.SECURE_BOOT and s.action is Action.MANUAL for s in plan.steps
    )


def certificate(plan: Plan | None) -> str:
    """The certificate ``plan``'s manual MOK step asks to enrol (its ``current``); DKMS's default
    for a plan saved before the step carried it."""
    step = (
        next(
            (s for s in plan.steps if s.component is Component.SECURE_BOOT and s.action is Action.MANUAL),
            None,
        )
        if plan is not None
        else None
    )
    return step.current if step is not None and step.current else DKMS_MOK


def instructions(host: str, resume: str, cert: str) -> list[str]:
    """The console steps for ``host``, one line each, ending with how the apply resumes (``resume``).

    Args:
        host: The inventory hostname (``localhost``: this machine).
        resume: How the apply goes on after the boot.
        cert: The certificate to import (:func:`certificate` of the host's plan).
    """
    on = "on this machine" if host == "localhost" else f"on {host}"
    return [
        f"MOK enrollment pending {on} (Secure Boot is on; the DKMS-built module loads only once its key "
        f"is enrolled; {SOURCE}):",
        f"  1. {on}, as root: `mokutil --import {shlex.quote(cert)}` and choose a one-time password",
        "  2. reboot with someone at the console (MokManager boots on without enrolling after ~10 s)",
        '  3. in MokManager: "Enroll MOK", "Continue", "Yes", type the password, "Reboot"',
        f"  4. {resume}",
    ]
