"""``provision apply|rollback --max-unavailable``: a rolling apply or rollback over a fleet, and
``provision resume`` of one.

One wave runner for both: what it does to each host is a :class:`HostAction`, :class:`ApplyAction`
(the host's spec) or :class:`provision.rollback.RollbackAction` (the host's lock, chosen once
before the first wave and kept in the record). The sequence (:mod:`provision.fleet.rollout` holds
its rules as values):

1. Detect and plan every host (against its spec, or its lock's); the hosts with changes are cut
   into waves; the others are left out and named. A dry run shows the waves and stops.
2. Confirm once; verify the hosts with changes (the baseline); write the record.
3. Per wave: for each host, ask ``drained`` (an administrator's drain is remembered), run
   ``drain`` unless it is drained already; detect, plan and apply the wave through the one apply
   sequence (:func:`provision.apply.workflow.apply_planned`); verify the wave (against the specs
   it was planned with); the gate judges each host against its baseline. Hosts that pass are
   undrained (never one an administrator drained); a host that fails stays drained, the rollout
   stops there and names the hosts done, failed and untouched. Nothing of a later wave is touched.
4. ``provision resume RECORD`` continues from the first wave not done: its failed hosts again,
   then the rest, with the same baseline and the drains remembered.

Hooks run on the controller as argv lists (no shell), their program checked by the trust rule
first, since root runs it. The record is written atomically (mode 0600) after every change, in
``<runs dir>/rollouts/``; resume reads it, the inventory and the fleet file it names through the
trust rule (:mod:`provision.trust`).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from rich.console import Console
from rich.markup import escape

from provision import jsonout
from provision.apply.workflow import INTERRUPTED, ApplyOptions, apply_planned, confirm
from provision.errors import Interrupted, ProvisionError
from provision.fleet.apply import FleetJsonReport, FleetView
from provision.fleet.mapping import Fleet, FleetError, load_fleet
from provision.fleet.orchestrate import planned_fleet
from provision.fleet.rollout import (
    RECORD_FORMAT,
    Gate,
    HookSet,
    MaxUnavailable,
    RolloutRecord,
    gate,
    hook_argv,
    new_record,
    parse_max_unavailable,
)
from provision.fleet.summary import render_fleet_plan
from provision.hosts import FleetPlan, Hosts, HostState

if TYPE_CHECKING:
    from provision.verify.hosts import HostVerify

RECORDS = "rollouts"
"""The directory of rollout records under the runs directory."""
JSON_FORMAT = jsonout.HOSTS_FORMAT
"""``format_version`` of ``apply|rollback --max-unavailable --json`` and ``resume --json`` of a
rollout: the hosts form."""


class HostAction(Protocol):
    """What a wave does to its hosts: plan them now, and verify them after the apply.

    Attributes:
        name: The record's ``action`` (``apply``, ``rollback``).
        label: Names each wave's run directory (``<UTC time>-<label>``).
    """

    name: ClassVar[str]
    label: ClassVar[str]

    def plan(self, hosts: list[str]) -> tuple[Hosts, FleetPlan]:
        """Detect and plan ``hosts`` now: the hosts held to their targets, and the plans."""
        ...

    def verify(self, hosts: list[str]) -> Mapping[str, HostVerify]:
        """Verify ``hosts`` against the targets they were planned with."""
        ...


@dataclasses.dataclass(frozen=True)
class ApplyAction:
    """A rolling apply's action: each host to its own spec (:func:`planned_fleet`)."""

    fleet: Fleet
    name: ClassVar[str] = "apply"
    label: ClassVar[str] = "fleet"

    def part(self, hosts: list[str]) -> Fleet:
        return dataclasses.replace(self.fleet, specs={h: self.fleet.specs[h] for h in hosts})

    def plan(self, hosts: list[str]) -> tuple[Hosts, FleetPlan]:
        return planned_fleet(self.part(hosts))

    def verify(self, hosts: list[str]) -> Mapping[str, HostVerify]:
        from provision.fleet.verify import verify_fleet

        return verify_fleet(self.part(hosts), self.fleet.forks).hosts


