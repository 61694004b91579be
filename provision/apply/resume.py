"""``provision resume``: finish, after a reboot, the apply that wrote a resume record.

The record (:mod:`provision.reboot.record`) is read only when trusted and intact, and its spec
only when unchanged since apply. The hosts are then detected and planned again, as any apply
does; the resume stops again, with the console instructions, while a MOK enrollment it waits for
is still not enrolled (detection's ``mok-key`` fact), and otherwise applies, through the one apply
sequence and without asking (the user confirmed before the reboot), what the fresh plans still
change, but only within the components of the plan that was confirmed
(:func:`provision.apply.reboot.outside_consent`): a machine that changed in another way across
the reboot is refused, with the steps named, for the user to review with ``provision apply``.

A saved plan is never re-applied here: it was applied exactly before the reboot; the rest is
planned from the spec it embeds (sealed, and the file's SHA-256 checked against the record).

The record (and this machine's unit) is removed when the resume ran to its end, whatever the
outcome, so the boot-time unit runs once. It is kept, for ``provision resume`` to run again, while a
MOK enrollment is still pending or a host is not reachable yet (still booting: nothing is applied
to it and the line says so, never "resumed"), and when the resume could not start (its spec changed
since apply, detection failed; the unit is removed, the error line says how to drop the record).
Every line is also appended to ``resume.log`` in the apply's run directory.

Exit codes: 0 converged, nothing was left, or no record at all; 1 refused, failed or a host not
reachable yet; 3 a MOK enrollment is still pending (:data:`provision.apply.reboot.RESUME_PENDING`).
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, cast

from rich.console import Console

from provision import app, jsonout, trust
from provision.apply.reboot import NO_REBOOT, RESUME_PENDING, RebootOptions, after_boot
from provision.apply.reboot import RebootOutcome as Outcome
from provision.apply.views import JsonReport, SingleView, reboot_json, show_reboots
from provision.apply.workflow import ApplyOptions, apply_planned
from provision.errors import ProvisionError, SpecError
from provision.hosts import FleetPlan, HostPlan, Hosts, HostSpec, HostState, plan_hosts
from provision.reboot import mok, record, unit


def resume_workflow(
    path: Path | None,
    *,
    as_json: bool,
    console: Console,
    options: RebootOptions = NO_REBOOT,
    unit_mode: bool = False,
) -> int:
    """Run the resume record at ``path`` (default: this machine's); returns the exit code.

    With ``as_json`` one document on stdout (:data:`provision.jsonout.HOSTS_FORMAT`):
    ``{"format_version": 2, "outcome": "resumed" | "nothing-to-do" | "mok-pending" |
    "not-reachable" | "refused" | "failed", "record": str, "record_kept": bool, "hosts": [{host,
    state, outcome, ok}], "apply": <apply --json document of the apply run> | null}``. No record at
    all is ``nothing-to-do`` (exit 0): nothing is waiting for a reboot.

    The record is removed once the resume ran to its end (resumed, nothing-to-do, refused,
    failed); it is kept, for ``provision resume`` to run again, while a MOK enrollment is pending
    or a host is not reachable yet (still booting), and when the resume could not start (its spec
    changed since apply, detection failed): nothing ran then.

    ``unit_mode``: run by ``provision-resume.service``; a record it cannot trust or run removes the
    unit (it must not run at every boot) and is left for root to look at.

    Raises:
        ResumeError: A record that is not trusted or was edited; its spec changed (nothing ran;
            the record is kept).
        ProvisionError: Detection failed before any host was planned (the record is kept).
    """
    where = path or options.record_path
    if not os.path.lexists(where):
        if unit_mode:
            unit.remove_unit(options.root)
        console.print(f"Nothing to resume: no resume record at {where} (nothing is waiting for a reboot).")
        if as_json:
            jsonout.emit(
                {
                    "format_version": jsonout.HOSTS_FORMAT,
                    "outcome": "nothing-to-do",
                    "record": str(where),
                    "record_kept": False,
                    "hosts": [],
                    "apply": None,
                }
            )
        return 0
    try:
        found = record.read_record(where)
    except record.ResumeError:
        if unit_mode:
            unit.remove_unit(options.root)
        raise
    doc: dict[str, Any] = {
        "format_version": jsonout.HOSTS_FORMAT,
        "outcome": None,
        "record": str(where),
        "record_kept": True,
        "hosts": [],
        "apply": None,
    }
    record.act_for(found)
    try:
        with _logged(found, console) as logged:
            code = _resume(found, where, logged, doc)
    except ProvisionError as exc:
        if unit_mode:
            unit.remove_unit(options.root)  # it could not start: not again at every boot; the record stays
        if not isinstance(exc, SpecError):
            exc.args = (f"{exc}; the resume record is kept: to drop this resume, remove it (`rm {where}`)",)
        raise
    if doc["outcome"] in KEPT:
        console.print(f"The resume record {where} is kept.", soft_wrap=True)
    else:
        _done(found, where, options)  # it ran to its end, whatever the outcome: the unit runs once
        doc["record_kept"] = False
    if as_json:
        jsonout.emit(doc)
    return code


KEPT = ("mok-pending", "not-reachable")
"""Outcomes that keep the record (and this machine's unit) for the resume to run again."""


def _resume(found: record.ResumeRecord, where: Path, console: Console, doc: dict[str, Any]) -> int:
    spec_path = record.check_spec(found)
    spec, _ = app.spec_from(spec_path)
    inventory = Path(found.inventory) if found.inventory else None
    hosts = Hosts(inventory, {h: HostSpec(spec, str(spec_path)) for h in found.hosts})
    console.print(f"Resuming the apply of {spec_path} on {', '.join(found.hosts)} (record {where})")
    planned = plan_hosts(hosts)
    gone = [
        Outcome(h, "not-back", f"{_away(hp)}; run `provision resume {where}` again")
        for h, hp in planned.hosts.items()
        if hp.unreachable is not None or hp.plan is None
    ]
    planned = FleetPlan({h: hp for h, hp in planned.hosts.items() if h not in {o.host for o in gone}})
    still = [h for h in found.mok_pending if h in planned.hosts and mok.mok_pending(planned.hosts[h].plan)]
    if still:
        resume = (
            "the resume runs again after that boot"
            if inventory is None
            else f"then `provision resume {where}`"
        )
        for host in still:
            for line in mok.instructions(host, resume, mok.certificate(planned.hosts[host].plan)):
                console.print(line, soft_wrap=True, markup=False)
        waiting = [Outcome(h, "mok-pending", "MOK still not enrolled") for h in still]
        return _end(doc, "not-reachable" if gone else "mok-pending", gone + waiting, console)
    outcomes, go = after_boot(planned, {h: list(found.consented) for h in found.hosts}, "resumed")
    report = JsonReport(False)
    if go:
        sub = dataclasses.replace(hosts, specs={h: hosts.specs[h] for h in go})
        apply_options = ApplyOptions(False, True, Path(found.runs_dir))
        code = apply_planned(
            sub, FleetPlan(go), apply_options, SingleView(console, report, f"resume-{spec.name}")
        )
        doc["apply"] = report.data
        word = "applied the rest; converged" if code == 0 else "the rest did not converge (see above)"
        outcomes += [Outcome(h, "rebooted" if code == 0 else "failed", word) for h in go]
    failed = any(not o.ok for o in outcomes)
    ending = "failed" if failed else "resumed" if go else "nothing-to-do"
    if failed and all(o.state == "refused" for o in outcomes if not o.ok):
        ending = "refused"
    return _end(doc, "not-reachable" if gone else ending, gone + outcomes, console)


def _away(hp: HostPlan) -> str:
    """Why a host was not planned again: not reachable yet (still booting), or detection failed."""
    if hp.state is HostState.UNREACHABLE:
        return f"not reachable yet ({hp.unreachable})"
    return f"not planned again ({hp.state.value}: {hp.unreachable})"


def _end(doc: dict[str, Any], ending: str, outcomes: list[Outcome], console: Console) -> int:
    show_reboots(outcomes, console)
    doc["outcome"] = ending
    doc["hosts"] = reboot_json(outcomes)
    if ending == "mok-pending":
        return RESUME_PENDING
    return 0 if ending in ("resumed", "nothing-to-do") else 1


def _done(found: record.ResumeRecord, where: Path, options: RebootOptions) -> None:
    """The resume ran: remove the record and, for this machine, the unit (it must not run again)."""
    record.remove_record(where)
    if found.inventory is None:
        unit.remove_unit(options.root)


@contextmanager
def _logged(found: record.ResumeRecord, console: Console) -> Iterator[Console]:
    """``console``, also appending every line to the record's ``resume.log`` (in the apply's run
    directory, when that directory is there and, as root, trusted)."""
    run_dir = Path(found.run_dir)
    if not run_dir.is_dir() or trust.problem("dir", str(run_dir)) is not None:
        yield console
        return
    fd = os.open(found.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as log:
        yield Console(
            file=cast(IO[str], _Tee(console.file, log)),
            width=console.width,
            no_color=True,
            highlight=False,
            emoji=False,
        )


class _Tee(io.TextIOBase):
    """A text stream writing to two."""

    def __init__(self, first: IO[str], second: IO[str]) -> None:
        self.streams = (first, second)

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()

    def isatty(self) -> bool:
        return False
