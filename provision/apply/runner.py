"""Run site.yml through ansible-runner for planned hosts and read the outcome from its events.

Every run gets its own directory (``<runs>/<UTC time>-<spec>/``) holding the
plans, the generated inventory, the verified keyring and ansible-runner's
``artifacts/`` (job events, stdout, rc, status). Ansible runs through
:func:`provision.ansible.run_play`, with its conventions (extravars in memory,
host keys checked, this interpreter's ansible-playbook).
"""

from __future__ import annotations

import hashlib
import json
import os
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
from provision.apply.rolevars import plan_problems
from provision.errors import ApplyError
from provision.os import command_line_failure
from provision.os import failure_cause as package_failure_cause
from provision.output import write_output
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
        ApplyError: A repository key could not be verified, or a plan's variables do not fit the
            roles' argument specs (nothing ran).
    """
    extravars = site_extravars(plans, run_dir)
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


def site_extravars(plans: dict[str, Plan], run_dir: Path) -> dict[str, Any]:
    """Check every plan's role variables, fill in the verified keyrings, save the plans and write
    each host's variables file into ``run_dir``; return site.yml's extravars.

    Raises:
        ApplyError: A key could not be verified, a variable holds template syntax, or the
            variables do not fit a role's argument specs (nothing is written but keyrings).
    """
    _refuse_templates({h: p.extravars.get("roles") for h, p in plans.items()})
    host_roles = {h: _filled_roles(h, p, run_dir) for h, p in plans.items()}
    _save_plans(plans, run_dir)
    return {"provision_plans": _write_host_vars(host_roles, run_dir)}


def _save_plans(plans: dict[str, Plan], run_dir: Path) -> None:
    for host, plan in plans.items():
        write_output(run_dir / f"plan-{host}.json", plan.model_dump_json(indent=2))


def _filled_roles(host: str, plan: Plan, run_dir: Path) -> dict[str, dict[str, Any]]:
    """The plan's role variables with each keyring variable set to the verified keyring's path,
    checked against the roles' argument specs.

    Raises:
        ApplyError: A key could not be verified, or the variables do not fit a role (nothing ran).
    """
    roles = plan.extravars.get("roles")
    keys = plan.extravars.get("keys") or {}
    if isinstance(roles, dict) and isinstance(keys, dict):
        roles = {
            role: {**variables, **{v: str(_keyring(src, run_dir)) for v, src in keys.get(role, {}).items()}}
            for role, variables in roles.items()
        }
    found = plan_problems(roles)
    if found:
        raise ApplyError(f"the plan for {host} does not fit the playbooks: {'; '.join(found)}; plan again")
    assert isinstance(roles, dict)
    return roles


def _keyring(source: dict[str, Any], run_dir: Path) -> Path:
    """Fetch (or read) and verify one signing key once per run; hosts with the same key share the file."""
    name = hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:16]
    dest = run_dir / f"keyring-{name}.gpg"
    if dest.exists():
        return dest
    if source.get("file"):
        raw = read_key_file(Path(source["file"]))
        write_verified_keyring(raw, source["file"], source["fingerprint"], dest)
    else:
        hosts = tuple(source.get("hosts") or KEY_HOSTS)
        fetch_verified_keyring(source["url"], source["fingerprint"], dest, hosts)
    return dest


def _write_host_vars(host_roles: dict[str, dict[str, dict[str, Any]]], run_dir: Path) -> dict[str, str]:
    """One JSON file per host (mode 0600) with every variable of its roles and ``provision_roles``,
    the roles that run there; site.yml includes it. Returns host -> the file's path."""
    directory = run_dir / "host-vars"
    directory.mkdir(mode=0o700, exist_ok=True)
    files: dict[str, str] = {}
    for n, (host, roles) in enumerate(host_roles.items()):
        merged: dict[str, Any] = {"provision_roles": list(roles)}
        for variables in roles.values():
            merged.update(variables)
        path = directory / f"{n}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(merged, handle, indent=1, sort_keys=True)
        files[host] = str(path)
    return files


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
    cause = package_failure_cause(text)
    if cause is None:
        return ansible.failure_message(res)
    msg = ansible.failure_message(res)
    # A role's own fail message already carries the cause (it quotes apt); keep its words.
    return msg if cause in msg else f"{_without_command(msg)}{cause}"


def _without_command(msg: str) -> str:
    """The message's lead-in without the package manager's command line (``'/usr/bin/apt-get -y ...
    install x' failed:``) says nothing the cause does not, so only a non-command lead-in ("apt cannot
    resolve ...: ") stays."""
    if command_line_failure(msg) or ": " not in msg:
        return ""
    return msg.split(": ", 1)[0] + ": "
