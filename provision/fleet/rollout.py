"""A rolling apply as values: waves, the verify gate, drain hooks and the rollout record (pure).

A rollout applies the hosts with changes a wave at a time (``--max-unavailable N`` or ``P%``, the
rule of Ansible's ``serial``: a percentage of the hosts rounded down, at least one,
https://docs.ansible.com/ansible/latest/playbook_guide/playbooks_strategies.html#setting-the-batch-size-with-serial;
Kubernetes' ``maxUnavailable`` rounds down the same way,
https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#max-unavailable). After each
wave, verify is the gate: a host passes when its apply ended ok and no check fails that did not
fail before the rollout (its baseline, verified once before the first wave). A check that failed
before and still fails is named, not a regression: the gate stops on what the rollout made worse
(a GPU gone, bandwidth below the spec's threshold), as NVIDIA's GPU Operator's upgrade controller
holds a node that fails its validation.

The record (:class:`RolloutRecord`, JSON under the trusted runs directory) says at every moment
which hosts are done, failed or untouched, and who drained each host: a host found drained before
provision drained it (an administrator's drain) is never undrained by provision.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from provision.errors import ProvisionError
from provision.reboot.remote import DEFAULT_TIMEOUT_S

RECORD_FORMAT = 1
"""The rollout record's ``format_version``; a record of another version is refused, not guessed."""
HOST_PLACEHOLDER = "{host}"
"""The one placeholder a hook's argv may hold: the inventory hostname, substituted in place (no shell)."""

_COUNT = re.compile(r"^[1-9][0-9]{0,5}$")
_PERCENT = re.compile(r"^([1-9][0-9]?|100)%$")

HostState = Literal["untouched", "done", "failed", "left out"]
DrainedBy = Literal["admin", "provision"]
Status = Literal["running", "stopped", "done"]
Action = Literal["apply", "rollback"]


@dataclass(frozen=True)
class MaxUnavailable:
    """``--max-unavailable``: a host count, or a percentage of the rollout's hosts."""

    value: int
    percent: bool

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)

    def wave_size(self, total: int) -> int:
        """Hosts per wave out of ``total``: the count (at most ``total``), or ``total * P / 100``
        rounded down, at least 1 (Ansible's ``serial`` rule)."""
        if total <= 0:
            return 0
        size = math.floor(total * self.value / 100) if self.percent else self.value
        return max(1, min(size, total))


def parse_max_unavailable(text: str) -> MaxUnavailable:
    """``N`` (1 to 999999 hosts) or ``P%`` (1 to 100).

    Raises:
        ProvisionError: One line naming the forms accepted.
    """
    value = text.strip()
    if _COUNT.match(value):
        return MaxUnavailable(int(value), percent=False)
    if m := _PERCENT.match(value):
        return MaxUnavailable(int(m.group(1)), percent=True)
    raise ProvisionError(
        f"--max-unavailable {text!r}: give a number of hosts from 1 to 999999 (e.g. 2) or a "
        "percentage of them from 1% to 100% (e.g. 25%)"
    )


def waves(hosts: Sequence[str], limit: MaxUnavailable) -> list[list[str]]:
    """``hosts`` (inventory order) in waves of :meth:`MaxUnavailable.wave_size`; the last may be smaller."""
    size = limit.wave_size(len(hosts))
    return [list(hosts[i : i + size]) for i in range(0, len(hosts), size)] if size else []


@dataclass(frozen=True)
class Gate:
    """One host's verdict after its wave.

    Attributes:
        host: The inventory hostname.
        passed: Whether the host may stay in service and the rollout go on.
        reasons: Why it failed: the apply's outcome, or each regressed check as
            ``<check id>: <status before> -> fail: <detail>``.
        still_failing: Checks that failed before the rollout and still fail (not regressions).
    """

    host: str
    passed: bool
    reasons: tuple[str, ...] = ()
    still_failing: tuple[str, ...] = ()


def gate(
    host: str,
    applied_ok: bool,
    outcome: str,
    before: Mapping[str, str],
    after: Mapping[str, tuple[str, str]] | None,
    unreachable: str | None = None,
) -> Gate:
    """The gate's verdict for one host (see the module docstring).

    Args:
        applied_ok: Whether its apply ended unchanged or converged.
        outcome: The apply's outcome for it (``converged``, ``failed at ...``).
        before: Its baseline: check id -> status before the rollout.
        after: Check id -> (status, detail) of the verify after its wave; None when not verified.
        unreachable: Why verify could not read it after its wave, if it could not.
    """
    if not applied_ok:
        return Gate(host, False, (f"apply: {outcome}",))
    if unreachable is not None or after is None:
        return Gate(host, False, (f"verify: {unreachable or 'not verified'}",))
    regressed = tuple(
        f"{check}: {before.get(check, 'absent')} -> fail: {detail}"
        for check, (status, detail) in after.items()
        if status == "fail" and before.get(check) != "fail"
    )
    still = tuple(c for c, (status, _) in after.items() if status == "fail" and before.get(c) == "fail")
    return Gate(host, not regressed, regressed, still)


