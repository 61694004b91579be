"""What every command shares: the typer app, the consoles, the options, the error policy, the entry point.

The commands are thin typer functions over :mod:`provision.app` and the stages, one module per
command group in this package. See README.md for usage and exit codes.
"""

from __future__ import annotations

import copy
import functools
import io
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, ParamSpec, cast

import typer
from rich.console import Console
from rich.markup import escape

from provision import __version__, jsonout
from provision.errors import Interrupted, ProvisionError, SpecError

if TYPE_CHECKING:
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
    from provision import gcpolicy, interrupts, pydanticplugins

    gcpolicy.start_up()
    interrupts.own_sigint()  # started as a background job, SIGINT would be ignored: Ctrl-C is ours
    # pydantic looks for plugins (entry points of every installed distribution, through
    # importlib.metadata) when it builds its first validator: ~4 ms here, more with hundreds of
    # distributions installed. provision's models are its own, not meant for instrumentation. A
    # value the user set is kept (an empty one keeps plugins on). The processes provision starts
    # inherit it; none of them uses pydantic (Ansible, probes, verify's GPU loads). Source:
    # https://docs.pydantic.dev/latest/concepts/plugins/ ("Disabling plugins").
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    pydanticplugins.answer_while_off()  # and the answer given without importing importlib.metadata


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
            if (inventory := sys.modules.get("provision.inventory")) is not None:
                inventory.forget()  # each command reads an inventory once, afresh
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
