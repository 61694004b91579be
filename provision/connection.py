"""How each inventory host is reached, as Ansible resolves it, and which Python runs there.

One rule for every path that runs a program on a host (direct detection, and every play:
detect, apply, verify): the host's interpreter is

1. the inventory's ``ansible_python_interpreter`` (or ``ansible.cfg``'s ``interpreter_python``
   when it is not one of the ``auto`` modes), as the user wrote it;
2. on ``ansible_connection=local`` without one: the interpreter running provision
   (``sys.executable``), which is what Ansible itself gives its implicit localhost
   ("ansible_python_interpreter: {{ ansible_playbook_python }}",
   https://docs.ansible.com/ansible/latest/inventory/implicit_localhost.html). Interpreter
   discovery on a local connection searches the controller's own PATH, where a version
   manager's shim (pyenv's ``python3.13`` with no such version installed) answers the probe
   and then fails every module: "Module result deserialization failed: No start of json char
   found" (issue 31);
3. otherwise none: on ssh and the other connections Ansible's discovery on the host decides
   in a play (https://docs.ansible.com/ansible-core/2.19/reference_appendices/interpreter_discovery.html),
   and direct detection runs ``python3``.

The Ansible imports are deferred: plan and validate read no inventory this way.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LOCAL = "local"
SSH = ("ssh", "smart")
AUTO_MODES = ("auto", "auto_legacy", "auto_silent", "auto_legacy_silent")
"""``interpreter_python`` values that mean discovery (Ansible's INTERPRETER_PYTHON setting)."""
LAYER_FILE = "provision-interpreters.json"
"""The inventory layer :func:`interpreter_layer` writes into a run directory."""


def connection_of(hostvars: Mapping[str, Any]) -> str:
    """The host's connection plugin name (``local``, ``ssh``, ``docker``...), Ansible's default ssh."""
    from ansible import constants  # type: ignore[import-untyped]

    return str(hostvars.get("ansible_connection") or constants.DEFAULT_TRANSPORT)


def configured_interpreter() -> str | None:
    """``ansible.cfg``'s (or ``ANSIBLE_PYTHON_INTERPRETER``'s) interpreter when it names one."""
    from ansible import constants

    value = constants.config.get_config_value("INTERPRETER_PYTHON")
    return None if value is None or str(value) in AUTO_MODES else str(value)


def host_python(hostvars: Mapping[str, Any]) -> str | None:
    """The interpreter by the module docstring's rule; None leaves it to Ansible's discovery."""
    explicit = hostvars.get("ansible_python_interpreter")
    if explicit is not None and str(explicit) not in AUTO_MODES:
        return str(explicit)
    if (configured := configured_interpreter()) is not None:
        return configured
    if connection_of(hostvars) == LOCAL:
        return sys.executable
    return None


def needs_interpreter(hostvars: Mapping[str, Any]) -> bool:
    """Whether a play must be told the host's interpreter: local, and neither the inventory nor
    the configuration names one (rule 2)."""
    explicit = hostvars.get("ansible_python_interpreter")
    named = explicit is not None and str(explicit) not in AUTO_MODES
    return not named and configured_interpreter() is None and connection_of(hostvars) == LOCAL


@contextmanager
def inventory_path(inventory: str) -> Iterator[str]:
    """A path Ansible's inventory manager reads: ``inventory`` itself (checked by the trust
    rule), or INI text written to a temporary file.

    Raises:
        UntrustedError: The inventory file or directory is refused by the trust rule.
    """
    from provision.files import check_inventory

    source = inventory_source(inventory)
    if Path(source).is_absolute() and Path(source).exists():
        check_inventory(Path(source))
        yield source
        return
    with tempfile.TemporaryDirectory(prefix="provision-inv-") as tmp:
        path = Path(tmp) / "hosts.ini"
        path.write_text(source, encoding="utf-8")
        yield str(path)


def inventory_source(inventory: Path | str) -> str:
    """What ansible-runner gets for ``inventory``: an absolute path when it names one, else the text."""
    path = Path(inventory)
    try:
        exists = path.exists()
    except OSError:  # inventory text too long to be a file name
        exists = False
    return str(path.resolve()) if exists else str(inventory)


def resolved_hosts(inventory: str, limit: str | None) -> dict[str, dict[str, Any]]:
    """Every host ``ansible-playbook -i inventory -l limit`` would run on, in inventory order,
    with its variables as Ansible merged them (group_vars, host_vars, precedence).

    An inventory file or directory is read once per command (:func:`provision.inventory.read_inventory`);
    INI text is parsed here.

    Raises:
        AnsibleError: Ansible cannot read the inventory.
        FactsError: The inventory is refused by the trust rule, or ``limit`` names no host or group.
    """
    from ansible.inventory.manager import InventoryManager  # type: ignore[import-untyped]
    from ansible.parsing.dataloader import DataLoader  # type: ignore[import-untyped]
    from ansible.vars.manager import VariableManager  # type: ignore[import-untyped]

    source = inventory_source(inventory)
    if Path(source).is_absolute() and Path(source).exists():  # the command's one read of it
        from provision.errors import FactsError
        from provision.inventory import read_inventory

        return {
            h.name: dict(h.variables) for h in read_inventory(Path(source), limit, error=FactsError).hosts
        }
    with inventory_path(inventory) as path:
        loader = DataLoader()
        manager = InventoryManager(loader=loader, sources=[path])
        variables = VariableManager(loader=loader, inventory=manager)
        if limit:
            manager.subset(limit)
        return {str(h.name): variables.get_vars(host=h) for h in manager.get_hosts("all")}


def interpreter_layer(hosts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """An Ansible YAML/JSON inventory giving each host that :func:`needs_interpreter` its
    interpreter (rule 2); None when no host needs one. Listed after the user's inventory, its
    host variables join theirs (later sources win, groups are kept)."""
    python = {"ansible_python_interpreter": sys.executable}
    chosen = {name: python for name, hostvars in hosts.items() if needs_interpreter(hostvars)}
    return {"all": {"hosts": chosen}} if chosen else None


def inventory_sources(run_dir: Path, inventory: Path | str, limit: str | None) -> list[str] | str:
    """What ansible-runner gets as its inventory for a run in ``run_dir``: the user's inventory,
    then, where a local host needs it, the interpreter layer (written to ``run_dir``).

    An inventory Ansible cannot read is passed on alone: the play then says why, in Ansible's words.
    """
    from ansible.errors import AnsibleError  # type: ignore[import-untyped]

    source = inventory_source(inventory)
    from provision.errors import ProvisionError

    try:
        layer = interpreter_layer(resolved_hosts(source, limit))
    except (AnsibleError, OSError, ProvisionError):
        return source
    if layer is None:
        return source
    if not (Path(source).is_absolute() and Path(source).exists()):  # INI text: a file, to list it
        text = run_dir / "provision-inventory.ini"
        text.write_text(source, encoding="utf-8")
        source = str(text)
    path = run_dir / LAYER_FILE
    path.write_text(json.dumps(layer), encoding="utf-8")
    return [source, str(path)]