class HookSet(BaseModel):
    """The hooks of one host: commands run on the controller for it when its wave comes.

    Each is an argv list (no shell): ``{host}`` in an element is replaced by the inventory
    hostname, nothing else is expanded. ``drained`` asks whether the host is drained already
    (exit 0: yes, 1: no, anything else: the hook failed); it is required with ``undrain``, so
    that an administrator's own drain is seen and never undone.

    Attributes:
        drain: Take the host out of service before its wave (``[scontrol, update, nodename={host},
            state=drain, reason=provision]``).
        undrain: Put it back after it passed the gate.
        drained: Whether the host is drained already.
        timeout_s: Seconds each hook may run before it counts as failed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    drain: list[str] | None = None
    undrain: list[str] | None = None
    drained: list[str] | None = None
    timeout_s: float = Field(300.0, gt=0, le=3600)

    @field_validator("drain", "undrain", "drained")
    @classmethod
    def _argv(cls, argv: list[str] | None) -> list[str] | None:
        if argv is None:
            return None
        if not argv or not argv[0]:
            raise ValueError("an argv list whose first element is the program")
        if HOST_PLACEHOLDER in argv[0]:
            raise ValueError("the program (first element) may not hold {host}")
        if any("\0" in part for part in argv):
            raise ValueError("an argv element holds a NUL byte")
        return argv

    @model_validator(mode="after")
    def _admin_drain_seen(self) -> HookSet:
        if self.undrain is not None and self.drained is None:
            raise ValueError(
                "undrain needs drained too: without it an administrator's own drain would be undone"
            )
        return self


class Hooks(HookSet):
    """The fleet file's ``rollout:`` section: the hooks of every host, and ``hosts:``, a host or
    group name -> the hooks of those hosts instead (a Slurm partition and a Kubernetes pool in
    one fleet). Precedence as for specs: the host's own entry, then its group's."""

    hosts: dict[str, HookSet] = {}

    def for_hosts(self, groups: Mapping[str, Sequence[str]], names: Iterable[str]) -> dict[str, HookSet]:
        """Host -> its hooks, for every host of ``groups`` (host -> its groups).

        Args:
            names: Every host and group name of the inventory (``-l`` aside).

        Raises:
            ProvisionError: A ``hosts:`` key names no host or group, or two groups of one host
                name different hooks.
        """
        known = set(names)
        for key in self.hosts:
            if key not in known:
                raise ProvisionError(f"rollout.hosts.{key}: no host or group {key!r} in the inventory")
        return {host: self._of(host, of) for host, of in groups.items()}

    def _of(self, host: str, groups: Sequence[str]) -> HookSet:
        if host in self.hosts:
            return self.hosts[host]
        chosen = {g: self.hosts[g] for g in groups if g in self.hosts}
        if any(v != next(iter(chosen.values())) for v in chosen.values()):
            raise ProvisionError(
                f"{host}: its groups {', '.join(sorted(chosen))} name different rollout hooks"
            )
        return next(iter(chosen.values())) if chosen else self


def hook_argv(argv: Iterable[str], host: str) -> list[str]:
    """``argv`` with :data:`HOST_PLACEHOLDER` replaced by ``host`` in each element (no other expansion)."""
    return [part.replace(HOST_PLACEHOLDER, host) for part in argv]


class HostRecord(BaseModel):
    """One host of a rollout.

    Attributes:
        wave: Its wave (0-based); None for a host left out of the rollout.
        state: ``untouched`` (not started), ``done`` (applied and passed the gate), ``failed``
            (its apply, a hook or the gate failed: it stays drained), ``left out`` (no changes,
            refused or unreachable when planned).
        drained_by: Who drained it: ``admin`` (found drained: never undrained by provision),
            ``provision`` (undrained after it passes), or None.
        reasons: Why it failed or was left out.
    """

    model_config = ConfigDict(extra="forbid")

    wave: int | None = None
    state: HostState = "untouched"
    drained_by: DrainedBy | None = None
    reasons: list[str] = []


class RolloutRecord(BaseModel):
    """A rollout's record: what ``provision resume RECORD`` continues.

    Attributes:
        format_version: :data:`RECORD_FORMAT`.
        kind: Always ``rollout`` (tells it from a reboot's resume record).
        action: ``apply`` (each host to its spec) or ``rollback`` (each host to its lock).
        id: The record's name (UTC time), also its file name.
        inventory: The inventory (absolute path); it must pass the trust rule when resumed.
        fleet_file: The fleet file (absolute path), or None.
        spec: One spec for every host (absolute path), or None.
        limit: The ``-l`` pattern, or None.
        forks: ``--forks``, or None.
        max_unavailable: ``--max-unavailable`` as given (``2``, ``25%``).
        to: A rollback's ``--to`` as given (None: each host's lock before its current).
        locks: A rollback's host -> the number of the lock it returns to, chosen before the
            first wave (a converged rollback records a new lock: "the one before the current"
            would then name another).
        replace_held: ``--replace-held`` was given: the consent, confirmed with the rollout,
            holds for its resume too (the hosts of later waves move their held driver then).
        reboot: ``--reboot`` was given: resume reboots the later waves' hosts that need it, as
            the first run would have. A record written before this field reads as False, which
            is what its resume did.
        reboot_timeout_s: ``--reboot-timeout``: seconds a remote host has to come back.
        waves: The hosts of each wave.
        baseline: Host -> check id -> status, verified before the first wave.
        hosts: Host -> its record, inventory order.
        status: ``running``, ``stopped`` (a wave failed: resume continues it) or ``done``.
        run_dirs: The apply run directories of the waves so far.
    """

    model_config = ConfigDict(extra="forbid")

    format_version: int = RECORD_FORMAT
    kind: Literal["rollout"] = "rollout"
    action: Action = "apply"
    id: str
    inventory: str
    fleet_file: str | None = None
    spec: str | None = None
    limit: str | None = None
    forks: int | None = None
    max_unavailable: str
    to: int | None = None
    locks: dict[str, int] = {}
    replace_held: bool = False
    reboot: bool = False
    reboot_timeout_s: int = Field(DEFAULT_TIMEOUT_S, ge=30, le=7200)
    waves: list[list[str]]
    baseline: dict[str, dict[str, str]] = {}
    hosts: dict[str, HostRecord]
    status: Status = "running"
    run_dirs: list[str] = []

    def named(self, state: HostState) -> list[str]:
        """Hosts in ``state``, inventory order."""
        return [h for h, r in self.hosts.items() if r.state == state]

    def next_wave(self) -> int | None:
        """The first wave with a host not done (resume starts there); None when every wave is done."""
        for index, wave in enumerate(self.waves):
            if any(self.hosts[h].state != "done" for h in wave):
                return index
        return None

    def summary(self) -> str:
        """``done: a, b; failed: c; untouched: d, e`` (``none`` where empty)."""
        parts = [(s, self.named(s)) for s in ("done", "failed", "untouched")]
        return "; ".join(f"{s}: {', '.join(h) or 'none'}" for s, h in parts)


def new_record(
    record_id: str,
    *,
    inventory: str,
    max_unavailable: MaxUnavailable,
    pending: Sequence[str],
    left_out: Mapping[str, str],
    fleet_file: str | None = None,
    spec: str | None = None,
    limit: str | None = None,
    forks: int | None = None,
    action: Action = "apply",
    to: int | None = None,
    locks: Mapping[str, int] | None = None,
    replace_held: bool = False,
    reboot: bool = False,
    reboot_timeout_s: int = DEFAULT_TIMEOUT_S,
) -> RolloutRecord:
    """A record before the first wave: the ``pending`` hosts in their waves, untouched; each of
    ``left_out`` (host -> why) named."""
    cut = waves(pending, max_unavailable)
    hosts = {h: HostRecord(wave=i) for i, wave in enumerate(cut) for h in wave}
    hosts |= {h: HostRecord(state="left out", reasons=[why]) for h, why in left_out.items()}
    return RolloutRecord(
        id=record_id,
        inventory=inventory,
        fleet_file=fleet_file,
        spec=spec,
        limit=limit,
        forks=forks,
        action=action,
        to=to,
        locks=dict(locks or {}),
        replace_held=replace_held,
        reboot=reboot,
        reboot_timeout_s=reboot_timeout_s,
        max_unavailable=str(max_unavailable),
        waves=cut,
        hosts=hosts,
    )
