"""A target whose reboot the harness performs, for ``provision apply --reboot``'s reboot play.

Ansible's ``ansible.builtin.reboot`` runs ``reboot_command`` on the host, then waits until
``boot_time_command`` prints something else and ``whoami`` succeeds. A chroot cannot reboot, so the
target's inventory sets both (the play's ``provision_reboot_command`` and
``provision_boot_time_command``): the reboot command only leaves a request under the target's
``/run``; a thread of the test process sees it and performs the reboot (:meth:`Target.reboot`:
sessions dropped, sshd restarted, ``/run`` flags cleared, a new boot id).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .target import BOOT_ID, REBOOT_REQUEST, Target

SCRIPT = "usr/local/sbin/harness-reboot"


@dataclass
class Reboots:
    """The reboots the harness performed: each one's boot id, in order."""

    boot_ids: list[str] = field(default_factory=list)


def install(target: Target) -> str:
    """Give ``target`` its reboot command and boot id and name both in its inventory; returns the boot id."""
    script = target.root / SCRIPT
    script.write_text(
        f"#!/bin/sh\n# Asks the test harness to reboot this chroot.\ntouch /run/{REBOOT_REQUEST}\n"
    )
    script.chmod(0o755)
    boot_id = target.root / BOOT_ID
    boot_id.parent.mkdir(parents=True, exist_ok=True)
    boot_id.write_text("first-boot\n")
    with target.inventory.open("a") as inventory:
        inventory.write(f"\n[all:vars]\nprovision_reboot_command=/{SCRIPT}\n")
        inventory.write(f"provision_boot_time_command='cat /{BOOT_ID}'\n")
    return "first-boot"


@contextmanager
def performing_reboots(target: Target, poll_s: float = 0.2) -> Iterator[Reboots]:
    """While inside, reboot ``target`` each time its reboot command asks."""
    done, stop = Reboots(), threading.Event()

    def watch() -> None:
        while not stop.wait(poll_s):
            if (target.root / "run" / REBOOT_REQUEST).exists():
                target.reboot()
                done.boot_ids.append((target.root / BOOT_ID).read_text().strip())

    thread = threading.Thread(target=watch, name="harness-reboots", daemon=True)
    thread.start()
    try:
        yield done
    finally:
        stop.set()
        thread.join(timeout=30)
