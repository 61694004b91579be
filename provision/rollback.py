"""``provision rollback [--to N]``: return hosts to a previous lock through the normal apply.

Peers that roll back (NixOS generations, ostree/bootc deployments) switch whole system images;
on apt the nearest equivalent is a lock of exact versions and reinstalling them (``apt-get
install pkg=version``), which works because NVIDIA's repository keeps old patch levels. So a
rollback is a plan, not a special path:

1. Read each host's locks (``/var/lib/provision``) and choose lock ``N`` (default: the one before
   the current lock).
2. The host's spec becomes the lock's spec, narrowed to the locked versions where the spec left
   them open and the repository's newest match would be another version (driver branch only,
   cuDNN or NCCL prefix). Pins and holds are the spec's, so they return with it.
3. Detect, plan, and refuse a host whose lock needs versions the repository no longer serves
   (``apt-cache madison`` on the host), naming each missing ``package=version``.
4. Apply like any plan (shown, confirmed, one Ansible run with the same roles, re-planned);
   a converged host gets a new lock, numbered after the others.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.console import Console

from provision.apply.views import JsonReport, SingleView
from provision.apply.workflow import ApplyOptions, apply_planned
from provision.catalog import Catalog, load_catalog
from provision.detect.facts import Facts, Unknown
from provision.errors import ProvisionError
from provision.findings import Finding
from provision.hosts import FleetPlan, Hosts, HostSpec, detect_by_venv, plan_facts
from provision.inventory import read_inventory
from provision.lock.model import LOCK_DIR, Lock
from provision.lock.store import HostLocks, read_locks, served_versions
from provision.os.base import PackageManager
from provision.os.select import os_family, package_manager

if TYPE_CHECKING:
    from provision.verify.hosts import HostVerify

MISSING_RULE = "rollback-versions-not-served"


def choose(locks: HostLocks, to: int | None) -> Lock:
    """Lock ``to`` of the host, or the one before its current lock.

    Raises:
        ProvisionError: The host has no lock, no earlier lock, or none numbered ``to``.
    """
    if locks.current is None:
        raise ProvisionError(f"{locks.host}: no lock in {LOCK_DIR}; nothing to roll back to")
    numbers = sorted(lock.number for lock in locks.history)
    if to is None:
        earlier = [n for n in numbers if n < locks.current.number]
        if not earlier:
            raise ProvisionError(f"{locks.host}: lock {locks.current.number} is the first; no earlier lock")
        to = earlier[-1]
    found = locks.number(to)
    if found is None:
        raise ProvisionError(f"{locks.host}: no lock {to}; the host has {', '.join(map(str, numbers))}")
    return found


def locked_spec(lock: Lock, catalog: Catalog, served: Mapping[str, tuple[str, ...]]) -> HostSpec:
    """The lock's spec, narrowed to its exact versions where the spec's own would resolve elsewhere."""
    spec = lock.spec
    pm = package_manager(os_family((), spec.os.distro))
    update: dict[str, object] = {}
    driver = spec.driver
    if driver.source == "nvidia-repo" and driver.version is None:
        metas = {
            catalog.naming(pm.package_format).driver_meta(driver.branch, f) for f in ("open", "proprietary")
        }
        locked = next((p for p in lock.packages if p.name in metas), None)
        if locked and _resolves_elsewhere(
            pm, f"{driver.branch}", locked.version, served.get(locked.name, ())
        ):
            update["driver"] = driver.model_copy(update={"version": pm.upstream(locked.version)})
    cuda = spec.cuda
    if cuda is not None:
        narrowed = {}
        runtimes = {
            "cudnn": catalog.naming(pm.package_format).cudnn(cuda.toolkit.major)[0],
            "nccl": catalog.naming(pm.package_format).nccl()[0],
        }
        for field, name in runtimes.items():
            prefix, locked = getattr(cuda, field), lock.package(name)
            if (
                prefix is not None
                and locked
                and _resolves_elsewhere(pm, str(prefix), locked.version, served.get(name, ()))
            ):
                narrowed[field] = pm.upstream(locked.version)
        if narrowed:
            update["cuda"] = cuda.model_copy(update=narrowed)
    exact = spec.model_copy(update=update) if update else spec
    return HostSpec(type(spec).model_validate(exact.model_dump(mode="json")), lock.spec_path)


def _resolves_elsewhere(pm: PackageManager, prefix: str, locked: str, served: tuple[str, ...]) -> bool:
    """Whether apt's newest served version within ``prefix`` is not the ``locked`` one."""
    matching = [v for v in served if (u := pm.upstream(v)) == prefix or u.startswith(prefix + ".")]
    newest = max(matching, key=functools.cmp_to_key(pm.compare), default=None)
    return newest is not None and newest != locked


def missing(lock: Lock, facts: Facts | None, served: Mapping[str, tuple[str, ...]]) -> list[str]:
    """``package=version`` of the lock that is neither installed now nor served by the repository."""
    installed = () if facts is None or isinstance(facts.packages, Unknown) else facts.packages
    have = {p.name: p.version for p in installed}
    return [
        f"{p.name}={p.version}"
        for p in lock.packages
        if have.get(p.name) != p.version and p.version not in served.get(p.name, ())
    ]


