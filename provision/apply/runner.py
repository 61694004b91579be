"""Run site.yml through ansible-runner for planned hosts and read the outcome from its events.

Every run gets its own directory (``<runs>/<UTC time>-<spec>/``) holding the
plans, the generated inventory, the verified keyring and ansible-runner's
``artifacts/`` (job events, stdout, rc, status). Ansible runs through
:func:`provision.ansible.run_play`, with its conventions (extravars in memory,
host keys checked, this interpreter's ansible-playbook).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision import ansible
from provision.ansible import default_runs_dir as default_runs_dir
from provision.ansible import local_inventory as local_inventory
from provision.ansible import new_run_dir as new_run_dir
from provision.ansible import refuse_templates as _refuse_templates
from provision.apply.keyring import fetch_verified_keyring, read_key_file, write_verified_keyring
from provision.errors import ApplyError
from provision.output import write_output
from provision.pkg import apt
from provision.plan.models import Plan
from provision.resources import data_dir
from provision.spec.models import KEY_HOSTS

EventHandler = ansible.EventHandler


@dataclass(frozen=True)
class HostResult:
    """What Ansible did on one host: task counts from ``playbook_on_stats`` and any failure."""

    host: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApplyResult:
    """Outcome of one ansible-runner run."""

    run_dir: Path
    status: str
    rc: int
    hosts: dict[str, HostResult] = field(default_factory=dict)
    left_running: tuple[str, ...] = ()
    """After Ctrl-C, processes of the run that could not be ended (``pid <n>: <command line>``)."""

    @property
    def interrupted(self) -> bool:
        """Stopped by Ctrl-C: every process of the run was ended (``canceled``)."""
        return self.status == "canceled"

    @property
    def succeeded(self) -> bool:
        return self.status == "successful" and all(
            not h.failed and not h.unreachable for h in self.hosts.values()
        )


def run_playbook(
    plans: dict[str, Plan],
    inventory: Path,
    run_dir: Path,
    on_event: EventHandler | None = None,
    limit: str | None = None,
    forks: int | None = None,
) -> ApplyResult:
    """Apply ``plans`` (inventory host name -> Plan) in one ansible-runner run.

    ``forks`` is how many hosts Ansible works on at once (Ansible's default, 5, when None).
    A failed or unreachable host leaves the play and the others finish: site.yml keeps
    Ansible's defaults (no ``any_errors_fatal``, no ``max_fail_percentage``).

    Raises:
        ApplyError: The repository key could not be verified (nothing ran).
    """
    host_vars = {h: p.extravars for h, p in plans.items()}
    _refuse_templates(host_vars)
    _save_plans(plans, run_dir)
    extravars = {
        "provision_plans": host_vars,
        "provision_keyring_file": str(_keyring(plans, run_dir)),
    }
    played = ansible.run_play(
        run_dir,
        "site.yml",
        inventory,
        project_dir=data_dir("playbooks"),
        extravars=extravars,
        tags=sorted({t for p in plans.values() for t in p.tags}),
        limit=limit,
        forks=forks,
        on_event=on_event,
    )
    return ApplyResult(
        run_dir=run_dir,
        status=played.status,
        rc=played.rc,
        hosts=host_results(played),
        left_running=played.left_running,
    )


def _save_plans(plans: dict[str, Plan], run_dir: Path) -> None:
    for host, plan in plans.items():
        write_output(run_dir / f"plan-{host}.json", plan.model_dump_json(indent=2))


def _keyring(plans: dict[str, Plan], run_dir: Path) -> Path:
    """Fetch and verify each distinct repository key once; all hosts share the file per key."""
    dest = run_dir / "nvidia-repository.gpg"
    repos = {
        json.dumps(r, sort_keys=True): r
        for p in plans.values()
        if (r := p.extravars.get("provision_repository")) and (r.get("key_url") or r.get("key_file"))
    }
    if len(repos) > 1:
        raise ApplyError("hosts in one run use different repository keys; apply them in separate runs")
    for repo in repos.values():
        if repo.get("key_file"):
            raw = read_key_file(Path(repo["key_file"]))
            write_verified_keyring(raw, repo["key_file"], repo["fingerprint"], dest)
        else:
            hosts = tuple(repo.get("key_hosts") or KEY_HOSTS)
            fetch_verified_keyring(repo["key_url"], repo["fingerprint"], dest, hosts)
    return dest


def host_results(played: ansible.PlayResult) -> dict[str, HostResult]:
    """Per host: its task counts from the final stats and its failures, every host the run named."""
    failures = _failures(played.events)
    return {
        h: HostResult(
            host=h,
            ok=played.count("ok", h),
            changed=played.count("changed", h),
            failed=played.count("failures", h),
            unreachable=played.count("dark", h),
            failures=tuple(failures.get(h, ())),
        )
        for h in sorted(played.stat_hosts() | set(failures))
    }


def _failures(events: Iterable[ansible.Event]) -> dict[str, list[str]]:
    """``task: first line of the message`` per host, for failures that were not ignored."""
    failures: dict[str, list[str]] = {}
    for event in events:
        if event.get("event") in ("runner_on_failed", "runner_on_unreachable"):
            data = event.get("event_data", {})
            if data.get("ignore_errors"):
                continue
            failures.setdefault(data.get("host", "?"), []).append(
                f"{data.get('task', '?')}: {failure_cause(data.get('res') or {})}"
            )
    return failures


def failure_cause(res: dict[str, Any]) -> str:
    """Why a task failed, in one line: the package manager's own cause where its output holds one
    (apt's ``E:`` lines, a failing maintainer script, unmet dependencies), else Ansible's message."""
    text = "\n".join(str(res.get(key) or "") for key in ("msg", "stderr", "stdout", "module_stderr"))
    cause = apt.failure_cause(text)
    if cause is None:
        return ansible.failure_message(res)
    msg = ansible.failure_message(res)
    # A role's own fail message already carries the cause (it quotes apt); keep its words.
    return msg if cause in msg else f"{_without_command(msg)}{cause}"


def _without_command(msg: str) -> str:
    """The message's lead-in without apt's command line: ``'/usr/bin/apt-get -y ... install x' failed:``
    says nothing the cause does not, so only a non-command lead-in ("apt cannot resolve ...: ") stays."""
    if msg.startswith(("'/usr/bin/apt", '"/usr/bin/apt', "/usr/bin/apt")) or ": " not in msg:
        return ""
    return msg.split(": ", 1)[0] + ": "
