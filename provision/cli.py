"""Command line: thin typer commands over provision.app. See README.md for usage and exit codes."""

from __future__ import annotations

import copy
import functools
import io
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, Literal, ParamSpec, cast

import typer
from rich.console import Console
from rich.markup import escape

from provision import __version__, jsonout
from provision.errors import Interrupted, ProvisionError, SpecError

if TYPE_CHECKING:
    from provision.plan.models import Plan
    from provision.spec.models import Spec

# Start-up is most of a command's time (benchmarks/bench_startup.py): each command imports what it
# uses inside its function, so `--help` or `validate` never load Ansible, the planner or the
# detectors. Keep new imports there too, not here.

P = ParamSpec("P")

cli = typer.Typer(
    name="provision",
    help="Declarative provisioning for NVIDIA GPU machines: spec -> detect -> plan -> apply -> checklist.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # click's plain help: typer's rich help imports rich.markdown (markdown_it) and rich.traceback
    # (pygments), about as long again as every library a command needs.
    rich_markup_mode=None,
)

PIPED_WIDTH = 10_000
"""Columns when the stream is not a terminal and COLUMNS is unset: a pipe or a file gets whole
lines (paths and messages unsplit) rather than rich's 80-column default."""


class _Piped(io.TextIOBase):
    """stdout or stderr as found at each write (tests swap them), without the spaces that pad
    table cells to the line's end."""

    def __init__(self, stderr: bool) -> None:
        self.stderr = stderr

    def write(self, text: str) -> int:
        stream = sys.stderr if self.stderr else sys.stdout
        return stream.write(re.sub(r" +\n", "\n", text))

    def flush(self) -> None:
        (sys.stderr if self.stderr else sys.stdout).flush()

    def isatty(self) -> bool:
        return False


def console(*, stderr: bool = False) -> Console:
    """A rich Console on stdout or stderr: the terminal's width, or no wrapping when redirected."""
    stream = sys.stderr if stderr else sys.stdout
    # emoji=False: a ":name:" in a path or a message stays as written (and rich's emoji table,
    # 2-3 ms to import, is never loaded).
    if stream.isatty() or "COLUMNS" in os.environ:
        return Console(stderr=stderr, highlight=False, emoji=False)
    return Console(file=cast(IO[str], _Piped(stderr)), highlight=False, width=PIPED_WIDTH, emoji=False)


out = console()
err = console(stderr=True)

