"""The hosts of one command, detected and planned the same way in every form: this machine is a fleet of one.

Both forms of the commands come here: ``provision plan|apply SPEC`` (this machine, or the
hosts of ``-i INV -l PATTERN``, all held to SPEC) and the fleet form (``-i INV`` without a SPEC,
or ``--fleet``: each host held to its own spec). Detection is :func:`detect_hosts` (this machine
in-process, or one ansible-runner run per distinct venv); planning is :func:`plan_host`, the
same for every host. A host Ansible could not read is still planned, on facts that are all
Unknown with Ansible's reason, and marked unreachable: every form reports the reason instead of
that plan (a blank machine's) and fails for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Any

from provision.catalog import Catalog, load_catalog
from provision.detect.facts import Facts, Unknown
from provision.errors import FactsError
from provision.files import check_inventory
from provision.findings import Finding
from provision.machines import RULE, RULE_SOURCE, same_machines_of
from provision.plan.models import Plan
from provision.plan.planner import make_plan
from provision.spec.models import Spec

NO_RESULT = "host unreachable: Ansible reported nothing for it"
LOCALHOST = "localhost"
"""This machine's host name in facts, plans and the local inventory."""


class HostState(StrEnum):
    """Where one host stands after planning, as the summary table counts it."""

    UNCHANGED = "unchanged"
    CHANGE = "to change"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"
    FAILED = "failed"
    """Reached, but a detection task failed there (the reason is the module's own message); or, in
    the fleet form, its own spec could not be loaded (:data:`SPEC_FAILED`), so it was not detected."""


DETECTION_FAILED = "host failed at "
"""How a detection failure's reason starts (:func:`provision.detect.runner.collector_results`)."""
SPEC_FAILED = "spec not loaded: "
"""How the reason starts for a fleet host whose own spec is missing or invalid: that host fails, the
others are planned (:func:`provision.fleet.orchestrate.planned_fleet`)."""


@dataclass(frozen=True)
class HostSpec:
    """The spec one host is held to.

    Attributes:
        spec: The spec.
        path: Where it came from, as plans record it (a spec file, or the spec file a saved
            plan was made from); None when unknown.
    """

    spec: Spec
    path: str | None

    @property
    def venv(self) -> str | None:
        """The venv detection reads torch from (the spec's ``python.venv``)."""
        return self.spec.python.venv if self.spec.python else None


@dataclass(frozen=True)
class Hosts:
    """The hosts of one command, how they are reached, and the spec each is held to.

    Attributes:
        inventory: The Ansible inventory; None for this machine (the one host ``localhost``,
            detected in-process and applied through a local connection).
        specs: Inventory hostname -> its spec, in inventory order.
        forks: Hosts Ansible detects at once; None keeps Ansible's default (5).
        from_raw: Read each host's facts from ``from_raw/<host>/`` (``detect -i INV --save-raw``)
            instead of detecting it: the fleet planned offline.
        save_raw: Also write each detected host's raw probe outputs to ``save_raw/<host>/``.
    """

    inventory: Path | None
    specs: dict[str, HostSpec]
    forks: int | None = None
    from_raw: Path | None = None
    save_raw: Path | None = None

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def keeping_raw(self, directory: Path) -> Hosts:
        """These hosts, detection also writing each host's raw probe outputs under ``directory``
        (read them back with :meth:`raw_of`); a fleet planned from saved outputs writes nothing."""
        if self.from_raw is not None:
            return self
        from provision.detect.runner import host_dir_name

        local = self.inventory is None  # this machine's outputs go to save_raw itself
        return replace(self, save_raw=directory / host_dir_name(LOCALHOST) if local else directory)

    def raw_of(self, directory: Path, host: str) -> Path:
        """Where ``host``'s raw probe outputs are after a detection by :meth:`keeping_raw` (``directory``)
        or, planning offline, in ``from_raw``."""
        from provision.detect.runner import host_dir_name

        return (self.from_raw or directory) / host_dir_name(host)

    def by_venv(self, names: Iterable[str] | None = None) -> dict[str | None, list[str]]:
        """The hosts ``names`` (default: all) by the venv their specs name: one detection run per group."""
        groups: dict[str | None, list[str]] = {}
        for host in self.names if names is None else names:
            groups.setdefault(self.specs[host].venv, []).append(host)
        return groups