@dataclasses.dataclass(frozen=True)
class Rollout:
    """What a rollout needs besides its record: the action, the hosts' hooks, the apply options.

    Attributes:
        action: What each wave does to its hosts (apply their specs, or roll them back).
        hooks: Host -> its hooks from the fleet file's ``rollout:`` section; a host not in it
            runs no hook.
        options: The apply options (confirmed once: every wave runs with ``yes``).
        console: Where progress goes (stderr with ``--json``).
        path: The record's file.
    """

    action: HostAction
    hooks: Mapping[str, HookSet]
    options: ApplyOptions
    console: Console
    path: Path


def rolling_apply(
    fleet: Fleet,
    max_unavailable: str,
    options: ApplyOptions,
    console: Console,
    *,
    fleet_file: Path | None = None,
    spec: Path | None = None,
    limit: str | None = None,
    as_json: bool = False,
) -> int:
    """Run a rolling apply (see the module docstring); returns the exit code: 0 every wave passed
    (and no host was left out for a refusal or unreachability), 1 otherwise.

    Raises:
        ProvisionError: A bad ``--max-unavailable``, no confirmation, or a refusal before anything
            changed (nothing was touched).
    """
    limit_value = parse_max_unavailable(max_unavailable)
    planned = planned_fleet(fleet)[1]
    render_fleet_plan(planned, console)
    record = _new_record(
        planned,
        limit_value,
        inventory=fleet.inventory,
        fleet_file=fleet_file,
        spec=str(spec.resolve()) if spec else None,
        limit=limit,
        forks=fleet.forks,
        replace_held=options.replace_held,
        reboot=options.reboot.enabled,
        reboot_timeout_s=options.reboot.timeout_s,
    )
    hooks = hooks_of(fleet.inventory, fleet.hosts, fleet_file)
    return _start(ApplyAction(fleet), hooks, record, planned, limit_value, options, console, as_json)


def rolling_rollback(
    inventory: Path,
    to: int | None,
    max_unavailable: str,
    options: ApplyOptions,
    console: Console,
    *,
    fleet_file: Path | None = None,
    limit: str | None = None,
    as_json: bool = False,
) -> int:
    """Run a rolling rollback: each host back to lock ``to`` (None: the one before its current),
    the waves, hooks, gate, stop and record of :func:`rolling_apply`; the same exit codes.

    Raises:
        ProvisionError: A bad ``--max-unavailable``, a host without a lock to return to, no
            confirmation, or a refusal before anything changed (nothing was touched).
    """
    from provision.rollback import RollbackAction, plan_rollback, show_chosen

    limit_value = parse_max_unavailable(max_unavailable)
    done = plan_rollback(inventory, limit, to, options.forks)
    show_chosen(done.chosen, console)
    render_fleet_plan(done.planned, console)
    locks = {h: lock.number for h, lock in done.chosen.items()}
    record = _new_record(
        done.planned,
        limit_value,
        inventory=inventory,
        fleet_file=fleet_file,
        limit=limit,
        forks=options.forks,
        action="rollback",
        to=to,
        locks=locks,
        replace_held=options.replace_held,
        reboot=options.reboot.enabled,
        reboot_timeout_s=options.reboot.timeout_s,
    )
    action = RollbackAction(inventory, locks, options.forks, dict(done.hosts.specs))
    hooks = hooks_of(inventory, list(done.planned.hosts), fleet_file)
    return _start(action, hooks, record, done.planned, limit_value, options, console, as_json)


def _new_record(
    planned: FleetPlan,
    limit_value: MaxUnavailable,
    *,
    inventory: Path,
    fleet_file: Path | None,
    **more: Any,
) -> RolloutRecord:
    pending = list(planned.pending)
    left_out = {h: _left_out(p.state, p.unreachable) for h, p in planned.hosts.items() if h not in pending}
    return new_record(
        datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ"),
        inventory=str(inventory.resolve()),
        max_unavailable=limit_value,
        pending=pending,
        left_out=left_out,
        fleet_file=str(fleet_file.resolve()) if fleet_file else None,
        **more,
    )


