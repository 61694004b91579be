"""The ``provision verify`` workflow behind the CLI: load, detect, collect, check, print, exit code."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from provision import jsonout
from provision.errors import FactsError, first_error
from provision.files import read_json_text
from provision.hosts import LOCALHOST, Hosts, HostSpec
from provision.output import write_output
from provision.spec.loader import load_spec
from provision.verify.hosts import FleetVerify, HostVerify, fleet_verify_json, verify_hosts
from provision.verify.render import junit_xml, render_table
from provision.verify.runs import VerifyInputs


def read_inputs(path: Path) -> VerifyInputs:
    """Inputs saved by ``verify --save-raw`` (``inputs.json``).

    Raises:
        FactsError: Missing file or not a verify inputs document.
    """
    try:
        return VerifyInputs.model_validate_json(read_json_text(path, what="verify inputs", error=FactsError))
    except ValidationError as exc:
        raise FactsError(f"{path}: not a verify inputs file ({first_error(exc)})") from None


def run_verify(
    spec_path: Path,
    inputs_file: Path | None = None,
    save_raw: Path | None = None,
    runs_dir: Path | None = None,
) -> HostVerify:
    """Verify this machine against the spec (or replay saved inputs): a fleet of one.

    A replay is labelled with the host its inputs were read on (:func:`replay_label`), not as
    this machine. ``runs_dir``: where a failed verify's support bundle goes (:func:`verify_hosts`);
    None: none.
    """
    spec = load_spec(spec_path)
    if inputs_file is None:
        one = Hosts(None, {LOCALHOST: HostSpec(spec, str(spec_path))})
        return verify_hosts(one, save_raw=save_raw, runs_dir=runs_dir).hosts[LOCALHOST]
    inputs = read_inputs(inputs_file)
    label = replay_label(inputs, inputs_file)
    one = Hosts(None, {label: HostSpec(spec, str(spec_path))})
    return verify_hosts(one, save_raw=save_raw, gathered={label: inputs}, runs_dir=runs_dir).hosts[label]


def replay_label(inputs: VerifyInputs, path: Path) -> str:
    """The host name a replay of ``path`` reports: the inventory host its inputs were read on
    (``verify -i INV --save-raw DIR`` writes ``DIR/<host>/inputs.json``), or ``inputs replayed from
    PATH`` when they record only ``localhost`` (a local verify's), which names no machine here."""
    recorded = inputs.facts.host
    return recorded if recorded and recorded != LOCALHOST else f"inputs replayed from {path}"


def emit(verified: HostVerify, console: Console, as_json: bool, junit: Path | None) -> int:
    """Print the table or JSON, write JUnit XML if asked; the exit code: 1 when a check failed.

    The JSON document is the fleet's with this one host
    (:func:`provision.fleet.verify_report.fleet_verify_json`); the text form prints the support
    bundle's path (the archive a failed verify wrote) last.
    """
    report = verified.report
    bundle = str(verified.bundle) if verified.bundle else None
    if as_json:
        jsonout.emit(fleet_verify_json(FleetVerify({verified.host: verified})))
    else:
        render_table(report, console)
        if bundle:
            console.print(f"Support bundle (mode 0600, secrets redacted): {bundle}", soft_wrap=True)
    if junit is not None:
        write_output(junit, junit_xml(report))
    return 1 if report.failed else 0
