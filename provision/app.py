"""The workflows behind the CLI: gather facts, plan, apply, confirm convergence.

The CLI module only parses options and prints; everything it runs is here, so
tests can drive whole workflows without a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from provision.catalog import Catalog
from provision.detect.facts import Facts
from provision.errors import FactsError, first_error
from provision.files import is_plan_file, read_json, read_json_text
from provision.hosts import HostSpec, detect_hosts, one_spec, plan_facts
from provision.plan import seal
from provision.plan.models import Plan
from provision.spec.loader import load_spec
from provision.spec.models import Spec


@dataclass(frozen=True)
class Target:
    """Where facts come from: this machine, saved facts, a raw probe directory, or an inventory."""

    facts_file: Path | None = None
    from_raw: Path | None = None
    inventory: Path | None = None
    limit: str | None = None
    forks: int | None = None  # Ansible forks for detection and apply; None keeps Ansible's default (5)

    @property
    def remote(self) -> bool:
        return self.inventory is not None


def gather(spec: Spec | None, target: Target, save_raw: Path | None = None) -> dict[str, Facts]:
    """Facts per host name (``localhost`` for this machine).

    Raises:
        FactsError: Contradictory sources (:func:`refuse_contradictions`), a facts file or raw
            directory that cannot be read, or an inventory that is missing or whose ``--limit``
            names a host or group it does not have.
    """
    from provision.detect import runner as detect

    refuse_contradictions(target, save_raw)
    if target.facts_file is not None:
        return {f.host: f for f in [read_facts(target.facts_file)]}
    if target.from_raw is not None:
        facts = detect.facts_from_raw(target.from_raw, host=detect.raw_host(target.from_raw))
        return {facts.host: facts}
    venv = spec.python.venv if spec and spec.python else None
    if target.inventory is not None and target.limit is not None:
        from provision.inventory import check_limit

        check_limit(target.inventory, target.limit, error=FactsError)  # Ansible would only warn
    return detect_hosts(target.inventory, target.limit, venv, save_raw, target.forks)


def refuse_contradictions(target: Target, save_raw: Path | None = None) -> None:
    """Refuse options that name two sources of facts, or that the chosen source would ignore.

    Raises:
        FactsError: One line naming the options (nothing was read or run).
    """
    given = [
        name
        for name, value in (
            ("--facts", target.facts_file),
            ("--from-raw", target.from_raw),
            ("-i/--inventory", target.inventory),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise FactsError(f"{' and '.join(given)} are different sources of facts: give one")
    if save_raw is not None and (target.facts_file is not None or target.from_raw is not None):
        raise FactsError(f"--save-raw keeps what detection reads; {given[0]} reads nothing: drop one")
    if target.limit is not None and target.inventory is None:
        raise FactsError("--limit selects hosts of an inventory: give -i INVENTORY too")


def read_facts(path: Path) -> Facts:
    """The one host's facts saved by ``provision detect --json`` (:func:`read_facts_documents`).

    Raises:
        FactsError: Missing file, invalid JSON, not facts, or facts of no host or of several (named).
    """
    documents = read_facts_documents(path)
    if len(documents) != 1:
        names = ", ".join(f.host for f in documents) or "none"
        raise FactsError(
            f"{path}: facts of {len(documents)} hosts ({names}); --facts reads one host's: "
            "save them with `provision detect -i INVENTORY -l HOST --json`"
        )
    return documents[0]


def read_facts_documents(path: Path) -> list[Facts]:
    """Every host's facts saved by ``provision detect --json``, in the file's order.

    Accepts each shape detect has written: ``{"format_version": 2, "hosts": [facts, ...],
    "unreachable": {...}}`` (every form since format 2), format 1's ``{"format_version": 1,
    "hosts": [...]}`` (``-i``/``--fleet``) and its one host's bare facts object, and a bare list
    (version 0.1). Each facts object carries its own ``format_version`` (1).

    Raises:
        FactsError: Missing file, invalid JSON, or not facts.
    """
    from typing import Any

    data: Any = read_json(path, what="facts", error=FactsError, label="provision facts")  # the one reader
    if isinstance(data, dict) and "hosts" in data and "os" not in data:
        data = data["hosts"]
    elif not isinstance(data, list):
        data = [data]
    if not isinstance(data, list):
        raise FactsError(f"{path}: not a provision facts file (hosts: a list of facts was expected)")
    found = []
    for index, document in enumerate(data):
        try:
            found.append(Facts.model_validate(document))
        except ValidationError as exc:
            where = f"hosts[{index}]: " if len(data) > 1 else ""
            raise FactsError(f"{path}: not a provision facts file ({where}{first_error(exc)})") from None
    return found


def plan_all(
    spec: Spec, facts: dict[str, Facts], spec_path: str | None, catalog: Catalog | None = None
) -> dict[str, Plan]:
    """One plan per host, every host held to ``spec`` (see :mod:`provision.hosts`)."""
    return plan_facts(one_spec(None, facts, HostSpec(spec, spec_path)), facts, catalog).plans


def load_plan(path: Path) -> Plan:
    """A plan saved with ``provision plan --out``.

    Raises:
        FactsError: The file is missing or is not a provision plan.
    """
    try:
        return Plan.model_validate_json(
            read_json_text(path, what="plan", error=FactsError, label="provision plan")
        )
    except ValidationError as exc:
        raise FactsError(f"{path}: not a provision plan ({first_error(exc)})") from None


def check_drift(saved: Plan, fresh: Plan) -> None:
    """Refuse a saved plan unless planning now gives the same plan (see :mod:`provision.plan.seal`).

    Raises:
        DriftError: The facts fingerprint, or another part of the plan, differs.
    """
    seal.check_unchanged(saved, fresh)


def spec_from(path: Path) -> tuple[Spec, Plan | None]:
    """The spec named by ``path``: a spec file, or the spec embedded in a saved plan."""
    if is_plan_file(path):
        saved = load_plan(path)
        seal.check_seal(saved, str(path))
        return saved.spec, saved
    return load_spec(path), None


__all__ = [
    "Target",
    "check_drift",
    "gather",
    "load_plan",
    "plan_all",
    "read_facts",
    "read_facts_documents",
    "spec_from",
]