def refuse_missing(planned: FleetPlan, lost: Mapping[str, tuple[int, list[str]]]) -> FleetPlan:
    """``planned`` with a blocker on each host whose lock needs versions no longer served."""
    hosts = dict(planned.hosts)
    for host, (number, names) in lost.items():
        held = hosts.get(host)
        if not names or held is None or held.plan is None:
            continue
        finding = Finding(
            rule=MISSING_RULE,
            message=f"lock {number} needs versions the repository no longer serves: {', '.join(names)}",
            source=package_manager(os_family((), held.plan.spec.os.distro)).index_source,
            severity="blocker",
        )
        plan = held.plan.model_copy(update={"blockers": (*held.plan.blockers, finding)})
        hosts[host] = dataclasses.replace(held, plan=plan)
    return FleetPlan(hosts)


@dataclasses.dataclass(frozen=True)
class RollbackOptions:
    """The command line's choices for one rollback."""

    to: int | None
    inventory: Path | None
    limit: str | None
    apply: ApplyOptions


@dataclasses.dataclass(frozen=True)
class Planned:
    """A rollback detected and planned: the lock chosen for each host, the hosts held to the locks'
    specs, and their plans (a host whose lock needs versions no longer served refused)."""

    chosen: dict[str, Lock]
    hosts: Hosts
    planned: FleetPlan


def plan_rollback(
    inventory: Path | None,
    limit: str | None,
    to: int | Mapping[str, int] | None,
    forks: int | None = None,
) -> Planned:
    """Read the locks of the hosts (``limit``), choose each one's (``to``: one number for every
    host, or host -> its number), detect and plan the hosts against the locks' specs; inventory
    order.

    Raises:
        ProvisionError: A host has no lock to return to, or its locks could not be read.
    """
    found = read_locks(inventory, limit)  # in the order the hosts answered
    if inventory is not None:
        order = [h.name for h in read_inventory(inventory, limit).hosts if h.name in found]
        found = {h: found[h] for h in order} | found
    chosen = {
        host: choose(locks, to.get(host) if isinstance(to, Mapping) else to) for host, locks in found.items()
    }
    names = {host: [p.name for p in lock.packages] for host, lock in chosen.items()}
    served = {h: locks.served for h, locks in served_versions(inventory, names).items()}
    catalog = load_catalog()
    hosts = Hosts(inventory, {h: locked_spec(lock, catalog, served[h]) for h, lock in chosen.items()}, forks)
    facts = detect_by_venv(hosts)
    lost = {h: (lock.number, missing(lock, facts.get(h), served[h])) for h, lock in chosen.items()}
    return Planned(chosen, hosts, refuse_missing(plan_facts(hosts, facts, catalog), lost))


def show_chosen(chosen: Mapping[str, Lock], console: Console) -> None:
    """One line per host: the lock it goes back to."""
    for host, lock in chosen.items():
        console.print(
            f"{host}: rolling back to lock {lock.number} ({lock.created_at}, spec {lock.spec.name})"
        )


def rollback_workflow(options: RollbackOptions, *, as_json: bool, console: Console) -> int:
    """Run ``provision rollback``; returns apply's exit code (0 converged, 1 refused or failed).

    With ``as_json`` the outcome is one document, the shape of ``provision apply --json``.

    Raises:
        ProvisionError: A host has no lock to return to, or its locks could not be read.
    """
    report = JsonReport(as_json)
    try:
        done = plan_rollback(options.inventory, options.limit, options.to)
        show_chosen(done.chosen, console)
        label = f"rollback-{'-'.join(sorted({str(lock.number) for lock in done.chosen.values()}))}"
        return apply_planned(done.hosts, done.planned, options.apply, SingleView(console, report, label))
    finally:
        report.emit()


@dataclasses.dataclass
class RollbackAction:
    """A rolling rollback's per-host action (:class:`provision.fleet.rolling.HostAction`): each host
    of a wave back to its lock, chosen once before the first wave and kept in the record (a
    converged rollback records a new lock, so "the one before the current" would move).

    Attributes:
        inventory: The inventory.
        locks: Host -> the number of the lock it returns to.
        forks: Hosts Ansible works on at once.
        specs: Host -> the lock's spec it is held to, as last planned (verify checks against it).
    """

    inventory: Path
    locks: dict[str, int]
    forks: int | None = None
    specs: dict[str, HostSpec] = dataclasses.field(default_factory=dict)
    name: ClassVar[str] = "rollback"
    label: ClassVar[str] = "rollback"

    def plan(self, hosts: list[str]) -> tuple[Hosts, FleetPlan]:
        """Detect and plan ``hosts`` against their locks now."""
        done = plan_rollback(self.inventory, ",".join(hosts), self.locks, self.forks)
        self.specs |= done.hosts.specs
        return done.hosts, done.planned

    def verify(self, hosts: list[str]) -> dict[str, HostVerify]:
        """Verify ``hosts`` against their locks' specs (a host not planned yet is planned first)."""
        from provision.verify.hosts import verify_hosts

        if unplanned := [h for h in hosts if h not in self.specs]:
            self.plan(unplanned)
        held = Hosts(self.inventory, {h: self.specs[h] for h in hosts}, self.forks)
        return dict(verify_hosts(held, self.forks).hosts)
