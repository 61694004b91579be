"""``apply --reboot``: after the apply, reboot the hosts that need it, then finish what is left.

Which hosts: those whose run finished a kernel-side change or whose fresh plan shows a reboot
pending (:func:`provision.apply.outcome.reboot_hosts`), and that converged otherwise: a failed
host is not rebooted. Then, per kind of host:

* **Remote hosts** are rebooted by ``ansible.builtin.reboot`` (:mod:`provision.reboot.remote`),
  each with ``--reboot-timeout`` seconds to come back; one that does not is that host's failure.
  The hosts that came back are detected and planned again; what their fresh plans still change is
  applied through the same apply sequence, when it stays within the components of the plan the
  user confirmed (:func:`outside_consent`), else refused for that host with the steps named.
* **This machine** cannot be rebooted by Ansible from itself: apply writes the resume record
  (:mod:`provision.reboot.record`) and the one-shot unit (:mod:`provision.reboot.unit`) and
  schedules the reboot a minute ahead (``shutdown -r +1``, so that the report is printed first and
  ``shutdown -c`` can still cancel it); ``provision resume`` finishes after the boot.
* **A pending MOK enrollment** (:mod:`provision.reboot.mok`) is never rebooted through: the
  console instructions are printed and a resume record written (this machine's at
  ``/var/lib/provision/resume.json`` with its unit; remote hosts' in the run directory); the
  resume picks up once the key is enrolled.

Exit codes: 0 when every host ended converged (or its reboot is scheduled with the resume in
place), 1 when a host failed, did not come back or was refused after the reboot, 3
(:data:`RESUME_PENDING`) when a host waits for a console step and none failed, 130 when Ctrl-C
stopped the reboot play.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from rich.console import Console
from rich.markup import escape

from provision import trust
from provision.apply.outcome import Applied, reboot_hosts
from provision.errors import ProvisionError
from provision.hosts import FleetPlan, HostPlan, Hosts, HostState, plan_hosts_with_facts
from provision.plan.models import Action, Plan
from provision.reboot import mok, record, remote, unit
from provision.unknown import because

INTERRUPTED = 130
"""Exit code when Ctrl-C stopped the reboot play (as apply's: 128 + SIGINT)."""
RESUME_PENDING = 3
"""Exit code when a host waits for a step at its console (MOK enrollment) and no host failed."""

SHUTDOWN_ARGV = (
    "shutdown",
    "-r",
    "+1",
    "provision apply --reboot: provision-resume.service finishes after the boot",
)
"""This machine's reboot in a minute (shutdown(8) ``+m``): the report goes out first; ``shutdown -c``
cancels."""

State = Literal["rebooted", "not-back", "refused", "mok-pending", "scheduled", "failed"]


@dataclass(frozen=True)
class RebootOptions:
    """``--reboot`` and ``--reboot-timeout``.

    Attributes:
        enabled: Reboot the hosts that need it and finish the apply after.
        timeout_s: Seconds a remote host has to come back.
        root: Where this machine's unit and record go (``/``; tests give a scratch root).
    """

    enabled: bool = False
    timeout_s: int = remote.DEFAULT_TIMEOUT_S
    root: Path = Path("/")

    @property
    def record_path(self) -> Path:
        """This machine's resume record under :attr:`root`."""
        return self.root / record.RESUME_FILE.relative_to("/")


@dataclass(frozen=True)
class RebootOutcome:
    """How one host's reboot ended.

    Attributes:
        state: ``rebooted`` (back, and converged after the rest was applied), ``not-back`` (did
            not come back in time, or the reboot failed), ``refused`` (its fresh plan changes
            what the user did not confirm, or is refused), ``failed`` (the rest failed or did
            not converge), ``mok-pending`` (waits for the console), ``scheduled`` (this
            machine: reboots in a minute, the resume unit finishes).
        outcome: One line for people.
    """

    host: str
    state: State
    outcome: str

    @property
    def ok(self) -> bool:
        return self.state in ("rebooted", "scheduled")


NO_REBOOT = RebootOptions()
"""``--reboot`` not given."""


class RebootView(Protocol):
    """What the reboot phase needs of an apply view (:class:`provision.apply.workflow.ApplyView`)."""

    console: Console

    def after_reboot(self) -> RebootView:
        """A view of the same form for the apply after the reboot, whose report is kept, not printed."""

    def reboot_report(self, outcomes: list[RebootOutcome], after: RebootView | None) -> None:
        """Show each host's reboot outcome (and record it, with ``after``'s report, in the JSON)."""


Reapply = Callable[[Hosts, FleetPlan, RebootView], int]
"""The apply sequence (:func:`provision.apply.workflow.apply_planned` with ``--yes``, no reboot)."""


def preflight(hosts: Hosts, options: RebootOptions, runs_dir: Path) -> None:
    """Refuse ``--reboot`` before anything changes when this machine's resume could not run safely.

    Raises:
        ProvisionError: This machine is not run by root, has no systemd, the resume unit would
            run as root something the trust rule refuses (:mod:`provision.trust`), or another
            provision than this one, or the runs directory (where the resume logs) is not trusted
            (nothing was changed).
    """
    if not options.enabled or hosts.inventory is not None:
        return
    if os.geteuid() != 0:
        raise ProvisionError(
            "--reboot on this machine needs root (it installs a systemd unit); nothing was changed"
        )
    if not (options.root / "run/systemd/system").is_dir() and options.root == Path("/"):
        raise ProvisionError(
            "--reboot on this machine needs systemd as init (no /run/systemd/system); reboot by hand and "
            "run the same apply again; nothing was changed"
        )
    if (why := unit.run_as_root_problem() or unit.other_package_problem()) is not None:
        raise ProvisionError(
            because("--reboot: the resume unit would run as root what another user could change", why)
            + "; install "
            "provision root-owned (e.g. a venv under /opt made by root) or reboot by hand and apply again; "
            "nothing was changed"
        )
    for held in hosts.specs.values():
        if held.path and (why := trust.problem("file", held.path)) is not None:
            raise ProvisionError(because("--reboot: the spec is not trusted", why) + "; nothing was changed")
    if (why := trust.problem("dir", str(runs_dir), missing_ok=True)) is not None:
        raise ProvisionError(
            because("--reboot: the runs directory is not trusted", why) + "; nothing was changed"
        )


def after_apply(
    hosts: Hosts,
    pending: dict[str, Plan],
    applied: Applied,
    options: RebootOptions,
    runs_dir: Path,
    view: RebootView,
    reapply: Reapply,
) -> int:
    """Reboot the hosts of ``applied`` that need it and finish their apply; returns the phase's exit code.

    A host is rebooted only when Ansible finished it and its fresh plan changes nothing more.
    """
    done = {o.host for o in applied.outcomes if o.ok}
    need = [h for h in reboot_hosts(pending, applied.result, applied.again) if h in done]
    plans = {h: _plan(applied.again, h) for h in done}
    waiting = {h: mok.certificate(p) for h, p in plans.items() if mok.mok_pending(p)}
    consented = {h: [s.component.value for s in p.changes] for h, p in pending.items()}
    return reboot_phase(
        hosts, need, waiting, consented, applied.result.run_dir, runs_dir, options, view, reapply
    )


def reboot_phase(
    hosts: Hosts,
    need: list[str],
    waiting: Mapping[str, str],
    consented: dict[str, list[str]],
    run_dir: Path,
    runs_dir: Path,
    options: RebootOptions,
    view: RebootView,
    reapply: Reapply,
) -> int:
    """Reboot ``need`` (all but ``waiting``), stop ``waiting`` at the console; see the module docstring.

    ``waiting`` maps each host that waits for MOK enrollment to the certificate it is to enrol.
    """
    outcomes = [*_mok_stop(hosts, waiting, consented, run_dir, runs_dir, options, view.console)]
    reboot = [h for h in need if h not in waiting]
    nested: RebootView | None = None
    if reboot and hosts.inventory is None:
        outcomes.append(_schedule_local(hosts, consented, run_dir, runs_dir, options, view.console))
    elif reboot:
        assert hosts.inventory is not None
        view.console.print(
            f"Rebooting {escape(', '.join(reboot))} (each has {options.timeout_s} s to come back)"
        )
        back = remote.reboot_hosts(
            hosts.inventory, reboot, run_dir / "reboot", options.timeout_s, hosts.forks, _said(view.console)
        )
        outcomes += [
            RebootOutcome(h, "not-back", f"did not come back: {why}") for h, why in back.items() if why
        ]
        returned = [h for h, why in back.items() if why is None]
        if returned:
            nested = view.after_reboot()
            outcomes += finish(hosts, returned, consented, nested, reapply)
    if outcomes:
        view.reboot_report(outcomes, nested)
    if any(o.outcome.endswith(remote.INTERRUPTED) for o in outcomes):
        return INTERRUPTED
    return phase_code(outcomes)


def _said(console: Console) -> Callable[[str, str | None], None]:
    """A progress line as each host's reboot ends."""

    def said(host: str, why: str | None) -> None:
        line = "back up" if why is None else f"[red]not back:[/] {escape(why)}"
        console.print(f"  {escape(host)}: {line}", soft_wrap=True)

    return said


def phase_code(outcomes: list[RebootOutcome]) -> int:
    """1 when a host failed, else 3 when one waits for the console, else 0."""
    if any(not o.ok and o.state != "mok-pending" for o in outcomes):
        return 1
    return RESUME_PENDING if any(o.state == "mok-pending" for o in outcomes) else 0


def finish(
    hosts: Hosts, names: list[str], consented: dict[str, list[str]], view: RebootView, reapply: Reapply
) -> list[RebootOutcome]:
    """Detect and plan ``names`` again after their boot and apply what is left within the consent."""
    again, _ = plan_hosts_with_facts(hosts, names)
    outcomes, go = after_boot(again, consented, "rebooted")
    if go:
        sub = dataclasses.replace(hosts, specs={h: hosts.specs[h] for h in go})
        code = reapply(sub, FleetPlan(go), view)
        state: State = "rebooted" if code == 0 else "failed"
        word = "applied the rest; converged" if code == 0 else "the rest did not converge (see above)"
        outcomes += [RebootOutcome(h, state, f"rebooted; {word}") for h in go]
    return outcomes


_UNCONFIRMED = "(not in the plan confirmed before the reboot: run `provision apply` to review and confirm it)"


def after_boot(
    again: FleetPlan, consented: dict[str, list[str]], lead: str
) -> tuple[list[RebootOutcome], dict[str, HostPlan]]:
    """Sort the hosts' fresh plans after their boot (pure): done, failed, refused, or left to apply.

    A host whose fresh plan still asks for a reboot failed: the boot did not bring the new kernel
    side up (a module that did not load, a kernel without it); ``lead`` starts each outcome line.
    """
    outcomes, go = [], {}
    for host, hp in again.hosts.items():
        plan = hp.plan
        if hp.unreachable is not None or plan is None:
            outcomes.append(RebootOutcome(host, "failed", f"{lead}, then {hp.state.value}: {hp.unreachable}"))
        elif plan.refused:
            first = plan.blockers[0]
            outcomes.append(
                RebootOutcome(host, "refused", f"{lead}; plan refused: [{first.rule}] {first.message}")
            )
        elif extra := outside_consent(plan, consented.get(host, [])):
            outcomes.append(RebootOutcome(host, "refused", f"{lead}; not applied: {extra} {_UNCONFIRMED}"))
        elif hp.state is HostState.CHANGE:
            go[host] = hp
        elif reboot := next((s for s in plan.steps if s.action is Action.REBOOT), None):
            outcomes.append(RebootOutcome(host, "failed", f"{lead}, but still {reboot.reason}: {_NOT_UP}"))
        else:
            outcomes.append(RebootOutcome(host, "rebooted", f"{lead}; a fresh plan shows no changes"))
    return outcomes, go


_NOT_UP = "the boot did not bring the new kernel side up (see the kernel's log, `dmesg`, and `dkms status`)"


def outside_consent(plan: Plan, consented: list[str]) -> str:
    """The changes of ``plan`` whose component the confirmed plan did not change, as ``component action;
    ...`` (empty when every change was consented to)."""
    extra = [s for s in plan.changes if s.component.value not in consented]
    return "; ".join(f"{s.component.value} {s.action.value}" for s in extra)


def _plan(fleet: FleetPlan, host: str) -> Plan | None:
    hp = fleet.hosts.get(host)
    return hp.plan if hp is not None else None


def write_resume(
    hosts: Hosts,
    names: list[str],
    consented: dict[str, list[str]],
    waiting: Collection[str],
    run_dir: Path,
    runs_dir: Path,
    options: RebootOptions,
    name: str = record.RECORD_NAME,
) -> Path:
    """Write the resume record for ``names``, which share one spec file (on this machine also the
    unit); returns the record's path: this machine's, or ``name`` in the run directory.

    Raises:
        ProvisionError: The hosts' spec file is unknown (a saved plan that names none) or unreadable.
    """
    spec = hosts.specs[names[0]].path
    if spec is None:
        raise ProvisionError("the plan names no spec file to resume from: run apply again after the boot")
    path = options.record_path if hosts.inventory is None else run_dir / name
    written = record.new_record(
        Path(spec),
        inventory=hosts.inventory,
        hosts=names,
        consented=[c for h in names for c in consented.get(h, [])],
        mok_pending=[h for h in waiting if h in names],
        run_dir=run_dir,
        runs_dir=runs_dir,
    )
    record.write_record(written, path)
    if hosts.inventory is None:
        unit.install_unit(unit.unit_text(unit.resume_argv(), record.RESUME_FILE), options.root)
    return path


def _schedule_local(
    hosts: Hosts,
    consented: dict[str, list[str]],
    run_dir: Path,
    runs_dir: Path,
    options: RebootOptions,
    console: Console,
) -> RebootOutcome:
    host = next(iter(hosts.specs))
    try:
        write_resume(hosts, [host], consented, [], run_dir, runs_dir, options)
    except ProvisionError as exc:
        return RebootOutcome(host, "failed", f"not rebooted: {exc}")
    done = subprocess.run(list(SHUTDOWN_ARGV), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return RebootOutcome(
            host,
            "failed",
            because("could not schedule the reboot", why[0]) + "; reboot by hand: "
            f"{unit.UNIT_NAME} finishes after the boot",
        )
    console.print(
        f"[bold magenta]Rebooting in one minute[/] (`shutdown -c` cancels); after the boot {unit.UNIT_NAME} "
        f"finishes the apply once and removes itself; its log: {record.LOG_NAME} in {run_dir}",
        soft_wrap=True,
    )
    return RebootOutcome(host, "scheduled", f"reboot in one minute; {unit.UNIT_NAME} finishes after the boot")


def _mok_stop(
    hosts: Hosts,
    waiting: Mapping[str, str],
    consented: dict[str, list[str]],
    run_dir: Path,
    runs_dir: Path,
    options: RebootOptions,
    console: Console,
) -> list[RebootOutcome]:
    """The console instructions for each host in ``waiting``, and the resume record that picks up after."""
    outcomes = []
    groups: dict[str | None, list[str]] = {}
    for host in waiting:
        groups.setdefault(hosts.specs[host].path, []).append(host)
    for n, names in enumerate(groups.values()):
        try:
            path = write_resume(
                hosts,
                names,
                consented,
                waiting,
                run_dir,
                runs_dir,
                options,
                name=record.RECORD_NAME if len(groups) == 1 else f"resume-{n + 1}.json",
            )
        except ProvisionError as exc:
            outcomes += [
                RebootOutcome(h, "failed", f"MOK enrollment pending; no resume record: {exc}") for h in names
            ]
            continue
        resume = (
            f"after the boot {unit.UNIT_NAME} finishes the apply (or run `provision resume` as root)"
            if hosts.inventory is None
            else f"then run `provision resume {path}`"
        )
        for host in names:
            for line in mok.instructions(host, resume, waiting[host]):
                console.print(escape(line), soft_wrap=True)
            outcomes.append(
                RebootOutcome(host, "mok-pending", "MOK enrollment pending at the console (see above)")
            )
    return outcomes
