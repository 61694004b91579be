"""How each host of one apply ended: Ansible's counts, then what a fresh plan shows (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from provision.apply import runner
from provision.components.registry import COMPONENTS
from provision.hosts import FleetPlan, HostPlan, HostState
from provision.plan.models import Plan


@dataclass(frozen=True)
class HostOutcome:
    """How one host ended.

    Attributes:
        host: The inventory hostname.
        before: Its state at planning.
        ansible: Ansible's counts for it; None when it was not in the run.
        outcome: ``converged``, ``unchanged``, or what went wrong, in one line.
        ok: Whether the host now matches its spec.
    """

    host: str
    before: HostState
    ansible: runner.HostResult | None
    outcome: str
    ok: bool


@dataclass(frozen=True)
class Applied:
    """One Ansible run over the pending hosts and what a fresh plan shows afterwards.

    Attributes:
        result: Ansible's outcome per host.
        again: The fresh plans of the pending hosts Ansible reached.
        outcomes: Every planned host's outcome, in inventory order.
        bundles: The support bundle of each host that failed (:mod:`provision.support`).
    """

    result: runner.ApplyResult
    again: FleetPlan
    outcomes: list[HostOutcome]
    bundles: dict[str, Path] = field(default_factory=dict)


def reached(result: runner.ApplyResult) -> set[str]:
    """Hosts Ansible reached: re-detecting an unreachable one would only repeat the error."""
    return {h for h, r in result.hosts.items() if not r.unreachable}


def outcome(planned: HostPlan, result: runner.ApplyResult, again: FleetPlan) -> HostOutcome:
    """How ``planned`` ended: not run, failed in Ansible, converged, or not converged (pure)."""
    state, host = planned.state, planned.host
    if state is not HostState.CHANGE:
        return not_applied(planned)
    ran = result.hosts.get(host)
    if result.interrupted:
        return HostOutcome(host, state, ran, f"interrupted (Ctrl-C): {_left(again.hosts.get(host))}", False)
    if ran is None or ran.unreachable or ran.failed:
        return HostOutcome(host, state, ran, _ansible_failure(ran), False)
    after = again.hosts.get(host)
    if after is not None and after.state is HostState.UNCHANGED:
        return HostOutcome(host, state, ran, "converged", True)
    return HostOutcome(host, state, ran, _not_converged(after), False)


def not_applied(planned: HostPlan, dry_run: bool = False) -> HostOutcome:
    """How ``planned`` ends when Ansible does not run it: ``unchanged``, its refusal (``refused
    [rule] message``), why it could not be detected (``host unreachable: ...``, ``host failed at
    ...``), or on a dry run the changes it would get (``not applied (dry run): component action;
    ...``). ``ok`` only for an unchanged host (pure)."""
    state, host = planned.state, planned.host
    if state is HostState.CHANGE and planned.plan is not None:
        why = f"not applied{' (dry run)' if dry_run else ''}: {steps(planned.plan)}"
        return HostOutcome(host, state, None, why, False)
    return HostOutcome(host, state, None, _not_run(planned), state is HostState.UNCHANGED)


def _left(after: HostPlan | None) -> str:
    if after is None or after.plan is None or after.unreachable is not None:
        return "not detected again"
    return f"left to do: {steps(after.plan)}" if after.plan.changes else "nothing left to do"


def _not_run(planned: HostPlan) -> str:
    if planned.plan is None or planned.unreachable is not None:
        return planned.unreachable or "host unreachable"  # "host unreachable: ..." or "host failed at ..."
    if planned.plan.refused:
        first = planned.plan.blockers[0]
        return f"refused [{first.rule}] {first.message}"
    return "unchanged"


def _ansible_failure(ran: runner.HostResult | None) -> str:
    if ran is None:
        return "failed: Ansible reported nothing for this host"
    word = "unreachable" if ran.unreachable else "failed"
    return f"{word}: {ran.failures[0] if ran.failures else 'no message'}"


def _not_converged(after: HostPlan | None) -> str:
    if after is not None and after.unreachable is not None:
        return f"unreachable after the run: {after.unreachable}; whether it converged is unknown"
    if after is None or after.plan is None:
        return "not converged: not detected again"
    return f"not converged: {steps(after.plan) or after.state.value}"


def steps(plan: Plan) -> str:
    """The plan's changes as ``component action; ...``."""
    return "; ".join(f"{s.component.value} {s.action.value}" for s in plan.changes)


def reboot_hosts(pending: dict[str, Plan], result: runner.ApplyResult, again: FleetPlan) -> dict[str, Plan]:
    """The applied hosts that need a reboot now: the run finished a plan that changes the kernel side,
    or the fresh plan finds one pending (a loaded module older than the installed one, the
    ``/run/reboot-required`` flag). A run that failed before changing anything asks for none."""
    return {
        h: p for h, p in pending.items() if _finished(h, p, result) or _pending_reboot(again.hosts.get(h))
    }


def _finished(host: str, plan: Plan, result: runner.ApplyResult) -> bool:
    ran = result.hosts.get(host)
    return plan.reboot_required and ran is not None and not ran.failed and not ran.unreachable


def _pending_reboot(after: HostPlan | None) -> bool:
    """A reboot step in the fresh plan that no planned kernel-side change explains."""
    if after is None or after.plan is None or after.unreachable is not None:
        return False
    kernel_side = {c.name for c in COMPONENTS if c.reboots}
    planned = any(s.changes and s.component in kernel_side for s in after.plan.steps)
    return after.plan.reboot_required and not planned