def _start(
    action: HostAction,
    hooks: Mapping[str, HookSet],
    record: RolloutRecord,
    planned: FleetPlan,
    limit_value: MaxUnavailable,
    options: ApplyOptions,
    console: Console,
    as_json: bool,
) -> int:
    """Show the waves; unless a dry run (or nothing to do): confirm, read the baseline, save the
    record and run the waves."""
    pending = [h for wave in record.waves for h in wave]
    show_waves(record, limit_value, console)
    if not pending or options.dry_run:
        record.status = "done" if not pending else record.status
        console.print("Dry run: nothing was changed." if options.dry_run else "Nothing to roll out.")
        return _finish(record, None, as_json, planned.exit_code() if not pending else 0)
    confirm(options.yes, console)
    rollout = Rollout(
        action, hooks, dataclasses.replace(options, yes=True), console, record_path(options, record.id)
    )
    record.baseline = baseline(rollout, pending)
    save(rollout.path, record)
    return run_waves(rollout, record, as_json)


def _left_out(state: HostState, unreachable: str | None) -> str:
    if state is HostState.UNCHANGED:
        return "unchanged"
    return unreachable or state.value


def record_path(options: ApplyOptions, stamp: str) -> Path:
    """``<runs dir>/rollouts/<stamp>.json``; the runs directory must pass the trust rule."""
    from provision.ansible import check_runs_dir

    check_runs_dir(options.runs_dir, "--runs-dir")
    return options.runs_dir / RECORDS / f"{stamp}.json"


def hooks_of(inventory: Path, hosts: list[str], fleet_file: Path | None) -> dict[str, HookSet]:
    """Each of ``hosts`` -> its hooks from the fleet file's ``rollout:`` section (empty without one).

    Raises:
        ProvisionError: A ``rollout.hosts`` key names no host or group, or a host's groups name
            different hooks (before anything is touched).
    """
    if fleet_file is None:
        return {}
    from provision.fleet.mapping import read_fleet_file
    from provision.inventory import read_inventory

    section = read_fleet_file(fleet_file).rollout
    if section is None:
        return {}
    read = read_inventory(inventory, error=FleetError)  # the command's one read
    groups = {h.name: h.groups for h in read.hosts if h.name in hosts}
    return section.for_hosts(groups, [*read.names, *read.groups])


def show_waves(record: RolloutRecord, limit: MaxUnavailable, console: Console) -> None:
    """One line per wave, and the hosts left out with why."""
    console.print(f"Rollout: {len(record.waves)} wave(s), at most {limit} host(s) unavailable at once.")
    for index, wave in enumerate(record.waves, 1):
        console.print(f"  wave {index}: {escape(', '.join(wave))}")
    for host in record.named("left out"):
        console.print(f"  left out: {escape(host)} ({escape('; '.join(record.hosts[host].reasons))})")


def baseline(rollout: Rollout, hosts: list[str]) -> dict[str, dict[str, str]]:
    """Check id -> status of each of ``hosts`` before the rollout (an unreadable host: none)."""
    verified = rollout.action.verify(hosts)
    return {
        h: {r.id: r.status for r in v.report.results} for h, v in verified.items() if v.unreachable is None
    }


def run_waves(rollout: Rollout, record: RolloutRecord, as_json: bool) -> int:
    """Each wave from the first not done, stopping at the first that fails its gate."""
    record.status = "running"
    while (index := record.next_wave()) is not None:
        wave = [h for h in record.waves[index] if record.hosts[h].state != "done"]
        rollout.console.print(f"[bold]Wave {index + 1}/{len(record.waves)}[/]: {escape(', '.join(wave))}")
        gates = run_wave(rollout, record, wave)
        save(rollout.path, record)
        failed = [g for g in gates if not g.passed]
        if failed:
            record.status = "stopped"
            save(rollout.path, record)
            show_stop(record, index, failed, rollout)
            return _finish(record, rollout.path, as_json, 1)
    record.status = "done"
    save(rollout.path, record)
    rollout.console.print(f"{_noun(record)} done: {escape(record.summary())}.")
    return _finish(record, rollout.path, as_json, 1 if _left_out_failing(record) else 0)


def _noun(record: RolloutRecord) -> str:
    return "Rolling rollback" if record.action == "rollback" else "Rollout"


def _left_out_failing(record: RolloutRecord) -> bool:
    return any(record.hosts[h].reasons != ["unchanged"] for h in record.named("left out"))


def run_wave(rollout: Rollout, record: RolloutRecord, wave: list[str]) -> list[Gate]:
    """Drain, apply, verify and judge one wave's hosts; the record follows each step."""
    drained: list[str] = []
    gates: list[Gate] = []
    for host in wave:
        why = drain(rollout, record, host)
        if why is None:
            drained.append(host)
        else:
            gates.append(_fail(record, host, why))
    save(rollout.path, record)
    if drained:
        gates += apply_and_gate(rollout, record, drained)
    return gates