@dataclass(frozen=True)
class HostPlan:
    """One host's plan, and why it could not be detected when it could not.

    Attributes:
        host: The inventory hostname.
        spec_path: The spec planned for it (None: a saved plan's spec that names no file).
        plan: The plan (on all-Unknown facts for an unreachable host); None when none was made.
        unreachable: Why the host could not be planned: Ansible's reason when it could not be
            detected, or why its spec could not be loaded (:data:`SPEC_FAILED`); else None.
    """

    host: str
    spec_path: Path | None
    plan: Plan | None
    unreachable: str | None = None

    @property
    def state(self) -> HostState:
        if self.unreachable is not None and self.unreachable.startswith((DETECTION_FAILED, SPEC_FAILED)):
            return HostState.FAILED
        if self.plan is None or self.unreachable is not None:
            return HostState.UNREACHABLE
        if self.plan.refused:
            return HostState.REFUSED
        return HostState.CHANGE if self.plan.changes else HostState.UNCHANGED


@dataclass(frozen=True)
class FleetPlan:
    """Every host's plan, in inventory order."""

    hosts: dict[str, HostPlan]

    def with_state(self, state: HostState) -> list[str]:
        """Hosts in ``state``, in inventory order."""
        return [h for h, p in self.hosts.items() if p.state is state]

    @property
    def plans(self) -> dict[str, Plan]:
        """Every plan made, unreachable hosts' included (the single form shows them all)."""
        return {h: p.plan for h, p in self.hosts.items() if p.plan is not None}

    @property
    def pending(self) -> dict[str, Plan]:
        """Plans of the hosts that have changes and no blocker: what apply runs."""
        return {h: p.plan for h, p in self.hosts.items() if p.plan and p.state is HostState.CHANGE}

    def exit_code(self, detailed: bool = False) -> int:
        """1 if a host is refused, unreachable or failed; else 2 when ``detailed`` and changes are
        pending; else 0."""
        if any(self.with_state(s) for s in (HostState.REFUSED, HostState.UNREACHABLE, HostState.FAILED)):
            return 1
        return 2 if detailed and self.pending else 0


def detect_hosts(
    inventory: Path | None,
    limit: str | None,
    venv: str | None,
    save_raw: Path | None = None,
    forks: int | None = None,
) -> dict[str, Facts]:
    """Facts of this machine (``inventory`` None) or of the inventory's hosts matching ``limit``.

    Args:
        inventory: The Ansible inventory; None detects this machine in-process.
        limit: An Ansible host pattern (``gpu:!gpu07``, ``a,b``); None for all hosts.
        venv: The venv torch is read from; None skips torch.
        save_raw: Also write every probe's raw output there: this machine's in ``save_raw``,
            an inventory's in ``save_raw/<host>/``.
        forks: Hosts Ansible detects at once (inventory only); None keeps Ansible's default (5).

    Raises:
        FactsError: The inventory is missing or names no host, or ansible-playbook failed
            before any host reported.
    """
    from provision.detect import runner as detect  # the slow imports only when detecting

    if inventory is None:
        facts = detect.detect_local(venv=venv, save_raw=save_raw)
        return {facts.host: facts}
    check_inventory(inventory)
    found = detect.detect_remote(str(inventory), limit, venv, forks=forks, save_raw=save_raw)
    if not found:
        matching = f" matching --limit {limit!r}" if limit else ""
        raise FactsError(f"{inventory}: no hosts{matching} (is it an Ansible inventory, INI or YAML?)")
    return found


