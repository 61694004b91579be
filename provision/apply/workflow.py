"""``provision apply``: detect, plan, confirm, run Ansible, then prove convergence.

One sequence for both forms (:func:`apply_planned`): this machine or ``SPEC -i INV`` (every
host held to one spec, :func:`apply_workflow`) and the fleet form (each host its own spec,
:func:`provision.fleet.apply.apply_fleet`). Only what is shown differs, and that lives in
:mod:`provision.apply.views`.

Failure isolation comes from Ansible's defaults, kept deliberately: ``any_errors_fatal``
is false and ``max_fail_percentage`` unset in site.yml, so a failed or unreachable host
drops out of the play and the others run to the end. Hosts that are refused or
unreachable at planning are left out of the run. Every applied host Ansible reached is
detected and planned again: apply is done only when nothing is left to change, and each
host that converged gets a lock of what it now runs (:mod:`provision.lock`).

Exit codes: 0 applied and converged (or nothing to do), 1 refused, failed, or
not converged, 130 interrupted by Ctrl-C (see README, "Exit codes").
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, cast

from rich.console import Console
from rich.markup import escape

from provision import app
from provision.apply import runner
from provision.apply.bundles import write_apply_bundles
from provision.apply.outcome import Applied, not_applied, outcome, reached, reboot_hosts
from provision.apply.progress import Progress
from provision.apply.reboot import (
    NO_REBOOT,
    RebootOptions,
    RebootOutcome,
    RebootView,
    after_apply,
    preflight,
    reboot_phase,
)
from provision.apply.views import JsonReport, SingleView, Stop
from provision.components.driver import needs_consent
from provision.detect.facts import Facts
from provision.errors import ProvisionError
from provision.hosts import FleetPlan, Hosts, HostSpec, HostState, one_spec, plan_facts, plan_hosts_with_facts
from provision.lock.record import record_locks, show_recorded
from provision.plan.models import Plan
from provision.reboot.mok import certificate, mok_pending

INTERRUPTED = 130
"""Exit code after Ctrl-C stopped the Ansible run (128 + SIGINT, the shell's convention)."""


@dataclass(frozen=True)
class ApplyOptions:
    """The command line's choices for one apply, in either form.

    Attributes:
        dry_run: Show the plans and change nothing.
        yes: Apply without asking.
        runs_dir: Where the run directory goes.
        forks: Hosts Ansible works on at once (None: Ansible's default, 5).
        replace_held: Consent to replace an installed, held driver (``--replace-held``).
        reboot: ``--reboot`` and its timeout (:mod:`provision.apply.reboot`).
    """

    dry_run: bool
    yes: bool
    runs_dir: Path
    forks: int | None = None
    replace_held: bool = False
    reboot: RebootOptions = NO_REBOOT


class ApplyView(Protocol):
    """How one form of ``provision apply`` shows its progress; the sequence itself is shared."""

    console: Console
    label: str
    """Names the run directory (``<UTC time>-<label>``)."""

    def show_plan(self, planned: FleetPlan) -> bool:
        """Show every host's plan; False refuses the whole apply (the plans said why)."""

    def stopped(self, planned: FleetPlan, why: Stop) -> int:
        """The exit code when Ansible is not started."""

    def show_applied(self, planned: FleetPlan, applied: Applied) -> int:
        """Show how the hosts ended; returns the exit code."""

    def reboot_notice(self, pending: dict[str, Plan]) -> None:
        """Say that the hosts of ``pending`` need a reboot (those whose run changed the kernel side)."""

    def after_reboot(self) -> RebootView:
        """A view of the same form for the apply after the reboot (its report kept, not printed)."""

    def reboot_report(self, outcomes: list[RebootOutcome], after: RebootView | None) -> None:
        """Show each host's reboot outcome and keep it (and ``after``'s report) in the JSON document."""

    def refused_before(self, planned: FleetPlan, error: ProvisionError) -> None:
        """Keep in the JSON document that ``error`` refused the apply before anything changed (the
        CLI prints its one line and exits 1)."""


def apply_planned(hosts: Hosts, planned: FleetPlan, options: ApplyOptions, view: ApplyView) -> int:
    """Apply ``planned`` to ``hosts``: the one apply sequence; returns the exit code.

    A dry run goes through the same refusals as the real run (held-driver consent, ``--reboot``'s
    preflight) before it stops, so it refuses exactly what the real run would.

    Raises:
        ProvisionError: A refusal before anything changed (held driver without consent,
            ``--reboot`` that could not resume safely), the user did not confirm, or the
            repository key could not be verified (nothing ran).
    """
    if not view.show_plan(planned):
        return view.stopped(planned, "refused")
    pending = planned.pending
    if not pending:
        why, line = not_started(planned, options.dry_run)
        view.console.print(escape(line), soft_wrap=True)
        code = view.stopped(planned, why)
        if options.reboot.enabled:
            phase = pending_reboots(hosts, planned, options, view)  # also when another host failed
            return code or phase
        return code
    with refusals(planned, view):
        check_consent(pending, options.replace_held)
        preflight(hosts, options.reboot, options.runs_dir)
    if options.dry_run:
        view.console.print("Dry run: nothing was changed.")
        return view.stopped(planned, "dry-run")
    confirm(options.yes, view.console)
    result = run(hosts, pending, options, view)
    applied, after = after_run(hosts, planned, result)
    again = applied.again
    code = view.show_applied(planned, applied)
    if result.interrupted:
        left = escape("; ".join(result.left_running))
        ended = (
            f"but processes of it could not be ended: {left}; end them, then"
            if result.left_running
            else "(every process of it was ended, nothing of it is left running);"
        )
        view.console.print(
            f"[bold red]Interrupted[/]: Ctrl-C stopped Ansible {ended} run the same apply again to finish.",
            soft_wrap=True,
        )
        code = INTERRUPTED
    else:  # after Ctrl-C no other play is started: no lock, no support bundle
        converged = [o.host for o in applied.outcomes if o.outcome == "converged"]
        show_recorded(record_locks(hosts, converged, again, after, result.run_dir), view.console)
        for host, bundle in applied.bundles.items():
            view.console.print(f"Support bundle for {host} (mode 0600, secrets redacted): {bundle}")
    view.console.print(f"Run directory (logs, plans, Ansible artifacts): {result.run_dir}")
    if not options.reboot.enabled or result.interrupted:
        view.reboot_notice(reboot_hosts(pending, result, again))
        return code
    phase = after_apply(hosts, pending, applied, options.reboot, options.runs_dir, view, _reapply(options))
    return code or phase  # a failure elsewhere stays the exit code; the hosts that converged still reboot


@contextmanager
def refusals(planned: FleetPlan, view: ApplyView) -> Iterator[None]:
    """A ProvisionError raised inside refuses the apply before anything changed: the view keeps it
    in the JSON document (``outcome: refused`` with ``error``), and it goes on to the CLI's one line."""
    try:
        yield
    except ProvisionError as exc:
        view.refused_before(planned, exc)
        raise


def not_started(planned: FleetPlan, dry_run: bool) -> tuple[Stop, str]:
    """Why Ansible was not started when no host has changes to apply, and the line that says so.

    ``nothing-to-do`` when every host is unchanged; otherwise ``refused`` (every other host was
    refused) or ``failed`` (a host was unreachable, or its detection failed), each such host named
    with its reason (``gpu01: host unreachable: ...``). A dry run says so first.
    """
    dry = "Dry run: " if dry_run else ""
    left_out = {h: p for h, p in planned.hosts.items() if p.state is not HostState.UNCHANGED}
    if not left_out:
        return "nothing-to-do", f"{dry}Nothing to do: Ansible was not started."
    why: Stop = "refused" if all(p.state is HostState.REFUSED for p in left_out.values()) else "failed"
    reasons = "; ".join(f"{h}: {not_applied(p, dry_run).outcome}" for h, p in left_out.items())
    return why, f"{dry}no host can be applied, Ansible was not started: {reasons}"


def _reapply(options: ApplyOptions) -> Callable[[Hosts, FleetPlan, RebootView], int]:
    """The apply sequence for what is left after a reboot: confirmed already, no second reboot."""
    after = dataclasses.replace(options, yes=True, dry_run=False, reboot=NO_REBOOT)

    def reapply(hosts: Hosts, planned: FleetPlan, view: RebootView) -> int:
        return apply_planned(hosts, planned, after, cast(ApplyView, view))

    return reapply


def pending_reboots(hosts: Hosts, planned: FleetPlan, options: ApplyOptions, view: ApplyView) -> int:
    """``--reboot`` when nothing is left to change but a reboot (or a console step) is still pending:
    an earlier apply without ``--reboot``, or one interrupted before its reboot."""
    plans = {h: hp.plan for h, hp in planned.hosts.items() if hp.plan is not None and hp.unreachable is None}
    need = [h for h, p in plans.items() if not p.refused and p.reboot_required]
    waiting = {h: certificate(p) for h, p in plans.items() if not p.refused and mok_pending(p)}
    if not need and not waiting:
        return 0
    with refusals(planned, view):
        preflight(hosts, options.reboot, options.runs_dir)
    if options.dry_run:
        view.console.print(
            f"Dry run: --reboot would reboot {', '.join(need) or 'no host'}"
            + (f" and stop at the console for {', '.join(waiting)}" if waiting else "")
            + "; nothing was changed."
        )
        return 0
    confirm(options.yes, view.console)
    run_dir = runner.new_run_dir(options.runs_dir, view.label)
    return reboot_phase(
        hosts, need, waiting, {}, run_dir, options.runs_dir, options.reboot, view, _reapply(options)
    )


def after_run(
    hosts: Hosts, planned: FleetPlan, result: runner.ApplyResult
) -> tuple[Applied, dict[str, Facts]]:
    """Detect and plan again the hosts Ansible reached, even after a failure (so that what is left
    undone is said, not hidden); each failed host gets its support bundle (not after Ctrl-C: no
    other play starts then). Returns how the hosts ended and the facts of the fresh plans."""
    with tempfile.TemporaryDirectory(prefix="provision-raw-") as kept:
        raw = Path(kept)  # the fresh detection's raw outputs: a failed host's go into its bundle
        names = [h for h in planned.pending if h in reached(result)]
        again, after = plan_hosts_with_facts(hosts.keeping_raw(raw), names)
        applied = Applied(result, again, [outcome(p, result, again) for p in planned.hosts.values()])
        if not result.interrupted:
            applied = replace(applied, bundles=write_apply_bundles(hosts, planned, applied, after, raw))
    return applied, after


def check_consent(pending: dict[str, Plan], replace_held: bool) -> None:
    """Refuse, before anything runs, a plan that replaces a held driver without the user's consent.

    Raises:
        ProvisionError: A plan removes held driver packages or releases their holds, and neither
            ``--replace-held`` nor the spec's ``driver.replace_held`` consents (nothing was changed).
    """
    if replace_held:
        return
    for host, plan in pending.items():
        held = [s for s in plan.changes if needs_consent(s)]
        if held and not plan.spec.driver.replace_held:
            raise ProvisionError(
                f"{host}: the plan {held[0].action.value}s held driver packages ({held[0].current}); "
                "an administrator may have held them: pass --replace-held or set driver.replace_held: true "
                "to consent; nothing was changed"
            )


def confirm(yes: bool, console: Console) -> None:
    """Ask for ``yes`` on the terminal unless ``yes`` was given.

    Raises:
        ProvisionError: No terminal to ask on, or the answer was not ``yes``.
    """
    if yes:
        return
    if not sys.stdin.isatty():
        raise ProvisionError("no terminal to confirm the changes on; pass --yes to apply without asking")
    if console.input("Apply these changes? Only 'yes' is accepted: ").strip() != "yes":
        raise ProvisionError("apply cancelled; nothing was changed")


def run(hosts: Hosts, pending: dict[str, Plan], options: ApplyOptions, view: ApplyView) -> runner.ApplyResult:
    """One ansible-runner run of site.yml over exactly the ``pending`` hosts, with live progress."""
    run_dir = runner.new_run_dir(options.runs_dir, view.label)
    inventory = hosts.inventory or runner.local_inventory(run_dir)
    with Progress(view.console) as progress:
        return runner.run_playbook(
            pending,
            inventory,
            run_dir,
            on_event=progress.on_event,
            limit=",".join(pending),
            forks=options.forks,
        )


def apply_workflow(
    path: Path,
    *,
    dry_run: bool,
    yes: bool,
    target: app.Target,
    as_json: bool,
    runs_dir: Path,
    console: Console,
    replace_held: bool = False,
    reboot: RebootOptions = NO_REBOOT,
) -> int:
    """Run ``provision apply`` for a spec or saved plan at ``path``; returns the exit code.

    This machine, or with ``target.inventory`` every host it names (after ``target.limit``),
    each held to the one spec. With ``as_json`` the outcome is also written to stdout as one
    JSON document: ``{"outcome": "nothing-to-do" | "dry-run" | "refused" | "applied" | "failed"
    | "interrupted",
    "converged": bool, "run_dir": str | None, "hosts": {host: {ok, changed, failed, unreachable,
    failures}}, "plans": [Plan, ...], "unreachable": {host: reason}, "support_bundles": {host: path}}``
    (``plans``: the hosts detected; ``unreachable``: those that could not be, which stop the apply
    with outcome ``failed``; ``support_bundles``: one
    archive per host that failed, :mod:`provision.support`; empty when none did); with ``--reboot``
    also, in every outcome, ``"reboot": {host: {state, outcome, ok}}`` (None when no host was
    rebooted: a dry run, a refusal, nothing that needs it) and ``"after_reboot"``: the same document
    for the apply after the reboot, or None. A refusal before anything changed (a held driver without
    consent, ``--reboot`` that could not resume safely) is ``"outcome": "refused"`` with ``"error":
    {type, message, problems}``.
    """
    report = JsonReport(as_json, reboot=reboot.enabled)
    try:
        spec, saved = app.spec_from(path)
        facts = app.gather(spec, target)
        hosts = one_spec(target.inventory, facts, HostSpec(spec, saved.spec_path if saved else str(path)))
        # A saved plan is planned again as of its own day: its end-of-life findings stay the same.
        planned = plan_facts(hosts, facts, as_of=saved.as_of if saved is not None else None)
        if saved is not None:
            # The saved plan is applied only when planning now gives exactly it (host included).
            plans = planned.plans
            app.check_drift(saved, plans[saved.host] if saved.host in plans else next(iter(plans.values())))
        options = ApplyOptions(dry_run, yes, runs_dir, target.forks, replace_held, reboot)
        return apply_planned(hosts, planned, options, SingleView(console, report, spec.name))
    finally:
        report.emit()