def drain(rollout: Rollout, record: RolloutRecord, host: str) -> str | None:
    """Take ``host`` out of service unless it is already (an administrator's drain, remembered,
    or provision's own from a stopped run); None when done, else why not."""
    hooks, entry = rollout.hooks.get(host), record.hosts[host]
    if hooks is None or entry.drained_by is not None:
        return None
    if hooks.drained is not None:
        rc, said = run_hook(hooks.drained, host, hooks.timeout_s)
        if rc == 0:
            entry.drained_by = "admin"
            rollout.console.print(f"  {escape(host)}: drained already (by an administrator: left drained)")
            return None
        if rc != 1:
            return f"drained hook: {said}"
    if hooks.drain is not None:
        rc, said = run_hook(hooks.drain, host, hooks.timeout_s)
        if rc != 0:
            return f"drain hook: {said}"
        entry.drained_by = "provision"
    return None


def undrain(rollout: Rollout, record: RolloutRecord, host: str) -> str | None:
    """Put ``host`` back in service when provision drained it; None when done (or nothing to do)."""
    hooks, entry = rollout.hooks.get(host), record.hosts[host]
    if hooks is None or hooks.undrain is None or entry.drained_by != "provision":
        return None
    rc, said = run_hook(hooks.undrain, host, hooks.timeout_s)
    if rc != 0:
        return f"undrain hook: {said}"
    entry.drained_by = None
    return None


def apply_and_gate(rollout: Rollout, record: RolloutRecord, hosts: list[str]) -> list[Gate]:
    """Detect, plan and apply ``hosts`` now (the one apply sequence), verify them, judge each."""
    report = FleetJsonReport(reboot=rollout.options.reboot.enabled)
    try:
        held, planned = rollout.action.plan(hosts)
        code = apply_planned(held, planned, rollout.options, _View(rollout.action.label, rollout, report))
    except Interrupted:
        raise
    except ProvisionError as exc:  # a refusal before anything changed on these hosts
        return [_fail(record, h, f"apply refused: {exc}") for h in hosts]
    if code == INTERRUPTED:  # Ctrl-C: the wave's hosts stay drained, resume applies them again
        for host in hosts:
            _fail(record, host, "apply interrupted by Ctrl-C")
        record.status = "stopped"
        save(rollout.path, record)
        raise Interrupted(left_running=report.data.get("left_running") or ())
    if report.data.get("run_dir"):
        record.run_dirs.append(str(report.data["run_dir"]))
    outcomes: dict[str, Any] = {h["host"]: h for h in report.data["hosts"]}
    pending_reboot = report.data.get("outcome") == "resume-pending"
    verified = rollout.action.verify(hosts)
    gates = []
    for host in hosts:
        done = outcomes.get(host, {"ok": False, "outcome": "not reported by the apply"})
        ok = bool(done["ok"]) and not pending_reboot
        outcome = "waits for a step at its console (MOK)" if pending_reboot else str(done["outcome"])
        checked = verified.get(host)
        after = {r.id: (r.status, r.detail or "") for r in checked.report.results} if checked else None
        unreachable = checked.unreachable if checked else None
        verdict = gate(host, ok, outcome, record.baseline.get(host, {}), after, unreachable)
        gates.append(_judged(rollout, record, verdict))
    return gates


class _View(FleetView):
    """The fleet view, its run directory named by the action (``<time>-fleet``, ``<time>-rollback``)."""

    def __init__(self, label: str, rollout: Rollout, report: FleetJsonReport) -> None:
        super().__init__(rollout.console, report)
        self.label = label


def _judged(rollout: Rollout, record: RolloutRecord, verdict: Gate) -> Gate:
    entry = record.hosts[verdict.host]
    if not verdict.passed:
        return _fail(record, verdict.host, *verdict.reasons)
    if (why := undrain(rollout, record, verdict.host)) is not None:
        return _fail(record, verdict.host, why)
    entry.state, entry.reasons = "done", []
    note = (
        f" (failing before the rollout too: {', '.join(verdict.still_failing)})"
        if verdict.still_failing
        else ""
    )
    rollout.console.print(f"  {escape(verdict.host)}: passed the gate{escape(note)}")
    return verdict