SpecArg = Annotated[
    Path,
    typer.Argument(help="Spec file (YAML), e.g. specs/dual-a100x.yaml.", show_default=False, readable=False),
]
MappedSpecArg = Annotated[
    Path | None,
    typer.Argument(help="Spec file (YAML); optional when -i/--fleet map hosts to specs.", readable=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of text.")]
FactsOpt = Annotated[
    Path | None, typer.Option("--facts", help="Plan against facts saved by `detect --json`.", readable=False)
]
RawOpt = Annotated[
    Path | None,
    typer.Option("--from-raw", help="Parse a raw probe directory instead of probing.", readable=False),
]
InvOpt = Annotated[
    Path | None,
    typer.Option("--inventory", "-i", help="Ansible inventory: remote hosts over ssh.", readable=False),
]
LimitOpt = Annotated[
    str | None, typer.Option("--limit", "-l", help="Ansible host pattern within the inventory.")
]
FleetOpt = Annotated[
    Path | None,
    typer.Option(
        "--fleet",
        help="Fleet file: an inventory and group/host -> spec mapping (see README).",
        readable=False,
    ),
]
ForksOpt = Annotated[
    int | None, typer.Option("--forks", min=1, help="Hosts Ansible works on at once (default 5).")
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the plan and change nothing.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Apply without asking for confirmation.")]
RunsDirOpt = Annotated[
    Path | None,
    typer.Option("--runs-dir", help="Where run directories (logs, artifacts) go.", readable=False),
]


def main() -> None:
    """Console-script entry point: :func:`start_up`, the command, then the exit policy of
    :mod:`provision.gcpolicy`."""
    from provision import gcpolicy

    start_up()
    try:
        invoked_only(cli, sys.argv[1:])()
    finally:
        if (early := sys.modules.get("provision.detect.early")) is not None:
            early.stop()  # probes started for a command that ended before it collected them
        gcpolicy.exiting()


def start_up() -> None:
    """What the console entry point sets before a command runs: the garbage-collection policy
    (:func:`provision.gcpolicy.start_up`), Ctrl-C's handler (:func:`provision.interrupts.own_sigint`)
    and pydantic's plugin switch."""
    from provision import gcpolicy, interrupts

    gcpolicy.start_up()
    interrupts.own_sigint()  # started as a background job, SIGINT would be ignored: Ctrl-C is ours
    # pydantic looks for plugins (entry points of every installed distribution, through
    # importlib.metadata) when it builds its first validator: ~4 ms here, more with hundreds of
    # distributions installed. provision's models are its own, not meant for instrumentation. A
    # value the user set is kept (an empty one keeps plugins on). The processes provision starts
    # inherit it; none of them uses pydantic (Ansible, probes, verify's GPU loads). Source:
    # https://docs.pydantic.dev/latest/concepts/plugins/ ("Disabling plugins").
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def invoked_only(app: typer.Typer, args: list[str]) -> typer.Typer:
    """``app`` with only the command (or sub-app) that ``args`` name first, when they name one.

    typer builds the click command of every registered command before it parses (each one's
    signature read and its annotations evaluated): ~10 ms here for the whole app, ~1 ms for one
    command. The command run, its options, its ``--help`` and its errors are the same; an
    unknown or abbreviated name, a leading option (``--help``, ``--version``) or no argument get
    the whole app, so the top-level help and click's "No such command" list every command.
    """
    if not args or args[0].startswith("-"):
        return app
    name = args[0]
    commands = [c for c in app.registered_commands if _command_name(c) == name]
    groups = [g for g in app.registered_groups if _group_name(g) == name]
    if not commands and not groups:
        return app
    narrowed = copy.copy(app)
    narrowed.registered_commands = commands
    narrowed.registered_groups = groups
    return narrowed


def _command_name(info: Any) -> str:
    # typer's own rule (typer.main.get_command_from_info): the given name, else the callback's.
    if isinstance(info.name, str):
        return info.name
    from typer.main import get_command_name

    return get_command_name(info.callback.__name__)


def _group_name(info: Any) -> str | None:
    # typer.main.get_group_from_info: add_typer's name, else the sub-app's own.
    for name in (info.name, info.typer_instance.info.name if info.typer_instance else None):
        if isinstance(name, str):
            return name
    return None


def _print_version(value: bool) -> None:
    if value:
        out.print(f"provision {__version__}")
        raise typer.Exit()


@cli.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Declarative provisioning for NVIDIA GPU machines: spec -> detect -> plan -> apply -> checklist."""


def user_errors(spec_error_code: int = 1) -> Callable[[Callable[P, None]], Callable[P, None]]:
    """Turn every ProvisionError into one red line on stderr and the documented exit code.

    Anything else keeps its traceback: it is a bug, not a user error.
    """

    def decorate(command: Callable[P, None]) -> Callable[P, None]:
        @functools.wraps(command)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
            jsonout.begin()
            try:
                command(*args, **kwargs)
            except (Interrupted, KeyboardInterrupt) as exc:
                # Ctrl-C: an Ansible run ended ``canceled`` (Interrupted), or a second Ctrl-C or one
                # outside Ansible (direct ssh detection) raised KeyboardInterrupt. Exit 130 as apply.
                stopped = exc if isinstance(exc, Interrupted) else Interrupted()
                err.print(f"[bold red]Interrupted[/]: {escape(str(stopped))}", soft_wrap=True)
                if kwargs.get("as_json") and not jsonout.written():
                    jsonout.emit(jsonout.error_document(stopped, stopped.exit_code))
                raise typer.Exit(stopped.exit_code) from None
            except ProvisionError as exc:
                code = spec_error_code if isinstance(exc, SpecError) else 1
                err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
                if kwargs.get("as_json") and not jsonout.written():
                    jsonout.emit(jsonout.error_document(exc, code))
                raise typer.Exit(code) from None

        return wrapper

    return decorate


def _emit_json(data: dict[str, Any]) -> None:
    jsonout.emit(data)


@cli.command()
@user_errors(spec_error_code=2)
def validate(spec: SpecArg, *, as_json: JsonOpt = False) -> None:
    """Check a spec: YAML syntax, fields and types, and the compatibility rules.

    Exit 0 when valid, 2 when the file is not a valid spec, 1 when a rule refuses it.
    """
    from provision.catalog import load_catalog
    from provision.plan.validate import validate_spec
    from provision.spec.loader import load_spec

    loaded = load_spec(spec)
    _check_bios(loaded, spec)
    findings = validate_spec(loaded, load_catalog())
    refused = any(f.severity == "blocker" for f in findings)
    if as_json:
        found = [f.model_dump() for f in findings]
        _emit_json({"spec": str(spec), "valid": not refused, "findings": found})
    else:
        for f in findings:
            line = f"{spec}: {f.severity} [{f.rule}]: {f.message} (source: {f.source})"
            (err if f.severity == "blocker" else out).print(escape(line), soft_wrap=True)
        if not refused:
            out.print(f"{spec}: valid")
    if refused:
        raise typer.Exit(1)


@cli.command()
@user_errors()
def schema() -> None:
    """Print the spec's JSON Schema (point your editor's YAML language server at it)."""
    from provision.spec.schema import spec_schema

    sys.stdout.write(json.dumps(spec_schema(), indent=2) + "\n")


@cli.command()
@user_errors()
def catalog(
    table: Annotated[
        str | None,
        typer.Argument(
            help="gpus, drivers, cuda, torch, vllm or monitoring; all of them when left out.",
            show_default=False,
        ),
    ] = None,
    *,
    as_json: JsonOpt = False,
) -> None:
    """List what a spec may name: GPU models, driver branches, CUDA releases, PyTorch and vLLM releases,
    DCGM releases (each with its paired dcgm-exporter)."""
    from provision.catalog import load_catalog
    from provision.catalog.listing import TABLES, listing, render_listing

    if table is not None and table not in TABLES:
        raise ProvisionError(f"no catalog table {table!r}; choose one of {', '.join(TABLES)}")
    chosen = TABLES if table is None else (cast(Any, table),)
    data = listing(load_catalog(), chosen)
    if as_json:
        _emit_json(data)
    else:
        render_listing(data, out)


@cli.command()
@user_errors()
def detect(
    spec: Annotated[
        Path | None, typer.Argument(help="Optional spec: its venv is probed for PyTorch.", readable=False)
    ] = None,
    *,
    as_json: JsonOpt = False,
    from_raw: RawOpt = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    save_raw: Annotated[
        Path | None,
        typer.Option(
            "--save-raw",
            help="Also write every probe's raw output to this directory (a support bundle); with -i or "
            "--fleet one DIR/<host>/ per host, which `plan -i INVENTORY --from-raw DIR` plans offline.",
            readable=False,
        ),
    ] = None,
    forks: ForksOpt = None,
) -> None:
    """Read the machine as it is: OS, kernel, driver, GPUs, topology, packages, CUDA, PyTorch."""
    _check_outputs(directories={"--save-raw": save_raw})
    preloaded = _start_probes(spec) if from_raw is None and inventory is None and fleet is None else None
    from provision import app as workflow
    from provision.detect.summary import render_facts

    if from_raw is not None and (inventory is not None or fleet is not None):
        raise ProvisionError(
            "detect --from-raw reads one raw directory; for an inventory's saved hosts use "
            "`provision plan -i INVENTORY --from-raw DIR`"
        )
    loaded = preloaded or (workflow.spec_from(spec)[0] if spec else None)
    spec_failed: dict[str, str] = {}
    if fleet is not None:
        from provision.fleet import commands as fleet_commands

        hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks, save_raw=save_raw)
        facts, spec_failed = fleet_commands.detect_facts(hosts)
    else:
        target = workflow.Target(from_raw=from_raw, inventory=inventory, limit=limit, forks=forks)
        facts = workflow.gather(loaded, target, save_raw)
    remote = inventory is not None or fleet is not None
    lost = _undetected(facts, spec_failed) if remote else {}
    if as_json:
        docs = [f.model_dump(mode="json") for f in facts.values()]
        _emit_json({"hosts": docs, "unreachable": lost} if remote else docs[0])
    else:
        for f in facts.values():
            render_facts(f, out)
    for host, reason in lost.items():
        err.print(f"[red]{escape(host)}: {escape(reason)}[/]", soft_wrap=True)
    if lost:
        raise typer.Exit(1)  # as plan's fleet form: a host that could not be detected fails the command


@cli.command("import")
@user_errors()
def import_(
    *,
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write the spec here (and its lock beside it, NAME.lock.json); with -i a directory for "
            "fleet.yaml, specs/ and locks/. Without it the spec is printed.",
            readable=False,
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace files that exist.")] = False,
    as_json: JsonOpt = False,
    facts: Annotated[
        Path | None, typer.Option("--facts", help="Import from `detect --json` output.", readable=False)
    ] = None,
    from_raw: Annotated[
        Path | None,
        typer.Option(
            "--from-raw",
            help="Import from a raw probe directory (`detect --save-raw DIR`); with -i, DIR/<host>/ "
            "per host.",
            readable=False,
        ),
    ] = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    forks: ForksOpt = None,
    venv: Annotated[
        str | None,
        typer.Option(
            "--venv",
            help="The venv to import (default: this machine's first venv with torch under /opt, /srv).",
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="The spec's name (default: from its shape).")
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option(
            "--gpus",
            help="MODEL[:COUNT]: the GPUs where the facts cannot name them (no driver loaded yet, a model "
            "lspci alone does not tell); `provision catalog gpus` lists the models.",
        ),
    ] = None,
) -> None:
    """Write the spec of the machine as it is, so that `provision plan` on it shows no changes.

    Each chosen value has a comment saying why (the loaded module's flavour, the package that shows
    the driver's source, a value left out and what keeping it would change). With an inventory
    (-i), one spec per distinct machine shape and a fleet file mapping hosts to them. Exit 0 when
    every plan on the written specs is empty, 2 when one still shows changes (listed), 1 when
    nothing could be written or a host could not be imported.
    """
    from provision.importing.command import gpus_option, run
    from provision.importing.workflow import Source

    source = Source(facts, from_raw, inventory, limit, forks, venv, name, gpus_option(gpus))
    raise typer.Exit(run(source, out_path, force, as_json, err))


def _check_outputs(
    files: dict[str, Path | None] | None = None, directories: dict[str, Path | None] | None = None
) -> None:
    """Refuse an output path that could not be written (:func:`provision.output.check_outputs`), before
    anything starts (this machine's early probes included); imports nothing when no path was given."""
    if any(p is not None for p in (*(files or {}).values(), *(directories or {}).values())):
        from provision.output import check_outputs

        check_outputs(files, directories)


def _check_runs_dir(runs_dir: Path | None) -> None:
    """Refuse, before any work, a ``--runs-dir`` the trust rule refuses
    (:func:`provision.ansible.check_runs_dir`)."""
    if runs_dir is not None:
        from provision.ansible import check_runs_dir

        check_runs_dir(runs_dir, "--runs-dir")


def _start_probes(spec: Path | None) -> Spec | None:
    """Start this machine's probes now, while the command loads (:mod:`provision.detect.early`),
    and the venv probes as soon as ``spec`` (a spec file, not a saved plan) is read, before it is
    validated: the spec loaded, or None when there is none or it is a saved plan.

    Raises:
        SpecError: The spec file is not a valid spec (as loading it later would).
    """
    from provision.detect import early
    from provision.files import is_plan_file

    early.start()
    if spec is None or is_plan_file(spec):  # a saved plan: app.spec_from checks its seal
        return None
    from provision.spec.document import declared_venv, read_spec_document

    document = read_spec_document(spec)
    started = declared_venv(document)  # before validating: the probes run while the models load
    if started is not None:
        early.start_venv(started)
    from provision.spec.loader import spec_from_document

    loaded = spec_from_document(spec, document)
    if loaded.python is not None and loaded.python.venv != started:  # not expected: same rules
        early.start_venv(loaded.python.venv)
    return loaded


def _undetected(facts: dict[str, Any], spec_failed: dict[str, str] | None = None) -> dict[str, str]:
    """Host -> why it could not be detected (``host unreachable: ...``, ``host failed at ...``), or else
    why its own spec could not be loaded (``spec not loaded: ...``, from ``spec_failed``: detected
    without its venv); in the order of ``facts``."""
    from provision.hosts import unreachable_reason

    failed = spec_failed or {}
    reasons = {h: unreachable_reason(f) or failed.get(h) for h, f in facts.items()}
    unread = {h: r for h, r in failed.items() if h not in facts}
    return {h: r for h, r in reasons.items() if r is not None} | unread


@cli.command()
@user_errors()
def plan(
    spec: MappedSpecArg = None,
    *,
    as_json: JsonOpt = False,
    facts: FactsOpt = None,
    from_raw: RawOpt = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Save the plan as JSON for `apply`.", readable=False)
    ] = None,
    detailed_exitcode: Annotated[
        bool,
        typer.Option(
            "--detailed-exitcode", help="Exit 2 when changes are pending, 0 when none, 1 on error or refusal."
        ),
    ] = False,
    forks: ForksOpt = None,
) -> None:
    """Show what apply would change, step by step, and what it refuses and why.

    With an inventory (-i) and no SPEC, or a fleet file, each host is planned against its own spec
    and a summary table follows (hosts unchanged / to change / refused / unreachable). With -i and
    --from-raw DIR, each host is planned offline from DIR/<host>/ (`detect -i INVENTORY --save-raw DIR`).
    """
    _check_outputs(files={"--out": out_file})
    live = spec is not None and facts is None and from_raw is None and inventory is None and fleet is None
    preloaded = _start_probes(spec) if live else None
    from provision import app as workflow

    offline_fleet = from_raw is not None and (inventory is not None or fleet is not None)
    if fleet is not None or spec is None or offline_fleet:  # fleet mode, or no target: fleet_mode says
        from provision.fleet import commands as fleet_commands

        fleet_commands.fleet_mode(spec, inventory, fleet)
        raw = from_raw if offline_fleet else None
        hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks, from_raw=raw)
        save = None if out_file is None else functools.partial(_save_plan, path=out_file)
        raise typer.Exit(fleet_commands.plan_command(hosts, out, as_json, detailed_exitcode, save))
    loaded = preloaded or workflow.spec_from(spec)[0]
    target = workflow.Target(
        facts_file=facts, from_raw=from_raw, inventory=inventory, limit=limit, forks=forks
    )
    gathered = workflow.gather(loaded, target)
    lost = _undetected(gathered)  # not planned: a plan on facts nobody read would be a blank machine's
    plans = {h: p for h, p in workflow.plan_all(loaded, gathered, str(spec)).items() if h not in lost}
    _show_plans(plans, as_json, lost)
    if out_file is not None:
        _save_plan(plans, out_file)
    raise typer.Exit(1 if lost else _plan_exit(plans, detailed_exitcode))


def _show_plans(plans: dict[str, Plan], as_json: bool, lost: dict[str, str]) -> None:
    """Each plan, then each host that could not be detected with its reason (``lost``)."""
    from provision.plan.render import render_plan, summary

    if as_json:
        docs = [json.loads(p.model_dump_json()) | {"summary": summary(p)} for p in plans.values()]
        if lost:
            _emit_json({"plans": docs, "unreachable": lost})
        else:
            _emit_json(docs[0] if len(docs) == 1 else {"plans": docs})
        return
    for p in plans.values():
        render_plan(p, out)
    for host, reason in lost.items():
        out.print(f"[bold]{escape(host)}[/]: [red]{escape(reason)}[/]", soft_wrap=True)


def _save_plan(plans: dict[str, Plan], path: Path) -> None:
    from provision.plan import seal

    if len(plans) != 1:
        raise ProvisionError("--out saves one reachable host's plan; use --limit to choose one host")
    plan = next(iter(plans.values()))
    seal.save(plan, path)
    if plan.refused:
        err.print(f"Saved the refused plan to {path} for review: `provision apply` refuses it.")
    elif not plan.changes:
        err.print(f"Saved the plan to {path}: it changes nothing.")
    else:
        err.print(f"Saved the plan to {path}; run `provision apply {path}` to apply exactly this plan.")


def _plan_exit(plans: dict[str, Plan], detailed: bool) -> int:
    if any(p.refused for p in plans.values()):
        return 1
    return 2 if detailed and any(p.changes for p in plans.values()) else 0


@cli.command()
@user_errors()
def apply(
    spec: Annotated[
        Path | None,
        typer.Argument(
            help="Spec file (YAML) or a plan saved with `plan --out` (JSON); optional with -i/--fleet.",
            readable=False,
        ),
    ] = None,
    *,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    forks: ForksOpt = None,
    as_json: JsonOpt = False,
    runs_dir: RunsDirOpt = None,
    replace_held: Annotated[
        bool,
        typer.Option(
            "--replace-held",
            help="Consent to replace an installed, held driver that the spec changes (the plan shows it "
            "as a removal or a hold release); the spec's driver.replace_held does the same.",
        ),
    ] = False,
    reboot: Annotated[
        bool,
        typer.Option(
            "--reboot",
            help="Reboot the hosts whose new kernel side needs it and finish the apply after the boot "
            "(remote hosts: Ansible's reboot module; this machine: a one-shot provision-resume.service, "
            "reboot in one minute). A pending MOK enrollment stops with the console steps instead.",
        ),
    ] = False,
    reboot_timeout: Annotated[
        int,
        typer.Option(
            "--reboot-timeout", min=30, max=7200, help="Seconds a remote host has to come back (default 600)."
        ),
    ] = 600,
    max_unavailable: Annotated[
        str | None,
        typer.Option(
            "--max-unavailable",
            help="Roll out in waves of N hosts (or P% of them), verify as the gate after each wave, "
            "stop at the first host that regressed; `provision resume RECORD` continues (docs/fleets.md).",
        ),
    ] = None,
) -> None:
    """Install and pin the stack as planned, through Ansible; a second apply changes nothing.

    With an inventory (-i) and no SPEC, or a fleet file, hosts run in parallel, each with its own
    spec; a failed or unreachable host is reported and the others finish (exit 1). With --reboot,
    exit 3 means a host waits for a step at its console (MOK enrollment). With --max-unavailable,
    a wave at a time, each gated by verify (exit 1 when the rollout stopped).
    """
    _check_runs_dir(runs_dir)
    from provision import app as workflow
    from provision.apply import runner
    from provision.apply.reboot import RebootOptions
    from provision.apply.workflow import apply_workflow
    from provision.fleet import commands as fleet_commands

    reboots = RebootOptions(reboot, reboot_timeout)
    if max_unavailable is not None:
        from provision.fleet.rolling import rolling_apply
        from provision.fleet.rollout import parse_max_unavailable

        parse_max_unavailable(max_unavailable)  # a bad value is refused before anything is read
        if inventory is None and fleet is None:
            raise ProvisionError("--max-unavailable rolls out over hosts: give -i INVENTORY or --fleet FILE")
        options = fleet_commands.FleetOptions(
            dry_run, yes, runs_dir or runner.default_runs_dir(), forks, replace_held, reboots
        )
        hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks)
        code = rolling_apply(
            hosts,
            max_unavailable,
            options,
            err if as_json else out,
            fleet_file=fleet,
            spec=spec,
            limit=limit,
            as_json=as_json,
        )
        raise typer.Exit(code)
    if fleet_commands.fleet_mode(spec, inventory, fleet):
        options = fleet_commands.FleetOptions(
            dry_run, yes, runs_dir or runner.default_runs_dir(), forks, replace_held, reboots
        )
        hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks)
        raise typer.Exit(fleet_commands.apply_command(hosts, options, err if as_json else out, as_json))
    assert spec is not None  # fleet_mode is true without a SPEC
    raise typer.Exit(
        apply_workflow(
            spec,
            dry_run=dry_run,
            yes=yes,
            target=workflow.Target(inventory=inventory, limit=limit, forks=forks),
            as_json=as_json,
            runs_dir=runs_dir or runner.default_runs_dir(),
            console=err if as_json else out,  # with --json, stdout carries only the JSON report
            replace_held=replace_held,
            reboot=reboots,
        )
    )


