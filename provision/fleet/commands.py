"""What ``provision detect|plan|apply`` do in fleet mode; the CLI only chooses the mode and prints.

Fleet mode: an inventory and no SPEC (each host's spec comes from the mapping), or a
fleet file (``--fleet``). A SPEC with an inventory and no fleet file keeps the
single-spec behaviour of :mod:`provision.apply.workflow`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from provision import jsonout
from provision.detect.facts import Facts
from provision.errors import ProvisionError
from provision.fleet.apply import FleetOptions, apply_fleet

__all__ = ["FleetOptions", "apply_command", "detect_facts", "fleet_mode", "plan_command", "resolve"]
from provision.fleet.mapping import Fleet, load_fleet
from provision.fleet.orchestrate import detect_fleet, plan_fleet
from provision.fleet.summary import fleet_plan_json, render_fleet_plan
from provision.plan.models import Plan


def fleet_mode(spec: Path | None, inventory: Path | None, fleet_file: Path | None) -> bool:
    """Whether a command runs per host from a mapping rather than with one spec.

    Raises:
        ProvisionError: Neither a SPEC nor an inventory or fleet file was given, or a saved plan
            (one host's) was given with a fleet file.
    """
    if spec is None and inventory is None and fleet_file is None:
        raise ProvisionError(
            "give a SPEC, or an inventory (-i) or fleet file (--fleet) that maps hosts to specs"
        )
    if fleet_file is not None and spec is not None:
        from provision.files import is_plan_file

        if is_plan_file(spec):
            raise ProvisionError(
                f"{spec} is a saved plan: it names its one host; give it without --fleet "
                "(with -i INVENTORY for a remote host)"
            )
    return fleet_file is not None or spec is None


def resolve(
    spec: Path | None,
    inventory: Path | None,
    fleet_file: Path | None,
    limit: str | None,
    *,
    forks: int | None = None,
    from_raw: Path | None = None,
    save_raw: Path | None = None,
) -> Fleet:
    """The fleet a command runs on (see :func:`provision.fleet.mapping.load_fleet`), detected with
    ``forks``, or read offline from ``from_raw``, or saving raw outputs to ``save_raw``."""
    return replace(
        load_fleet(inventory, fleet_file, limit, spec), forks=forks, from_raw=from_raw, save_raw=save_raw
    )


def detect_facts(fleet: Fleet) -> tuple[dict[str, Facts], dict[str, str]]:
    """Facts of every host, the torch probe reading each host's own spec's venv, and host -> why its
    own spec could not be loaded (that host detected without the venv probes): :func:`detect_fleet`."""
    return detect_fleet(fleet)


def plan_command(
    fleet: Fleet,
    console: Console,
    as_json: bool,
    detailed: bool,
    save: Callable[[dict[str, Plan]], None] | None = None,
) -> int:
    """``provision plan`` in fleet mode: per-host plans and the summary; returns the exit code.
    ``save`` (``plan --out``'s writer) gets the plan of every host, once they are shown.

    Raises:
        ProvisionError: ``--out`` with an unreachable host (``save`` refuses more than one host).
    """
    planned = plan_fleet(fleet)
    if as_json:
        jsonout.emit(fleet_plan_json(planned))
    else:
        render_fleet_plan(planned, console)
    if save is not None:
        if any(h.unreachable is not None for h in planned.hosts.values()):
            raise ProvisionError("--out saves one reachable host's plan; use --limit to choose one host")
        save({name: h.plan for name, h in planned.hosts.items() if h.plan is not None})
    return planned.exit_code(detailed)


def apply_command(fleet: Fleet, options: FleetOptions, console: Console, as_json: bool = False) -> int:
    """``provision apply`` in fleet mode; returns the exit code."""
    return apply_fleet(fleet, options, console, as_json=as_json)
