"""Remote detection as one ssh command per host; Ansible's detection play for the hosts it cannot reach so.

Starting ``ansible-playbook`` costs more than the whole detection (issue 13: a no-op apply on an
inventory host took 4.2 s, of which the collector ran ~0.2 s). Here each host is reached the way
Ansible's ssh connection would reach it, resolved by Ansible itself: the host's variables come
from Ansible's ``InventoryManager`` and ``VariableManager`` (group_vars, host_vars, precedence),
and the ssh options from Ansible's ssh connection plugin, which reads them in Ansible's order
(``ansible.cfg``, ``ANSIBLE_*`` environment, inventory variables): host, port, user, private key,
``ssh_args``, ``ssh_common_args``, ``ssh_extra_args``, ``ssh_executable``, connection timeout and
host key checking. The command is::

    ssh -o BatchMode=yes -o ControlMaster=no -o ControlPath=none ... -- HOST PYTHON -c BOOT

with the collector and its probes on ssh's stdin. The remote shell string is fixed text and the
host's interpreter (an inventory value, shell-quoted); no spec value is in it: the probes, which
carry the spec's venv, travel as Python data on stdin. Batch mode: no password prompt; unknown
host keys are refused unless the inventory or ``ansible.cfg`` turns checking off, as with Ansible.
No ssh master is started, so nothing is left running. ``ansible_connection=local`` runs the same
program on this machine.

A host on another connection (docker, paramiko, winrm), with a password, or with a templated
(``{{ }}``) or vaulted connection variable goes through the detection play
(:func:`provision.detect.runner.detect_remote`), as does every host when
``PROVISION_REMOTE_DETECT=ansible`` is set.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from provision.detect.fact import Probe

ENV_SWITCH = "PROVISION_REMOTE_DETECT"
"""``ansible`` sends every host through the detection play (for comparison, or a setup this misses)."""

BOOT = "import sys; exec(compile(sys.stdin.read(), 'provision-collector', 'exec'), {'__name__': 'provision'})"
"""The remote program: run the Python text on stdin (the collector and its probes)."""

DEFAULT_FORKS = 5
"""Hosts detected at once when ``--forks`` is not given: Ansible's default."""

_PASSWORDS = ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password")
_FAILED = "host failed at 'Run the detection collector.'"  # as the play reports a failed task


def payload(collector_source: str, probes: list[Probe]) -> bytes:
    """The program sent on stdin: the collector, then a call of it on ``probes`` (a Python literal)."""
    probes_json = json.dumps([p.to_json() for p in probes])
    call = f"\njson.dump(collect(json.loads({probes_json!r})), sys.stdout)\nsys.stdout.write('\\n')\n"
    return (collector_source + call).encode("utf-8")


def remote_command(python: str) -> str:
    """The shell string ssh runs on the host: the interpreter (quoted) running :data:`BOOT`."""
    return f"{shlex.quote(python)} -c {shlex.quote(BOOT)}"


def _plain(value: object) -> bool:
    """Whether a connection value is usable as it is: not templated, not vaulted."""
    if value is None or isinstance(value, (int, bool)):
        return True
    vaulted = any(word in type(value).__name__ for word in ("Vault", "Encrypted"))
    return isinstance(value, str) and not vaulted and "{{" not in value and "{%" not in value


