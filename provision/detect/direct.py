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

Where the inventory asks for become (``ansible_become``, sudo, no become password, sudo's default
flags), the interpreter runs under ``sudo -H -n -u USER --``, each word quoted into the remote
string; ``-n``: a sudo that would ask fails at once with its own message, the host's cause.

A host on another connection (docker, paramiko, winrm), with a password, another become method or
flags, or with a templated (``{{ }}``) or vaulted connection variable goes through the play
(:func:`provision.detect.runner.detect_remote`), as does every host when
``PROVISION_REMOTE_DETECT=ansible`` is set. :func:`route` says which, and why: the one choice of
transport for detection, verify (:mod:`provision.verify.direct`), the support bundle's reads and
verify's lock record (these two ``as_root``, as their plays' ``become: true``).
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Literal

from provision.detect.fact import Probe

ENV_SWITCH = "PROVISION_REMOTE_DETECT"
"""``ansible`` sends every host through the detection play (for comparison, or a setup this misses)."""

BOOT = "import sys; exec(compile(sys.stdin.read(), 'provision-collector', 'exec'), {'__name__': 'provision'})"
"""The remote program: run the Python text on stdin (the collector and its probes)."""

DEFAULT_FORKS = 5
"""Hosts detected at once when ``--forks`` is not given: Ansible's default."""

_PASSWORDS = ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password")
COLLECTOR_TASK = "Run the detection collector."  # the play's task name (provision.detect.runner)


def payload(collector_source: str, probes: list[Probe]) -> bytes:
    """The program sent on stdin: the collector, then a call of it on ``probes`` (a Python literal)."""
    probes_json = json.dumps([p.to_json() for p in probes])
    call = f"\njson.dump(collect(json.loads({probes_json!r})), sys.stdout)\nsys.stdout.write('\\n')\n"
    return (collector_source + call).encode("utf-8")


def remote_command(python: str, become: Sequence[str] = ()) -> str:
    """The shell string ssh runs on the host: the interpreter (quoted) running :data:`BOOT`,
    under ``become`` (each word quoted)."""
    return shlex.join([*become, python, "-c", BOOT])


def _plain(value: object) -> bool:
    """Whether a connection value is usable as it is: not templated, not vaulted."""
    if value is None or isinstance(value, (int, bool)):
        return True
    vaulted = any(word in type(value).__name__ for word in ("Vault", "Encrypted"))
    return isinstance(value, str) and not vaulted and "{{" not in value and "{%" not in value


@dataclass(frozen=True)
class Route:
    """How one host is reached: a command of this machine, or Ansible's play and why.

    Attributes:
        transport: ``local`` (a program on this machine), ``ssh`` (one ssh command) or ``play``.
        argv: The command that runs :data:`BOOT` there; None for the play.
        why: Why the host goes through the play (the connection, a password...); None otherwise.
    """

    transport: Literal["local", "ssh", "play"]
    argv: list[str] | None = None
    why: str | None = None


def _play(why: str) -> Route:
    return Route("play", None, why)


def route(
    name: str,
    hostvars: Mapping[str, Any],
    ssh_options: Callable[[Mapping[str, Any]], dict[str, Any]],
    *,
    as_root: bool = False,
) -> Route:
    """How host ``name`` is reached: its command, or the play with the reason.

    Args:
        name: The inventory hostname.
        hostvars: The host's variables as Ansible merged them.
        ssh_options: Resolves the ssh connection plugin's options for ``hostvars`` (see
            :func:`_ansible_ssh_options`).
        as_root: Run as root, as a play with ``become: true`` does (the lock and support
            plays): sudo unless the connection's user is root already.
    """
    from provision import connection as conn

    connection = hostvars.get("ansible_connection") or conn.connection_of(hostvars)
    raw = hostvars.get("ansible_python_interpreter")
    if any(hostvars.get(k) for k in _PASSWORDS):
        return _play("a password is set (ssh here runs in batch mode)")
    if not _plain(raw) or not _plain(connection):
        return _play("a templated or vaulted connection variable")
    if connection != conn.LOCAL and connection not in conn.SSH:
        return _play(f"ansible_connection={connection} (the direct transport runs local and ssh hosts)")
    python = str(conn.host_python(hostvars) or "python3")
    options = ssh_options(hostvars) if connection != conn.LOCAL else {}
    if not all(_plain(v) for v in options.values()):
        return _play("a templated or vaulted ssh option")
    root = os.geteuid() == 0 if connection == conn.LOCAL else _ssh_user(options) == "root"
    become = become_prefix(hostvars, force=as_root and not root)
    if isinstance(become, str):
        return _play(become)
    if connection == conn.LOCAL:
        return Route("local", [*become, python, "-c", BOOT])
    return Route("ssh", ssh_argv(name, options, python, become))