@cli.command()
@user_errors()
def resume(
    record: Annotated[
        Path | None,
        typer.Argument(
            help="A resume record (default: this machine's, /var/lib/provision/resume.json; a remote "
            "host's waiting on its console is in the apply's run directory).",
            readable=False,
        ),
    ] = None,
    *,
    as_json: JsonOpt = False,
    unit: Annotated[
        bool,
        typer.Option("--unit", help="Run as provision-resume.service does: this machine's record only."),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="A rollout record: go on without asking for confirmation.")
    ] = False,
) -> None:
    """Finish, after the reboot, an apply run with --reboot: detect again, apply what is left.

    Applies only changes of the components the confirmed plan changed (anything else is refused, to be
    reviewed with apply); stops again while a MOK enrollment is pending (exit 3). The record (and
    this machine's unit) is removed when it has run to its end; it is kept while a host is not
    reachable yet (exit 1: run resume again) or its spec changed since apply (remove it by hand to
    drop the resume). No record: nothing to do, exit 0. Its log: resume.log in the apply's run
    directory.

    A rollout record (written by `apply --max-unavailable` in <runs dir>/rollouts/) continues the
    rollout from its first wave not done: the failed hosts again, then the untouched ones.
    """
    from provision.apply.resume import resume_workflow
    from provision.errors import ProvisionError

    if record is not None and not unit:
        from provision.fleet import rolling

        if rolling.is_rollout_record(record):
            raise typer.Exit(_resume_rollout(record, yes, as_json))
    if unit and record is not None:
        raise ProvisionError("--unit runs this machine's record; give no RECORD with it")
    raise typer.Exit(
        resume_workflow(record, as_json=as_json, console=err if as_json else out, unit_mode=unit)
    )


