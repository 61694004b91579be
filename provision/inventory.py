"""Read an Ansible inventory (INI, YAML, a directory, with group_vars/host_vars) with Ansible itself.

Hand-parsing INI would miss ``:children``, ranges, ``group_vars/`` and variable
precedence; Ansible's ``InventoryManager`` and ``VariableManager`` give exactly what
``ansible-playbook -i INV -l LIMIT`` would target, with merged variables.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.errors import ProvisionError, did_you_mean, name_list
from provision.files import check_inventory
from provision.unknown import because

SPEC_VAR = "provision_spec"


@dataclass(frozen=True)
class InventoryHost:
    """One host as Ansible sees it.

    Its merged variables (group_vars, host_vars, precedence: ~2 ms a host through Ansible's
    ``VariableManager``) are read only when asked, once: a command given one SPEC for every host
    never needs them offline.

    Attributes:
        name: The inventory hostname.
        groups: Every group the host belongs to, ``all`` included.
        inventory: The inventory given (file or directory).
    """

    name: str
    groups: tuple[str, ...]
    inventory: Path
    host: Any = field(compare=False, repr=False)
    read: _Read | None = field(default=None, compare=False, repr=False)

    @property
    def variables(self) -> Mapping[str, Any]:
        """Every variable of the host as Ansible merged them (connection variables included:
        :mod:`provision.connection` reads them)."""
        return self.read.variables_of(self.host) if self.read is not None else {}

    @property
    def spec(self) -> str | None:
        """The host's ``provision_spec`` variable after Ansible's precedence, or None."""
        spec = self.variables.get(SPEC_VAR)
        return str(spec) if spec is not None else None

    @property
    def inventory_dir(self) -> Path:
        """The directory of the inventory source that defined the host (Ansible's own
        ``inventory_dir`` host variable, set by the inventory plugin)."""
        where = self.host.vars.get("inventory_dir") if self.host is not None else None
        return Path(str(where or (self.inventory if self.inventory.is_dir() else self.inventory.parent)))


@dataclass(frozen=True)
class Inventory:
    """What one read of an inventory gives.

    Attributes:
        hosts: The hosts ``ansible-playbook -i inventory -l limit`` would run on, in inventory order.
        names: Every host name of the inventory, ``--limit`` aside.
        groups: Every group name (``all`` and ``ungrouped`` included).
    """

    hosts: list[InventoryHost]
    names: list[str]
    groups: list[str]


def read_inventory(
    inventory: Path, limit: str | None = None, *, error: type[ProvisionError] = ProvisionError
) -> Inventory:
    """Read ``inventory`` once: the hosts ``limit`` selects, and every host and group name.

    Args:
        inventory: An inventory file or directory (INI, YAML, or anything Ansible reads).
        limit: An Ansible host pattern (``gpu:!gpu07``, ``a100,h200``), or None for all.
        error: The ProvisionError subclass raised.

    Raises:
        ProvisionError: ``error`` when the inventory is missing or unreadable, or a part of ``limit``
            names no host or group (:func:`check_limit`).
    """
    read = _read(inventory, error)
    manager = read.manager
    with _quiet():
        manager.subset(None)
        names = [str(h.name) for h in manager.get_hosts("all")]
        if limit:
            _refuse_unmatched(manager, inventory, limit, error)
            manager.subset(limit)
        hosts = manager.get_hosts("all")
        manager.subset(None)
    chosen = [_host(h, read, inventory) for h in hosts]
    return Inventory(chosen, names, [str(g) for g in manager.groups])


@dataclass
class _Read:
    """One read of an inventory: Ansible's managers, and each host's merged variables once asked."""

    manager: Any
    variables: Any
    hostvars: dict[str, dict[str, Any]] = field(default_factory=dict)

    def variables_of(self, host: Any) -> dict[str, Any]:
        name = str(host.name)
        if name not in self.hostvars:
            self.hostvars[name] = self.variables.get_vars(host=host)
        return self.hostvars[name]


_READS: dict[str, _Read] = {}
"""The inventories read by the running command (resolved path -> its read): read once per command,
whoever asks (the host mapping, direct detection, each play's interpreter layer)."""


def forget() -> None:
    """Drop every inventory read: the CLI calls it as each command starts (a test process runs many
    commands over files it changes in between)."""
    _READS.clear()


def _read(inventory: Path, error: type[ProvisionError]) -> _Read:
    key = str(inventory.resolve())
    if key not in _READS:
        manager, loader = _manager(inventory, error)
        from ansible.vars.manager import VariableManager  # type: ignore[import-untyped]

        _READS[key] = _Read(manager, VariableManager(loader=loader, inventory=manager))
    return _READS[key]


def inventory_hosts(
    inventory: Path, limit: str | None = None, *, error: type[ProvisionError] = ProvisionError
) -> list[InventoryHost]:
    """The hosts ``ansible-playbook -i inventory -l limit`` would run on (:func:`read_inventory`);
    empty when the pattern, each of whose parts matches, leaves none."""
    return read_inventory(inventory, limit, error=error).hosts


def check_limit(inventory: Path, limit: str | None, *, error: type[ProvisionError] = ProvisionError) -> None:
    """Refuse, before Ansible runs, a ``--limit`` with a part that names no host or group of ``inventory``.

    Ansible only warns about such a part and runs on the others: a typo in ``gpu07,gpu80`` would
    leave ``gpu80`` out without a word. Parts that are patterns (``gpu*``, ``~regex``, ``gpu[0:3]``)
    must match at least one host; ``@file`` parts are left to Ansible.

    Raises:
        ProvisionError: ``error``, one line: the part, the closest name ("did you mean"), and the
            inventory's hosts; or the inventory is missing or unreadable.
    """
    if limit:
        manager = _read(inventory, error).manager
        with _quiet():
            manager.subset(None)
            _refuse_unmatched(manager, inventory, limit, error)


def _manager(inventory: Path, error: type[ProvisionError]) -> tuple[Any, Any]:
    """Ansible's ``InventoryManager`` over ``inventory`` and its ``DataLoader``."""
    # Ansible would wait on a FIFO, read /dev/zero until memory runs out, or run what another user
    # wrote: the one check first.
    check_inventory(inventory, error)
    # Ansible ships no type information; the import is slow, so only inventory paths pay for it.
    from ansible.inventory.manager import InventoryManager  # type: ignore[import-untyped]
    from ansible.parsing.dataloader import DataLoader  # type: ignore[import-untyped]

    loader = DataLoader()
    return _parsed(
        lambda: InventoryManager(loader=loader, sources=[str(inventory)]), inventory, error
    ), loader


# ansible-core 2.19: "[WARNING]: Failed to parse inventory with 'ini' plugin: <why>"; 2.16 to 2.18:
# "[WARNING]:  * Failed to parse <path> with ini plugin: <why>", wrapped at the terminal's width.
_PLUGIN_FAILED = re.compile(
    r"^\[WARNING\]:\s+(?:\*\s+)?Failed to parse (?:inventory|.+?) with '?([\w.]+)'? plugin: (.+)$",
    re.MULTILINE,
)
_WRAPPED = re.compile(r"\n(?!\[)")
_BLANK = re.compile(r"\n[ \t]*\n")
"""ansible-core 2.19 follows a warning with a blank line and its detail (the same reason again, then
``<<< caused by >>>`` and ``Origin: <path>``): the warning's own line ends there."""


def _parsed(build: Callable[[], Any], inventory: Path, error: type[ProvisionError]) -> Any:
    """``build()`` (Ansible's InventoryManager over ``inventory``) with a source no plugin can parse
    refused in one line naming each plugin's reason, instead of Ansible's warnings followed by an
    empty inventory (``inventory_unparsed_is_failed``, Ansible's configuration reference).
    Ansible's other warnings pass through to stderr as it printed them."""
    from ansible import constants  # type: ignore[import-untyped]
    from ansible.errors import AnsibleError  # type: ignore[import-untyped]

    said = io.StringIO()
    before = constants.INVENTORY_UNPARSED_IS_FAILED
    constants.INVENTORY_UNPARSED_IS_FAILED = True
    try:
        with contextlib.redirect_stderr(said):
            manager = build()
    except AnsibleError:
        unwrapped = "\n".join(_WRAPPED.sub(" ", part) for part in _BLANK.split(said.getvalue()))
        reasons = "; ".join(f"{plugin}: {why}" for plugin, why in _PLUGIN_FAILED.findall(unwrapped))
        raise error(
            because(
                f"{inventory}: Ansible cannot parse it as an inventory", reasons or "no plugin accepts it"
            )
        ) from None
    finally:
        constants.INVENTORY_UNPARSED_IS_FAILED = before
    sys.stderr.write(said.getvalue())
    return manager


def _refuse_unmatched(manager: Any, inventory: Path, limit: str, error: type[ProvisionError]) -> None:
    from ansible.inventory.manager import split_host_pattern

    parts = [one for part in split_host_pattern(limit) for one in split_host_pattern(part)]  # a,b:!c
    for name in (p.lstrip("!&") for p in parts):
        if name and not name.startswith("@") and not manager.get_hosts(pattern=name):
            known = [str(h.name) for h in manager.get_hosts("all")]
            hint = did_you_mean(name, [*known, *manager.groups])
            its = f"its hosts: {name_list(known)}"
            raise error(f"--limit {limit}: no host or group {name!r} in {inventory} ({its}){hint}")


@contextmanager
def _quiet() -> Iterator[None]:
    """Ansible's ``host_pattern_mismatch`` set to ``ignore`` meanwhile: :func:`_refuse_unmatched` says it
    in one line, instead of Ansible's ``[WARNING]: Could not match supplied host pattern``."""
    from ansible import constants

    before = constants.HOST_PATTERN_MISMATCH
    constants.HOST_PATTERN_MISMATCH = "ignore"
    try:
        yield
    finally:
        constants.HOST_PATTERN_MISMATCH = before


def _host(host: Any, read: _Read, inventory: Path) -> InventoryHost:
    return InventoryHost(
        name=str(host.name),
        groups=tuple(sorted(g.name for g in host.get_groups())),
        inventory=inventory,
        host=host,
        read=read,
    )
