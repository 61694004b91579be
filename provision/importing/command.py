"""The ``provision import`` command's checks and output, over :mod:`provision.importing.workflow`."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from provision import jsonout
from provision.errors import ProvisionError
from provision.importing.workflow import Imported, Source, document, import_hosts
from provision.output import check_output_directory, check_output_file, refuse_existing, write_atomic


def gpus_option(value: str | None) -> tuple[str, int | None] | None:
    """``--gpus MODEL[:COUNT]`` as (model, count or None).

    Raises:
        ProvisionError: COUNT is not a whole number from 1 to 16 (``gpus.count``'s range).
    """
    if value is None:
        return None
    model, sep, count = value.partition(":")
    if not sep:
        return model, None
    if not (count.isascii() and count.isdigit() and 1 <= int(count) <= 16):
        raise ProvisionError(f"--gpus {value}: COUNT must be a whole number from 1 to 16")
    return model, int(count)


def check_options(source: Source, out: Path | None, force: bool, as_json: bool) -> None:
    """Refuse, before anything is read, options that contradict each other and outputs that could not
    be written or would replace a file without ``--force``.

    Raises:
        ProvisionError: One line naming the options or the path.
    """
    given = [n for n, v in (("--facts", source.facts_file), ("--from-raw", source.from_raw)) if v is not None]
    if len(given) > 1:
        raise ProvisionError("--facts and --from-raw are different sources of facts: give one")
    if source.facts_file is not None and source.inventory is not None:
        raise ProvisionError(
            "--facts reads one host; with -i give --from-raw DIR (`detect -i INVENTORY --save-raw DIR`)"
        )
    if source.limit is not None and source.inventory is None:
        raise ProvisionError("--limit selects hosts of an inventory: give -i INVENTORY too")
    if source.name is not None and source.inventory is not None:
        raise ProvisionError("--name names one machine's spec; an inventory's specs are named by shape")
    if source.inventory is not None:
        if out is None and not as_json:
            raise ProvisionError("an inventory's import is several files: give --out DIR")
        if out is not None:
            check_output_directory(out, "--out")
            refuse_existing([out / "fleet.yaml"], force)
    elif out is not None:
        check_output_file(out, "--out")
        refuse_existing([out], force)


def run(source: Source, out: Path | None, force: bool, as_json: bool, console: Console) -> int:
    """Import, write what was asked, report; the exit code (:class:`~provision.importing.workflow.Imported`).

    Raises:
        ProvisionError: As :func:`check_options`, or a host (not an inventory) could not be imported.
    """
    check_options(source, out, force, as_json)
    result = import_hosts(source, out)
    refuse_existing(result.files, force)  # the shapes' names are known only now
    written = []
    for path, text in result.files.items():
        write_atomic(path, text)
        written.append(path)
    if as_json:
        jsonout.emit(document(result, written))
    else:
        _report(result, written, out, console)
    return result.exit_code


def _report(result: Imported, written: list[Path], out: Path | None, console: Console) -> None:
    """The spec on stdout when no file was asked for; on stderr what was written and what a plan shows."""
    if out is None and result.shapes:
        sys.stdout.write(result.shapes[0].text)
    for path in written:
        console.print(f"Wrote {escape(str(path))}", soft_wrap=True)
    if out is None:
        console.print("Not written (give --out FILE to write the spec and its lock).")
    for shape in result.shapes:
        for host, plan in shape.plans.items():
            from provision.plan.render import summary

            line = summary(plan)
            style = "green" if not plan.changes and not plan.refused else "yellow"
            console.print(
                f"{escape(host)}: spec {escape(shape.name)}: [{style}]{escape(line)}[/]", soft_wrap=True
            )
            for step in plan.changes:
                console.print(f"  {step.component.value}: {escape(step.reason)}", soft_wrap=True)
            for finding in plan.blockers:
                console.print(f"  refused [{finding.rule}] {escape(finding.message)}", soft_wrap=True)
    for host, why in result.failed.items():
        console.print(f"[red]{escape(host)}: {escape(why)}[/]", soft_wrap=True)