def _resume_rollout(record: Path, yes: bool, as_json: bool) -> int:
    from provision.apply.workflow import ApplyOptions
    from provision.fleet.rolling import resume_rollout

    runs = record.resolve().parent.parent  # <runs dir>/rollouts/<id>.json
    options = ApplyOptions(dry_run=False, yes=yes, runs_dir=runs)
    return resume_rollout(record, options, err if as_json else out, as_json=as_json)


@cli.command()
@user_errors()
def checklist(
    spec: MappedSpecArg = None,
    *,
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", help="md (terminal), html (printable) or pdf (headless Chromium)."),
    ] = "md",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to this file (a directory when there are several hosts).",
            readable=False,
        ),
    ] = None,
    paper: Annotated[str, typer.Option("--paper", help="a4 or letter (HTML and PDF).")] = "a4",
    facts: Annotated[
        Path | None,
        typer.Option(
            "--facts",
            help="Show each item's state from `detect --json` output (one document per host).",
            readable=False,
        ),
    ] = None,
    from_raw: RawOpt = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="The host the document is for: picks it from a multi-host --facts file, names the host of "
            "--from-raw DIR, or names this machine (localhost or its host name) to probe it here; any other "
            "host is refused (its facts come from --facts, --from-raw or -i INVENTORY -l HOST).",
        ),
    ] = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    forks: ForksOpt = None,
) -> None:
    """The BIOS and hardware checklist: the manual steps, and what this host's Linux shows for each.

    Without --facts, --from-raw or --host naming this machine, it is the blank paper checklist.
    With an inventory (-i) or a fleet file, every host is detected through Ansible (or read from
    --from-raw DIR/<host>/, as `plan -i INVENTORY --from-raw DIR`) and -o DIR gets one document
    per host (its own spec, or SPEC for all) and an index with per-host counts.
    """
    from rich.markdown import Markdown

    from provision import app as workflow
    from provision.catalog import load_catalog
    from provision.checklist import Format, render_documents, write_documents
    from provision.checklist.sources import checklist_facts

    if fmt not in ("md", "html", "pdf") or paper not in ("a4", "letter"):
        raise ProvisionError("--format must be md, html or pdf, --paper a4 or letter")
    if output is None and fmt == "pdf":
        raise ProvisionError("--format pdf needs --output FILE")
    _check_checklist_output(output, several=inventory is not None or fleet is not None)
    if inventory is not None or fleet is not None:
        if facts is not None:
            raise ProvisionError(
                "--facts reads one host's facts; with -i or --fleet give --from-raw DIR "
                "(`detect -i INVENTORY --save-raw DIR`)"
            )
        if host is not None:
            raise ProvisionError(f"--host names one machine; with -i or --fleet choose hosts with -l {host}")
        _fleet_checklist(spec, inventory, fleet, limit, output, cast(Format, fmt), paper, forks, from_raw)
        return
    if spec is None:
        raise ProvisionError(
            "give a SPEC, or an inventory (-i) or fleet file (--fleet) that maps hosts to specs"
        )
    workflow.refuse_contradictions(workflow.Target(facts_file=facts, from_raw=from_raw))
    loaded, saved_plan = workflow.spec_from(spec)
    if saved_plan is None:
        _check_bios(loaded, spec)
    catalog = load_catalog()
    _refuse_invalid_spec(loaded, catalog, spec)
    gpu = catalog.gpus.get(loaded.gpus.model)
    by_host, origin = checklist_facts(facts, from_raw, host)
    documents = render_documents(
        loaded,
        cast(Format, fmt),
        cast(Literal["a4", "letter"], paper),
        by_host,
        facts_from=origin,
        host=host,
        gpu_tdp_w=gpu.tdp_w if gpu else None,
        gpu_memory_gib=gpu.memory_gib if gpu else None,
        catalog=catalog,
    )
    if output is not None:
        for path in write_documents(documents, output, cast(Format, fmt)):
            err.print(f"Wrote {path}")
        return
    if fmt == "html" and len(documents) > 1:
        raise ProvisionError("one HTML document per host: give --output DIR, or --host to pick one")
    for text in documents.values():
        if fmt == "md" and out.is_terminal:
            out.print(Markdown(str(text)))
        else:  # piped Markdown stays Markdown, for a file or another renderer
            sys.stdout.write(str(text))