def host_argv(
    name: str, hostvars: Mapping[str, Any], ssh_options: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> list[str] | None:
    """The command that runs the collector for host ``name``, or None when it needs Ansible.

    Args:
        name: The inventory hostname.
        hostvars: The host's variables as Ansible merged them.
        ssh_options: Resolves the ssh connection plugin's options for ``hostvars`` (see
            :func:`_ansible_ssh_options`).
    """
    from provision import connection as conn

    connection = hostvars.get("ansible_connection") or conn.connection_of(hostvars)
    raw = hostvars.get("ansible_python_interpreter")
    if any(hostvars.get(k) for k in _PASSWORDS) or not _plain(raw) or not _plain(connection):
        return None
    python = conn.host_python(hostvars) or "python3"
    if connection == conn.LOCAL:
        return [str(python), "-c", BOOT]
    if connection not in conn.SSH:
        return None
    options = ssh_options(hostvars)
    if not all(_plain(v) for v in options.values()):
        return None
    return ssh_argv(name, options, str(python))


def ssh_argv(name: str, options: Mapping[str, Any], python: str) -> list[str]:
    """``ssh`` argv from the ssh plugin's resolved options (see the module docstring)."""
    argv = [str(options.get("ssh_executable") or "ssh")]
    # ssh keeps the first value of an option: these come before the user's ssh_args.
    argv += ["-o", "BatchMode=yes", "-o", "ControlMaster=no", "-o", "ControlPath=none"]
    argv += ["-o", f"ConnectTimeout={int(options.get('timeout') or 10)}"]
    if options.get("host_key_checking") is False:
        argv += ["-o", "StrictHostKeyChecking=no"]
    for key in ("ssh_args", "ssh_common_args", "ssh_extra_args"):
        argv += shlex.split(str(options.get(key) or ""))
    if options.get("port"):
        argv += ["-p", str(options["port"])]
    if options.get("remote_user"):
        argv += ["-l", str(options["remote_user"])]
    if options.get("private_key_file"):
        argv += ["-i", os.path.expanduser(str(options["private_key_file"]))]
    return [*argv, "--", str(options.get("host") or name), remote_command(python)]


_OPTIONS = ("host", "port", "remote_user", "private_key_file", "ssh_args", "ssh_common_args")
_MORE = ("ssh_extra_args", "ssh_executable", "timeout", "host_key_checking")


def _ansible_ssh_options(hostvars: Mapping[str, Any]) -> dict[str, Any]:
    """The ssh connection plugin's options for a host, as Ansible resolves them."""
    from ansible.playbook.play_context import PlayContext  # type: ignore[import-untyped]
    from ansible.plugins.loader import connection_loader  # type: ignore[import-untyped]

    plugin = connection_loader.get("ssh", PlayContext(), None)
    plugin.set_options(var_options=dict(hostvars))
    return {key: plugin.get_option(key) for key in (*_OPTIONS, *_MORE)}


def connections(inventory: str, limit: str | None) -> dict[str, list[str] | None]:
    """Every host ``ansible-playbook -i inventory -l limit`` would run on, in inventory order, with
    its collector command (None: detect it through the play); empty when Ansible cannot read the
    inventory (the play then reports why, in Ansible's words)."""
    from ansible.errors import AnsibleError  # type: ignore[import-untyped]

    from provision.errors import ProvisionError

    try:
        return _connections(inventory, limit)
    except (AnsibleError, OSError, ProvisionError):
        return {}


def _connections(inventory: str, limit: str | None) -> dict[str, list[str] | None]:
    from provision.connection import resolved_hosts

    hosts = resolved_hosts(inventory, limit)
    return {name: host_argv(name, hostvars, _ansible_ssh_options) for name, hostvars in hosts.items()}


def enabled() -> bool:
    """Whether direct detection is on (``PROVISION_REMOTE_DETECT`` is not ``ansible``)."""
    return os.environ.get(ENV_SWITCH, "").lower() != "ansible"


def collect(
    commands: Mapping[str, list[str]],
    program: bytes,
    timeout: float,
    forks: int | None,
    on_result: Callable[[str, str | dict[str, Any]], None],
) -> None:
    """Run the collector on every host of ``commands``, ``forks`` at a time; ``on_result(host,
    result)`` gets the collector's JSON or the reason it failed, as each host finishes.

    Args:
        commands: Host -> the command of :func:`host_argv`.
        program: :func:`payload`, written to each command's stdin.
        timeout: Seconds before a host's command is killed and the host reported failed.
        forks: Hosts at once; None for Ansible's default (5).
        on_result: Called in this thread, one host at a time.
    """
    if not commands:
        return
    with ThreadPoolExecutor(max_workers=min(forks or DEFAULT_FORKS, len(commands))) as pool:
        futures = {pool.submit(run_one, argv, program, timeout): host for host, argv in commands.items()}
        for future in as_completed(futures):
            on_result(futures[future], future.result())


def run_one(argv: list[str], program: bytes, timeout: float) -> str | dict[str, Any]:
    """One host's collector JSON, or why there is none (``host unreachable: ...`` for ssh's own
    failure, exit 255; ``host failed at ...`` otherwise)."""
    try:
        done = subprocess.run(argv, input=program, capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return f"host unreachable: {argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return f"{_FAILED}: no answer within {timeout:.0f} s"
    stderr = [line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    last = stderr[-1] if stderr else "no message"
    if done.returncode == 255 and argv[-1] != BOOT:  # ssh's own failure (a local command ends in BOOT)
        return f"host unreachable: {last}"
    if done.returncode != 0:
        return f"{_FAILED}: rc {done.returncode}: {last}"
    try:
        parsed = json.loads(done.stdout)
    except (ValueError, RecursionError):  # malformed, 5000-digit numbers, nesting
        return f"{_FAILED}: collector printed no JSON: {done.stdout[:200]!r}"
    return parsed if isinstance(parsed, dict) else f"{_FAILED}: collector printed JSON that is not an object"
