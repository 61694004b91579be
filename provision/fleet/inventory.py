"""Read an Ansible inventory (INI, YAML, a directory, with group_vars/host_vars) with Ansible itself.

Hand-parsing INI would miss ``:children``, ranges, ``group_vars/`` and variable
precedence; Ansible's ``InventoryManager`` and ``VariableManager`` give exactly what
``ansible-playbook -i INV -l LIMIT`` would target, with merged variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.files import read_bytes

SPEC_VAR = "provision_spec"


@dataclass(frozen=True)
class InventoryHost:
    """One host as Ansible sees it.

    Attributes:
        name: The inventory hostname.
        groups: Every group the host belongs to, ``all`` included.
        spec: The host's ``provision_spec`` variable after Ansible's precedence, or None.
        inventory_dir: The directory of the inventory source that defined the host.
    """

    name: str
    groups: tuple[str, ...]
    spec: str | None
    inventory_dir: Path


def inventory_hosts(inventory: Path, limit: str | None = None) -> list[InventoryHost]:
    """The hosts ``ansible-playbook -i inventory -l limit`` would run on, in inventory order.

    Args:
        inventory: An inventory file or directory (INI, YAML, or anything Ansible reads).
        limit: An Ansible host pattern (``gpu:!gpu07``, ``a100,h200``), or None for all.

    Returns:
        The matching hosts; empty when the pattern matches nothing.
    """
    if inventory.exists() and not inventory.is_dir():
        # Ansible would wait on a FIFO or read /dev/zero until memory runs out: the one reader first.
        read_bytes(inventory, what="inventory")
    # Ansible ships no type information; the import is slow, so only fleet paths pay for it.
    from ansible.inventory.manager import InventoryManager  # type: ignore[import-untyped]
    from ansible.parsing.dataloader import DataLoader  # type: ignore[import-untyped]
    from ansible.vars.manager import VariableManager  # type: ignore[import-untyped]

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(inventory)])
    variables = VariableManager(loader=loader, inventory=manager)
    if limit:
        manager.subset(limit)
    return [_host(h, variables.get_vars(host=h), inventory) for h in manager.get_hosts("all")]


def _host(host: Any, variables: dict[str, Any], inventory: Path) -> InventoryHost:
    spec = variables.get(SPEC_VAR)
    where = variables.get("inventory_dir") or (inventory if inventory.is_dir() else inventory.parent)
    return InventoryHost(
        name=str(host.name),
        groups=tuple(sorted(g.name for g in host.get_groups())),
        spec=str(spec) if spec is not None else None,
        inventory_dir=Path(str(where)),
    )