def _check_bios(loaded: Spec, path: Path) -> None:
    """The spec's ``bios:`` checked, located, as the checklist will read it
    (:func:`provision.checklist.items.check_bios`); its defaults are loaded only when the spec
    changes the checklist."""
    if loaded.bios.items or loaded.bios.skip:
        from provision.checklist.items import check_bios

        check_bios(loaded, path)


def _check_checklist_output(output: Path | None, several: bool) -> None:
    """``-o``: a directory for a fleet's documents (created), else a file or an existing directory."""
    if output is not None and (several or output.is_dir()):
        _check_outputs(directories={"--output": output})
    else:
        _check_outputs(files={"--output": output})


def _refuse_invalid_spec(loaded: Any, catalog: Any, path: Path) -> None:
    """One line for a spec `provision validate` refuses: its checklist would print wrong figures."""
    from provision.plan.validate import validate_spec

    blockers = [f for f in validate_spec(loaded, catalog) if f.severity == "blocker"]
    if blockers:
        first = blockers[0]
        more = f" (and {len(blockers) - 1} more)" if len(blockers) > 1 else ""
        raise ProvisionError(
            f"{path}: refused [{first.rule}] {first.message}{more}; `provision validate {path}` lists them"
        )


def _fleet_checklist(
    spec: Path | None,
    inventory: Path | None,
    fleet: Path | None,
    limit: str | None,
    output: Path | None,
    fmt: Literal["md", "html", "pdf"],
    paper: str,
    forks: int | None = None,
    from_raw: Path | None = None,
) -> None:
    from provision.fleet import commands as fleet_commands
    from provision.fleet.checklist import write_fleet_checklists

    if output is None:
        raise ProvisionError("a fleet checklist is one document per host: give --output DIR")
    hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks, from_raw=from_raw)
    written = write_fleet_checklists(hosts, fmt, cast(Literal["a4", "letter"], paper), output)
    for path in written.paths:
        err.print(f"Wrote {path}")
    for host, reason in written.failed.items():  # no document: its spec could not be loaded
        err.print(f"[red]{escape(host)}: {escape(reason)}[/]", soft_wrap=True)
    if written.failed:
        raise typer.Exit(1)


