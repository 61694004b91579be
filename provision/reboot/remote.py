"""Reboot remote hosts through ``playbooks/reboot.yml`` (``ansible.builtin.reboot``) and read each outcome.

One ansible-runner run over the hosts to reboot (Ansible's forks reboot them in parallel); a host
that fails or does not come back within the timeout is that host's failure, the others go on
(the play keeps Ansible's defaults: no ``any_errors_fatal``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from provision import ansible
from provision.resources import data_dir

REBOOT_TASK = "Reboot the host and wait until it is back"
INTERRUPTED = "interrupted (Ctrl-C) before it was back"
"""A host's outcome when Ctrl-C stopped the reboot play before its reboot task ended."""
DEFAULT_TIMEOUT_S = 600
"""Seconds a host has to come back (ansible.builtin.reboot's own default, ``reboot_timeout``): a
server's firmware POST with several GPUs and a DKMS-built module can take minutes."""


def reboot_hosts(
    inventory: Path,
    hosts: list[str],
    private_data_dir: Path,
    timeout_s: int,
    forks: int | None = None,
    on_back: Callable[[str, str | None], None] | None = None,
) -> dict[str, str | None]:
    """Reboot ``hosts`` of ``inventory`` and wait for each; host -> None when it came back, else why not.

    Args:
        private_data_dir: ansible-runner's directory for this run (inside the apply's run directory).
        timeout_s: Seconds each host has to come back (the module's ``reboot_timeout``).
        on_back: Called as each host's reboot ends: the host, and None or why it failed (progress).
    """
    private_data_dir.mkdir(parents=True, exist_ok=True)
    played = ansible.run_play(
        private_data_dir,
        "reboot.yml",
        inventory,
        project_dir=data_dir("playbooks"),
        extravars={"provision_reboot_timeout": int(timeout_s)},
        limit=",".join(hosts),
        forks=forks,
        on_event=_progress(on_back) if on_back is not None else None,
    )
    return outcomes(played, hosts)


def _progress(on_back: Callable[[str, str | None], None]) -> ansible.EventHandler:
    """An event handler calling ``on_back`` when a host's reboot task ends."""

    def handle(event: ansible.Event) -> None:
        data = event.get("event_data", {})
        host = data.get("host")
        if host is None or data.get("task") != REBOOT_TASK:
            return
        if event.get("event") == "runner_on_ok":
            on_back(host, None)
        elif event.get("event") in ("runner_on_failed", "runner_on_unreachable"):
            on_back(host, ansible.failure_message(data.get("res") or {}))

    return handle


def outcomes(played: ansible.PlayResult, hosts: Iterable[str]) -> dict[str, str | None]:
    """Per host: None when the reboot task ended ok, else its one-line reason (pure)."""
    found: dict[str, str | None] = {}
    for event in played.events:
        data = event.get("event_data", {})
        host, kind = data.get("host"), event.get("event")
        if host is None or (data.get("task") != REBOOT_TASK and kind != "runner_on_unreachable"):
            continue
        if kind == "runner_on_ok":
            found[host] = None
        elif kind in ("runner_on_failed", "runner_on_unreachable"):
            word = "unreachable" if kind == "runner_on_unreachable" else "reboot failed"
            found[host] = f"{word}: {ansible.failure_message(data.get('res') or {})}"
    if played.interrupted:
        left = f"; still running, could not be ended: {'; '.join(played.left_running)}"
        return {h: found.get(h, INTERRUPTED + (left if played.left_running else "")) for h in hosts}
    return {h: found.get(h, f"no result from Ansible ({played.stdout_tail})") for h in hosts}
