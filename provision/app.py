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
from provision.files import read_json_text
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
    """Facts per host name (``localhost`` for this machine)."""
    from provision.detect import runner as detect

    if target.facts_file is not None:
        return {f.host: f for f in [read_facts(target.facts_file)]}
    if target.from_raw is not None:
        facts = detect.facts_from_raw(target.from_raw, host=target.from_raw.resolve().name)
        return {facts.host: facts}
    venv = spec.python.venv if spec and spec.python else None
    return detect_hosts(target.inventory, target.limit, venv, save_raw, target.forks)


def read_facts(path: Path) -> Facts:
    """Facts saved by ``provision detect --json``.

    Raises:
        FactsError: Missing file, invalid JSON, or not a facts document.
    """
    try:
        return Facts.model_validate_json(
            read_json_text(path, what="facts", error=FactsError, label="provision facts")
        )
    except ValidationError as exc:
        raise FactsError(f"{path}: not a provision facts file ({first_error(exc)})") from None


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


def is_plan_file(path: Path) -> bool:
    """Whether ``path`` looks like a saved plan (JSON) rather than a spec (YAML)."""
    return path.suffix == ".json"


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
    "spec_from",
]