def _ssh_user(options: Mapping[str, Any]) -> str:
    """The user ssh logs in as: the resolved ``remote_user``, else ssh's default, this user's name
    (``ssh_config`` may still name another: then sudo runs, as Ansible's become would)."""
    return str(options.get("remote_user") or getpass.getuser())


SUDO_FLAGS = ("-H", "-S", "-n")
"""Ansible's default ``become_flags`` for sudo (the sudo become plugin's ``become_flags`` default,
https://docs.ansible.com/ansible/latest/collections/ansible/builtin/sudo_become.html)."""


def become_prefix(hostvars: Mapping[str, Any], *, force: bool = False) -> list[str] | str:
    """The argv that runs a program as the become user, as Ansible's sudo become plugin would
    (``sudo -H -n -u USER --``); ``[]`` without become; a string: why only the play can do it
    (another method, a password, other flags). ``force``: become even where the inventory does
    not ask (a play's ``become: true``). The user, flags, executable and password are the sudo
    plugin's options as Ansible resolves them (inventory variables, ``ansible.cfg``,
    ``ANSIBLE_*``).

    ``-S`` (password on stdin) is left out: stdin carries the program, and ``-n`` makes sudo
    fail at once, with its own message, instead of asking for a password.
    """
    from ansible import constants  # type: ignore[import-untyped]
    from ansible.module_utils.parsing.convert_bool import boolean  # type: ignore[import-untyped]

    wanted = True if force else hostvars.get("ansible_become", constants.DEFAULT_BECOME)
    if not _plain(wanted) or not boolean(wanted, strict=False):
        return [] if _plain(wanted) else "a templated or vaulted ansible_become"
    method = hostvars.get("ansible_become_method") or constants.DEFAULT_BECOME_METHOD
    if method != "sudo":
        return f"ansible_become_method={method} (the direct transport becomes with sudo only)"
    options = _ansible_sudo_options(hostvars)
    if options["become_pass"]:
        return "a become password is set (sudo here runs with -n, never asking)"
    user, flags, exe = (options[k] for k in ("become_user", "become_flags", "become_exe"))
    if not all(_plain(v) for v in (user, flags, exe)) or tuple(shlex.split(str(flags or ""))) != SUDO_FLAGS:
        return f"become_flags {flags!r} or a templated become option (the direct transport runs sudo -H -n)"
    return [str(exe or "sudo"), "-H", "-n", "-u", str(user or "root"), "--"]


def _ansible_sudo_options(hostvars: Mapping[str, Any]) -> dict[str, Any]:
    """The sudo become plugin's options for a host, as Ansible resolves them."""
    from ansible.plugins.loader import become_loader  # type: ignore[import-untyped]

    plugin = become_loader.get("sudo")
    plugin.set_options(var_options=dict(hostvars))
    return {k: plugin.get_option(k) for k in ("become_user", "become_flags", "become_exe", "become_pass")}


def ssh_argv(name: str, options: Mapping[str, Any], python: str, become: Sequence[str] = ()) -> list[str]:
    """``ssh`` argv from the ssh plugin's resolved options (see the module docstring); ``become``:
    :func:`become_prefix`'s argv, shell-quoted into the remote command."""
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
    return [*argv, "--", str(options.get("host") or name), remote_command(python, become)]


_OPTIONS = ("host", "port", "remote_user", "private_key_file", "ssh_args", "ssh_common_args")
_MORE = ("ssh_extra_args", "ssh_executable", "timeout", "host_key_checking")


def _ansible_ssh_options(hostvars: Mapping[str, Any]) -> dict[str, Any]:
    """The ssh connection plugin's options for a host, as Ansible resolves them."""
    from ansible.playbook.play_context import PlayContext  # type: ignore[import-untyped]
    from ansible.plugins.loader import connection_loader

    plugin = connection_loader.get("ssh", PlayContext(), None)
    plugin.set_options(var_options=dict(hostvars))
    return {key: plugin.get_option(key) for key in (*_OPTIONS, *_MORE)}


def connections(inventory: str, limit: str | None) -> dict[str, list[str] | None]:
    """Every host ``ansible-playbook -i inventory -l limit`` would run on, in inventory order, with
    its collector command (None: detect it through the play); empty when Ansible cannot read the
    inventory (the play then reports why, in Ansible's words)."""
    return {name: r.argv for name, r in routes(inventory, limit).items()}