def detect_by_venv(
    hosts: Hosts, names: Iterable[str] | None = None, without_spec: Iterable[str] = ()
) -> dict[str, Facts]:
    """Facts of the hosts ``names`` (default: all), one detection per distinct venv.

    The torch probe takes the venv as its argument, so hosts whose specs share a venv are
    detected in one ansible-runner run (Ansible's forks run them concurrently). Most fleets
    have one venv. With ``hosts.from_raw`` nothing runs: each host is read from its saved directory.
    ``without_spec``: inventory hosts not in ``hosts.specs`` (their own spec could not be loaded),
    detected all the same without the venv probes, in the run of the hosts whose spec names no venv.
    """
    chosen = list(hosts.names if names is None else names)
    groups = hosts.by_venv(chosen)
    if unheld := [h for h in without_spec if h not in hosts.specs]:
        groups.setdefault(None, []).extend(unheld)
    if hosts.from_raw is not None:
        from provision.detect.runner import facts_from_raw_hosts

        venvs = {h: venv for venv, group in groups.items() for h in group}
        return facts_from_raw_hosts(hosts.from_raw, list(venvs), venvs)
    facts: dict[str, Facts] = {}
    for venv, group in groups.items():
        limit = None if hosts.inventory is None else ",".join(group)
        facts |= detect_hosts(hosts.inventory, limit, venv, hosts.save_raw, hosts.forks)
    return facts


def unreachable_reason(facts: Facts | None) -> str | None:
    """Why a host could not be detected, or None when it was.

    :func:`provision.detect.runner.unknown_facts` marks such a host with every fact
    Unknown for Ansible's one reason (``host unreachable: ...``, ``host failed at ...``).
    """
    if facts is None:
        return NO_RESULT
    os_fact, kernel = facts.os, facts.kernel
    if isinstance(os_fact, Unknown) and isinstance(kernel, Unknown) and os_fact.unknown == kernel.unknown:
        return os_fact.unknown if os_fact.unknown.startswith("host ") else None
    return None


def plan_host(
    host: str,
    held: HostSpec,
    facts: Facts | None,
    catalog: Catalog,
    fleet_monitored: tuple[str, ...] = (),
    as_of: date | None = None,
) -> HostPlan:
    """Plan one host against its spec (pure): the one planning step of every form.

    ``fleet_monitored``: the hosts of the command with a monitoring section (scrape targets);
    ``as_of``: the day the driver branch's end of life is judged on (None: not judged).
    """
    from provision.detect.runner import unknown_facts

    reason = unreachable_reason(facts)
    read = facts if facts is not None else unknown_facts(host, NO_RESULT)
    plan = make_plan(
        held.spec, read, catalog, spec_path=held.path, fleet_monitored=fleet_monitored, as_of=as_of
    )
    return HostPlan(host, Path(held.path) if held.path else None, plan, reason)


def plan_facts(
    hosts: Hosts, facts: Mapping[str, Facts], catalog: Catalog | None = None, as_of: date | None = None
) -> FleetPlan:
    """Every host planned on ``facts`` (a host missing from them is unreachable), all as of one day:
    ``as_of``, or today (the controller's clock) when None; a saved plan passes its own ``as_of``."""
    cat = catalog or load_catalog()
    day = as_of or date.today()
    monitored = tuple(h for h, held in hosts.specs.items() if held.spec.monitoring is not None)
    fleet = monitored if hosts.inventory is not None else ()
    planned = {h: plan_host(h, held, facts.get(h), cat, fleet, day) for h, held in hosts.specs.items()}
    return refuse_same_machines(FleetPlan(planned), facts, local_hosts(hosts))