@cli.command()
@user_errors()
def verify(
    spec: MappedSpecArg = None,
    *,
    as_json: JsonOpt = False,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write JUnit XML (a testcase per check).", readable=False),
    ] = None,
    save_raw: Annotated[
        Path | None,
        typer.Option("--save-raw", help="Write what the checks read (inputs.json) to DIR.", readable=False),
    ] = None,
    inputs: Annotated[
        Path | None,
        typer.Option("--inputs", help="Check a saved inputs.json instead of this machine.", readable=False),
    ] = None,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    fleet: FleetOpt = None,
    forks: ForksOpt = None,
    prometheus: Annotated[
        Path | None,
        typer.Option(
            "--prometheus",
            help="Also write the results as a node exporter textfile (FILE.prom, written atomically), "
            "e.g. /var/lib/prometheus/node-exporter/provision-verify.prom.",
            readable=False,
        ),
    ] = None,
    runs_dir: RunsDirOpt = None,
) -> None:
    """Prove the machine works: driver, GPUs, PCIe and kernels under load, libraries, P2P, NCCL, thermals.

    Exit 0 when no check failed (warnings and skips allowed), 1 otherwise. With an inventory (-i) or
    a fleet file, every host is verified against its spec (or SPEC for all) and a combined report
    follows: per-host tables, a summary, --json of all hosts, --junit with one testsuite per host.
    A host that fails a check gets a support bundle (support-<host>.tar.gz, mode 0600, secrets
    redacted) in a new run directory; its path is printed and in --json.
    """
    from provision.ansible import default_runs_dir
    from provision.verify.command import emit, run_verify

    _check_outputs(files={"--junit": junit}, directories={"--save-raw": save_raw})
    _check_runs_dir(runs_dir)
    if prometheus is not None:
        from provision.verify.textfile import check_path

        check_path(prometheus)
    if inventory is not None or fleet is not None:
        if inputs is not None:
            raise ProvisionError(
                "--inputs replays one machine's saved inputs; it does not go with -i/--fleet"
            )
        runs = runs_dir or default_runs_dir()
        raise typer.Exit(
            _fleet_verify(spec, inventory, fleet, limit, forks, save_raw, as_json, junit, prometheus, runs)
        )
    if spec is None:
        raise ProvisionError(
            "give a SPEC, or an inventory (-i) or fleet file (--fleet) that maps hosts to specs"
        )
    verified = run_verify(
        spec, inputs_file=inputs, save_raw=save_raw, runs_dir=runs_dir or default_runs_dir()
    )
    report = verified.report
    code = emit(verified, out, as_json, junit)
    if prometheus is not None:
        from provision.verify.textfile import write_textfile

        write_textfile(prometheus, {report.host: report})
    if inputs is None:  # a replay says nothing about the machine as it is now
        from provision import app as workflow

        _record_verify(None, {report.host: (report, workflow.spec_from(spec)[0])}, as_json)
    raise typer.Exit(code)