def _fail(record: RolloutRecord, host: str, *reasons: str) -> Gate:
    entry = record.hosts[host]
    entry.state, entry.reasons = "failed", list(reasons)
    return Gate(host, False, tuple(reasons))


def show_stop(record: RolloutRecord, index: int, failed: list[Gate], rollout: Rollout) -> None:
    """The stop: the wave, each failed host with its first reasons, who is where, how to go on."""
    rollout.console.print(f"[bold red]{_noun(record)} stopped[/] at wave {index + 1}/{len(record.waves)}:")
    for verdict in failed:
        rollout.console.print(
            f"  {escape(verdict.host)}: {escape('; '.join(verdict.reasons[:3]))}", soft_wrap=True
        )
    rollout.console.print(f"{escape(record.summary())}.", soft_wrap=True)
    rollout.console.print(
        f"Failed hosts stay drained. Fix them, then: provision resume {escape(str(rollout.path))}",
        soft_wrap=True,
    )


def run_hook(argv: list[str], host: str, timeout_s: float) -> tuple[int, str]:
    """Run one hook for ``host`` on the controller: (exit status, its last words or why it did not
    run). Its program must pass the trust rule (root runs it); -1 when it could not run."""
    from provision import trust
    from provision.files import untrusted_message

    program = shutil.which(argv[0])
    if program is None:
        return -1, f"{argv[0]}: not found"
    try:
        trust.check_path(program, kind="file")
    except trust.Untrusted as exc:
        return -1, untrusted_message(program, exc, "the hook's program")
    try:
        done = subprocess.run(
            [program, *hook_argv(argv[1:], host)], capture_output=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return -1, f"{argv[0]}: no end within {timeout_s:g} s"
    except OSError as exc:
        return -1, f"{argv[0]}: {exc.strerror or exc}"
    said = [
        ln.strip()
        for ln in (done.stderr or done.stdout).decode("utf-8", "replace").splitlines()
        if ln.strip()
    ]
    return done.returncode, f"{argv[0]} exited {done.returncode}: {said[-1] if said else 'no output'}"


def save(path: Path, record: RolloutRecord) -> None:
    """Write the record atomically, mode 0600."""
    from provision.output import write_atomic

    write_atomic(path, record.model_dump_json(indent=1) + "\n", mode=0o600)


def rollout_json(record: RolloutRecord, path: Path | None) -> dict[str, Any]:
    """The ``--json`` document, the hosts form (:data:`JSON_FORMAT`): ``{"format_version": 2,
    "action": "apply" | "rollback", "outcome": "done" | "stopped" | "dry-run" | "running",
    "record": path | None, "max_unavailable", "waves": [[host]], "hosts": [{"host", "wave",
    "state", "drained_by", "reasons"}]}`` (hosts in inventory order); a rollback's hosts also
    carry ``lock``, the number each returns to."""
    locks = record.locks if record.action == "rollback" else None
    return {
        "format_version": JSON_FORMAT,
        "action": record.action,
        "outcome": "dry-run" if path is None and record.status == "running" else record.status,
        "record": str(path) if path else None,
        "max_unavailable": record.max_unavailable,
        "waves": record.waves,
        "hosts": [
            {"host": h, **r.model_dump(), **({"lock": locks.get(h)} if locks is not None else {})}
            for h, r in record.hosts.items()
        ],
    }


def _finish(record: RolloutRecord, path: Path | None, as_json: bool, code: int) -> int:
    if as_json:
        jsonout.emit(rollout_json(record, path))
    return code


def is_rollout_record(path: Path) -> bool:
    """Whether ``path`` names a rollout record (its ``kind``), not a reboot's resume record."""
    from provision.files import read_json_text

    try:
        data = json.loads(read_json_text(path, what="resume record"))
    except (ProvisionError, ValueError):
        return False
    return isinstance(data, dict) and data.get("kind") == "rollout"


def read_record(path: Path) -> RolloutRecord:
    """The record at ``path``, read through the trust rule.

    Raises:
        ProvisionError: Unreadable, untrusted, not a rollout record, or of another format version.
    """
    from pydantic import ValidationError

    from provision.files import read_json_text

    text = read_json_text(path, what="rollout record")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProvisionError(f"{path}: not a rollout record (not JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("format_version") != RECORD_FORMAT:
        raise ProvisionError(f"{path}: a rollout record of format_version {RECORD_FORMAT} was expected")
    try:
        return RolloutRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ProvisionError(f"{path}: not a rollout record: {where}: {err['msg']}") from None


def resume_rollout(path: Path, options: ApplyOptions, console: Console, *, as_json: bool = False) -> int:
    """Continue the rollout of the record at ``path`` (see the module docstring); the exit code.

    The inventory and fleet file it names are read again through the trust rule; a host of the
    record no longer in them is refused (one line), nothing touched. The first run's choices
    hold for its resume, as the record keeps them (:func:`resumed_options`).

    Raises:
        ProvisionError: The record, inventory or fleet file cannot be used, or no confirmation.
    """
    from provision.files import check_inventory

    record = read_record(path)
    if record.status == "done":
        console.print(f"Rollout {record.id} is done: nothing to resume ({escape(record.summary())}).")
        return _finish(record, path, as_json, 0)
    inventory = Path(record.inventory)
    check_inventory(inventory, FleetError)
    fleet_file = Path(record.fleet_file) if record.fleet_file else None
    action = _action_of(record, path)
    console.print(f"Resuming {_noun(record).lower()} {record.id}: {escape(record.summary())}.")
    console.print(f"With the first run's choices: {escape(first_run_choices(record))}.", soft_wrap=True)
    confirm(options.yes, console)
    hooks = hooks_of(inventory, [h for w in record.waves for h in w], fleet_file)
    rollout = Rollout(action, hooks, resumed_options(record, options), console, path)
    return run_waves(rollout, record, as_json)


def first_run_choices(record: RolloutRecord) -> str:
    """The first run's choices a resume keeps, as its options read: ``--max-unavailable 2,
    --forks 3, -l gpu0*, --replace-held, --reboot --reboot-timeout 900`` (those not given left out)."""
    given = [
        f"--max-unavailable {record.max_unavailable}",
        f"--forks {record.forks}" if record.forks is not None else "",
        f"-l {record.limit}" if record.limit else "",
        f"--fleet {record.fleet_file}" if record.fleet_file else "",
        f"spec {record.spec}" if record.spec else "",
        f"--to {record.to}" if record.to is not None else "",
        "--replace-held" if record.replace_held else "",
        f"--reboot --reboot-timeout {record.reboot_timeout_s}" if record.reboot else "no --reboot",
    ]
    return ", ".join(g for g in given if g)


def resumed_options(record: RolloutRecord, options: ApplyOptions) -> ApplyOptions:
    """The apply options of a resume: ``options`` (its runs directory, confirmed) with the first
    run's ``--forks``, ``--replace-held`` (its consent was given with the rollout's confirmation),
    ``--reboot`` and ``--reboot-timeout`` from the record; the fleet file, spec, ``-l`` and
    rollback's locks come back through :func:`_action_of`."""
    consent = record.replace_held or options.replace_held
    reboot = dataclasses.replace(options.reboot, enabled=record.reboot, timeout_s=record.reboot_timeout_s)
    return dataclasses.replace(options, yes=True, forks=record.forks, replace_held=consent, reboot=reboot)


def _action_of(record: RolloutRecord, path: Path) -> HostAction:
    """The record's action over its hosts, the inventory and fleet file read again.

    Raises:
        ProvisionError: A host of a wave is no longer in the inventory (nothing was changed).
    """
    if record.action == "rollback":
        from provision.inventory import read_inventory
        from provision.rollback import RollbackAction

        known = set(read_inventory(Path(record.inventory), error=FleetError).names)
        _refuse_missing(record, path, known)
        return RollbackAction(Path(record.inventory), dict(record.locks), record.forks)
    fleet = dataclasses.replace(
        load_fleet(
            Path(record.inventory),
            Path(record.fleet_file) if record.fleet_file else None,
            record.limit,
            Path(record.spec) if record.spec else None,
        ),
        forks=record.forks,
    )
    _refuse_missing(record, path, set(fleet.specs))
    return ApplyAction(fleet)


def _refuse_missing(record: RolloutRecord, path: Path, known: set[str]) -> None:
    missing = [h for w in record.waves for h in w if h not in known]
    if missing:
        raise ProvisionError(
            f"{path}: {', '.join(missing)} no longer in {record.inventory}; nothing was changed"
        )