def routes(inventory: str, limit: str | None, *, as_root: bool = False) -> dict[str, Route]:
    """Every host ``ansible-playbook -i inventory -l limit`` would run on, in inventory order, with
    its :class:`Route` (``as_root``: see :func:`route`); empty when Ansible cannot read the
    inventory (the play then reports why)."""
    from ansible.errors import AnsibleError  # type: ignore[import-untyped]

    from provision.connection import resolved_hosts
    from provision.errors import ProvisionError

    try:
        hosts = resolved_hosts(inventory, limit)
        return {name: route(name, v, _ansible_ssh_options, as_root=as_root) for name, v in hosts.items()}
    except (AnsibleError, OSError, ProvisionError):
        return {}


def root_commands(inventory: str, hosts: Iterable[str]) -> dict[str, list[str]]:
    """The command that runs :data:`BOOT` as root on each of ``hosts`` the direct transport
    reaches (:func:`route` with ``as_root``, as a play's ``become: true``); the others, and every
    host when the transport is off (:func:`enabled`), are left to the caller's play."""
    wanted = list(hosts)
    found = routes(inventory, ",".join(wanted), as_root=True) if enabled() else {}
    return {h: r.argv for h, r in found.items() if h in wanted and r.argv is not None}


def enabled() -> bool:
    """Whether the direct transport is on (``PROVISION_REMOTE_DETECT`` is not ``ansible``)."""
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
        commands: Host -> its command (:func:`route`'s argv).
        program: :func:`payload`, written to each command's stdin.
        timeout: Seconds before a host's command is killed and the host reported failed.
        forks: Hosts at once; None for Ansible's default (5).
        on_result: Called in this thread, one host at a time.
    """
    run_each({h: (argv, program, timeout) for h, argv in commands.items()}, forks, on_result)


def _hint(rc: int, said: str) -> str:
    """What to change when the shell could not start the program (exit 126: not executable, 127:
    not found, POSIX's ``sh``): sudo, or else the host's interpreter."""
    if rc not in (126, 127):
        return ""
    return " (check the host's sudo, or ansible_become)" if "sudo" in said else INTERPRETER_HINT


INTERPRETER_HINT = " (set ansible_python_interpreter for the host)"
"""The play's advice for an interpreter that cannot run (:func:`provision.ansible.failure_message`)."""


Job = tuple[list[str], bytes, float]
"""One host's command, the program on its stdin, and its deadline in seconds."""


def run_each(
    jobs: Mapping[str, Job],
    forks: int | None,
    on_result: Callable[[str, str | dict[str, Any]], None],
    task: str = COLLECTOR_TASK,
) -> None:
    """Run each host's command with its own program, ``forks`` at a time; ``on_result(host,
    result)`` gets the program's JSON object or the reason it failed (``task`` names what
    failed there), as each host finishes, in this thread."""
    if not jobs:
        return
    with ThreadPoolExecutor(max_workers=min(forks or DEFAULT_FORKS, len(jobs))) as pool:
        futures = {pool.submit(run_one, *job, task): host for host, job in jobs.items()}
        for future in as_completed(futures):
            on_result(futures[future], future.result())


def run_one(
    argv: list[str], program: bytes, timeout: float, task: str = COLLECTOR_TASK
) -> str | dict[str, Any]:
    """One host's program JSON, or why there is none (``host unreachable: ...`` for ssh's own
    failure, exit 255; ``host failed at 'TASK': ...`` otherwise)."""
    failed = f"host failed at '{task}'"  # as the play reports a failed task
    try:
        done = subprocess.run(argv, input=program, capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return f"host unreachable: {argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return f"{failed}: no answer within {timeout:.0f} s"
    stderr = [line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    last = stderr[-1] if stderr else "no message"
    if done.returncode == 255 and argv[-1] != BOOT:  # ssh's own failure (a local command ends in BOOT)
        return f"host unreachable: {last}"
    if done.returncode != 0:
        return f"{failed}: rc {done.returncode}: {last}{_hint(done.returncode, last)}"
    try:
        parsed = json.loads(done.stdout)
    except (ValueError, RecursionError):  # malformed, 5000-digit numbers, nesting
        return f"{failed}: it printed no JSON: {done.stdout[:200]!r}"
    return parsed if isinstance(parsed, dict) else f"{failed}: it printed JSON that is not an object"