def _record_verify(inventory: Path | None, reports: dict[str, tuple[Any, Any]], as_json: bool) -> None:
    """Record each host's verify result in its current lock (`provision lock show` prints it)."""
    from provision.lock.record import record_verify, show_verify_recorded, verify_result

    results = {host: verify_result(report, spec) for host, (report, spec) in reports.items()}
    show_verify_recorded(record_verify(inventory, results), err if as_json else out)


def _fleet_verify(
    spec: Path | None,
    inventory: Path | None,
    fleet: Path | None,
    limit: str | None,
    forks: int | None,
    save_raw: Path | None,
    as_json: bool,
    junit: Path | None,
    prometheus: Path | None = None,
    runs_dir: Path | None = None,
) -> int:
    from provision.fleet import commands as fleet_commands
    from provision.fleet.orchestrate import held_hosts
    from provision.fleet.verify import verify_fleet
    from provision.fleet.verify_report import emit_fleet

    hosts = fleet_commands.resolve(spec, inventory, fleet, limit, forks=forks)
    verified = verify_fleet(hosts, forks, save_raw=save_raw, runs_dir=runs_dir)
    if prometheus is not None:
        from provision.verify.textfile import write_textfile

        write_textfile(prometheus, {h: v.report for h, v in verified.hosts.items()})
    code = emit_fleet(verified, out, as_json, junit)
    held = held_hosts(hosts)[0]
    reached = {h: (v.report, held.specs[h].spec) for h, v in verified.hosts.items() if v.unreachable is None}
    if reached:
        _record_verify(held.inventory, reached, as_json)
    return code