def local_hosts(hosts: Hosts) -> frozenset[str]:
    """The hosts of a live inventory command reached through ``ansible_connection=local`` (this
    machine), when there are two or more hosts; empty for this machine alone, one host, or a fleet
    planned from saved outputs (what a capture came through is not recorded)."""
    if hosts.inventory is None or hosts.from_raw is not None or len(hosts.specs) < 2:
        return frozenset()
    from provision.connection import LOCAL, connection_of, resolved_hosts

    found = resolved_hosts(str(hosts.inventory), ",".join(hosts.specs))
    return frozenset(
        h for h, variables in found.items() if h in hosts.specs and connection_of(variables) == LOCAL
    )


def refuse_same_machines(
    planned: FleetPlan, facts: Mapping[str, Facts], local: frozenset[str] = frozenset()
) -> FleetPlan:
    """``planned`` with a first blocker on every reached host whose machine ID another host of
    ``facts`` reports, or that is one of two or more ``local`` hosts (:mod:`provision.machines`):
    one machine named twice is changed by neither name; the other hosts are untouched."""
    same = same_machines_of({h: facts[h] for h in planned.hosts if h in facts}, local)
    hosts = dict(planned.hosts)
    for host, line in same.items():
        held = hosts[host]
        if held.plan is None or held.unreachable is not None:
            continue
        finding = Finding(rule=RULE, message=line, source=RULE_SOURCE, severity="blocker")
        plan = held.plan.model_copy(update={"blockers": (finding, *held.plan.blockers)})
        hosts[host] = replace(held, plan=plan)
    return FleetPlan(hosts)


def plan_hosts(hosts: Hosts, names: Iterable[str] | None = None, catalog: Catalog | None = None) -> FleetPlan:
    """Detect the hosts ``names`` (default: all) and plan each against its spec."""
    return plan_hosts_with_facts(hosts, names, catalog)[0]


def plan_hosts_with_facts(
    hosts: Hosts, names: Iterable[str] | None = None, catalog: Catalog | None = None
) -> tuple[FleetPlan, dict[str, Facts]]:
    """:func:`plan_hosts`, and the facts it planned on (apply's lock records them)."""
    chosen = list(hosts.names if names is None else names)
    some = replace(hosts, specs={h: hosts.specs[h] for h in chosen})
    facts = detect_by_venv(some)
    return plan_facts(some, facts, catalog), facts


def one_spec(inventory: Path | None, facts: Mapping[str, Facts], held: HostSpec) -> Hosts:
    """Every detected host held to one spec: the single-spec form as hosts."""
    return Hosts(inventory, dict.fromkeys(facts, held))


def host_line(host: HostPlan) -> str:
    """One line for ``host``: its plan's summary or why it could not be planned."""
    from provision.plan.render import summary

    if host.plan is None or host.unreachable is not None:
        return host.unreachable or "host unreachable"  # the reason names itself: unreachable or failed
    return summary(host.plan)


def fleet_plan_json(fleet_plan: FleetPlan) -> dict[str, Any]:
    """``plan --json``'s one document, every form (:data:`provision.jsonout.HOSTS_FORMAT`).

    Shape: ``{"format_version": 2, "summary": {state: [hosts]}, "hosts": [{"host", "state",
    "spec", "summary", "unreachable", "plan"}, ...]}`` in inventory order: ``state`` one of
    :class:`HostState`'s values, ``spec`` the spec file planned (null: none named),
    ``unreachable`` the reason the host could not be planned or null, ``plan`` the saved-plan
    document (what ``plan --out`` writes, unsealed) or null when no plan was made.
    """
    from provision.jsonout import HOSTS_FORMAT

    return {
        "format_version": HOSTS_FORMAT,
        "summary": {state.value: fleet_plan.with_state(state) for state in HostState},
        "hosts": [_host_json(p) for p in fleet_plan.hosts.values()],
    }


def _host_json(host: HostPlan) -> dict[str, Any]:
    return {
        "host": host.host,
        "state": host.state.value,
        "spec": None if host.spec_path is None else str(host.spec_path),
        "summary": host_line(host),
        "unreachable": host.unreachable,
        "plan": json.loads(host.plan.model_dump_json()) if host.plan and not host.unreachable else None,
    }
