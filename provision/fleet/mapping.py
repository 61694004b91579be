"""Map each inventory host to its spec: a ``provision_spec`` variable, a fleet file, or one spec for all.

A fleet file is a small YAML document next to (or naming) the inventory::

    inventory: hosts.ini            # relative to this file; -i on the command line wins
    specs:                          # a host or group name -> spec, relative to this file
      a100: specs/dual-a100x.yaml
      gpu07: specs/h200-ubuntu2404.yaml
    rollout:                        # optional: hooks of `apply --max-unavailable` (docs/fleets.md)
      drained: [/usr/local/sbin/lab-drained, "{host}"]
      drain: [scontrol, update, "nodename={host}", state=drain, reason=provision]
      undrain: [scontrol, update, "nodename={host}", state=resume]

Precedence for one host: a spec given on the command line, then the fleet file's entry
for the host, then its entry for a group the host is in, then the host's
``provision_spec`` variable (Ansible's own host/group variable precedence, the path
relative to the inventory's directory).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from ruamel.yaml.comments import CommentedMap

from provision.errors import ProvisionError, did_you_mean, name_list
from provision.files import locate, plain_data, read_yaml
from provision.fleet.rollout import Hooks
from provision.inventory import SPEC_VAR, Inventory, InventoryHost, read_inventory
from provision.models import accepted_keys


class FleetError(ProvisionError):
    """The inventory, the fleet file or the host-to-spec mapping cannot be used."""


class FleetFile(BaseModel):
    """The fleet file's contents (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inventory: str | None = None
    specs: dict[str, str] = {}
    rollout: Hooks | None = None


@dataclass(frozen=True)
class Fleet:
    """The hosts of one run and the spec file of each.

    Attributes:
        inventory: The Ansible inventory the runs use.
        specs: Inventory hostname -> spec path, in inventory order, after ``--limit``.
        forks: Hosts Ansible works on at once (``--forks``); None keeps Ansible's default (5).
        from_raw: Plan offline from ``from_raw/<host>/`` (``--from-raw``) instead of detecting.
        save_raw: Also write each detected host's raw outputs to ``save_raw/<host>/`` (``--save-raw``).
    """

    inventory: Path
    specs: dict[str, Path]
    forks: int | None = None
    from_raw: Path | None = None
    save_raw: Path | None = None

    @property
    def hosts(self) -> list[str]:
        return list(self.specs)


def load_fleet(
    inventory: Path | None, fleet_file: Path | None = None, limit: str | None = None, spec: Path | None = None
) -> Fleet:
    """Resolve which hosts a fleet run targets and the spec of each.

    Args:
        inventory: The Ansible inventory (``-i``); may be None when the fleet file names one.
        fleet_file: A fleet file (``--fleet``), or None.
        limit: An Ansible host pattern (``-l``).
        spec: One spec for every host; overrides any mapping.

    Raises:
        FleetError: No inventory, a bad fleet file, no host matched, or hosts without a spec.
    """
    mapping, data = _read(fleet_file) if fleet_file else (FleetFile(), None)
    base = fleet_file.parent if fleet_file else Path.cwd()
    source = _inventory_of(inventory, mapping, base)
    read = read_inventory(source, limit, error=FleetError)
    if fleet_file is not None:
        _refuse_unknown_names(fleet_file, data, mapping, read, source)
    hosts = read.hosts
    if not hosts:
        raise FleetError(f"{source}: no host matches {limit or 'all'!r}")
    specs = {h.name: spec or host_spec(h, mapping, base) for h in hosts}
    missing = [h for h, s in specs.items() if s is None]
    if missing:
        raise FleetError(
            f"no spec for {', '.join(missing)}: set {SPEC_VAR} in the inventory, map them in a fleet "
            "file, pass a SPEC, or leave them out with --limit"
        )
    return Fleet(inventory=source, specs={h: s for h, s in specs.items() if s is not None})


def host_spec(host: InventoryHost, mapping: FleetFile, base: Path) -> Path | None:
    """The spec of ``host`` by the precedence in the module docstring; None when it has none.

    Raises:
        FleetError: The fleet file maps two of the host's groups to different specs.
    """
    if host.name in mapping.specs:
        return base / mapping.specs[host.name]
    by_group = {mapping.specs[g] for g in host.groups if g in mapping.specs}
    if len(by_group) > 1:
        raise FleetError(f"{host.name}: its groups map to different specs ({', '.join(sorted(by_group))})")
    if by_group:
        return base / by_group.pop()
    return host.inventory_dir / host.spec if host.spec else None


def fleet_inventory(inventory: Path | None, fleet_file: Path | None) -> Path:
    """The inventory of a run: ``-i``, else the one the fleet file names (relative to it).

    Raises:
        FleetError: Neither names one, the inventory does not exist, or the fleet file is bad.
    """
    mapping = read_fleet_file(fleet_file) if fleet_file else FleetFile()
    return _inventory_of(inventory, mapping, fleet_file.parent if fleet_file else Path.cwd())


def _inventory_of(inventory: Path | None, mapping: FleetFile, base: Path) -> Path:
    source = inventory or (base / mapping.inventory if mapping.inventory else None)
    if source is None:
        raise FleetError("no inventory: pass -i INVENTORY or name one in the fleet file")
    if not source.exists():
        raise FleetError(f"{source}: no such inventory")
    return source


def read_fleet_file(path: Path) -> FleetFile:
    """Parse and validate a fleet file.

    Raises:
        FleetError: Missing file, invalid YAML, or unknown/mistyped keys: one ``file:line:column:
            key: message`` line, with "did you mean" for a misspelt key.
    """
    return _read(path)[0]


def _read(path: Path) -> tuple[FleetFile, Any]:
    """The fleet file and its YAML (ruamel's round-trip nodes, which keep each key's line)."""
    data = read_yaml(path, what="fleet", error=FleetError, typ="rt")
    if data is not None and not isinstance(data, CommentedMap):
        raise FleetError(f"{path}:1:1: a fleet file is a mapping (specs:, ...), not a {type(data).__name__}")
    try:
        return FleetFile.model_validate(plain_data(data) or {}), data
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        line, col = locate(data, loc)
        field = ".".join(str(p) for p in loc)
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            keys = accepted_keys(FleetFile, loc[:-1])
            has = ", ".join(f"{k}:" for k in keys)
            message = f"unknown key (a fleet file has {has}){did_you_mean(str(loc[-1]), keys)}"
        raise FleetError(f"{path}:{line}:{col}: {field}: {message}") from None


def _refuse_unknown_names(
    path: Path, data: Any, mapping: FleetFile, inventory: Inventory, source: Path
) -> None:
    """Refuse a ``specs:`` key that names no host or group of the inventory (``--limit`` aside): a typo
    that would leave its hosts on another spec, or on none, without a word.

    Raises:
        FleetError: ``file:line:column: specs.KEY: ...`` with the closest name and the inventory's names.
    """
    known = [*inventory.names, *inventory.groups]
    for key in mapping.specs:
        if key not in known:
            line, col = locate(data, ("specs", key))
            groups = name_list([g for g in inventory.groups if g not in ("all", "ungrouped")])
            raise FleetError(
                f"{path}:{line}:{col}: specs.{key}: no host or group {key!r} in {source} (its hosts: "
                f"{name_list(inventory.names)}; groups: {groups}){did_you_mean(key, known)}"
            )