lock_cli = typer.Typer(
    name="lock", help="The lock of what the last converged apply left on each host.", no_args_is_help=True
)
cli.add_typer(lock_cli)


@lock_cli.command("show")
@user_errors()
def lock_show(*, as_json: JsonOpt = False, inventory: InvOpt = None, limit: LimitOpt = None) -> None:
    """Print each host's current lock and its numbered history (/var/lib/provision on the host).

    A lock holds the exact versions and holds of the managed packages, the venv's wheels and their
    hashes, the repository key, the spec and its digest, and verify's result when it ran.
    """
    from provision.lock.show import lock_json, render_locks
    from provision.lock.store import read_locks

    found = read_locks(inventory, limit)
    if as_json:
        _emit_json(lock_json(found))
    else:
        render_locks(found, out)


@cli.command()
@user_errors()
def rollback(
    *,
    to: Annotated[
        int | None,
        typer.Option(
            "--to", min=1, help="The lock number to return to (default: the one before the current)."
        ),
    ] = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    inventory: InvOpt = None,
    limit: LimitOpt = None,
    forks: ForksOpt = None,
    as_json: JsonOpt = False,
    runs_dir: RunsDirOpt = None,
    replace_held: Annotated[
        bool,
        typer.Option("--replace-held", help="Consent to move a held driver, as for apply."),
    ] = False,
) -> None:
    """Return each host to a previous lock (`provision lock show` lists them) through a normal plan.

    The plan shows the downgrades and is refused, with the list, when the repository no longer
    serves a locked version; the lock's holds and pins come back with it. Exit codes as apply's.
    """
    _check_runs_dir(runs_dir)
    from provision.apply import runner
    from provision.apply.workflow import ApplyOptions
    from provision.rollback import RollbackOptions, rollback_workflow

    options = RollbackOptions(
        to,
        inventory,
        limit,
        ApplyOptions(dry_run, yes, runs_dir or runner.default_runs_dir(), forks, replace_held),
    )
    raise typer.Exit(rollback_workflow(options, as_json=as_json, console=err if as_json else out))


if __name__ == "__main__":
    main()
