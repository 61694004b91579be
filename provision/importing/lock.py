"""The lock of an imported machine: the exact state the imported spec was read from.

The same document as the lock a converged apply records (:mod:`provision.lock.model`, built by its
:func:`~provision.lock.model.lock_document`), less what only an apply has (a number in the host's
history, a run directory, verify's result), plus where the facts came from. The venv's wheels are
named with their versions as the venv probe read them; their ``RECORD`` hashes are read by the lock
module on the host at apply time only, so they are absent here. Shape (JSON, format 1)::

    {format_version: 1, created_at, host, provision_version, source, spec_path, spec_digest, spec,
     repository: {url, fingerprint} | null, packages: [{name, version, hold}], pins: str | null,
     venv: {path, wheels: [{name, version}]} | null}
"""

from __future__ import annotations

from pydantic import Field

from provision.catalog import Catalog
from provision.detect.facts import Facts, Venv
from provision.lock.model import LockedState, LockedVenv, LockedWheel, lock_document
from provision.plan.models import Plan
from provision.spec.models import Spec


class ImportedLock(LockedState):
    """What ``provision import`` read, exact (see the module docstring)."""

    source: str = Field(description="Where the facts came from: this machine, a raw directory, a facts file.")


def imported_lock(plan: Plan, facts: Facts, catalog: Catalog, source: str) -> ImportedLock:
    """The lock of ``facts`` for the imported spec ``plan.spec`` (pure)."""
    document = lock_document(plan, facts, catalog, run_dir=None)
    kept = {k: v for k, v in document.items() if k in ImportedLock.model_fields}
    return ImportedLock.model_validate({**kept, "source": source, "venv": _venv(plan.spec, facts)})


def _venv(spec: Spec, facts: Facts) -> LockedVenv | None:
    venv = facts.venv
    if spec.python is None or not isinstance(venv, Venv) or venv.path != spec.python.venv:
        return None
    wheels = (LockedWheel(name=n, version=v) for n, v in sorted(venv.distributions.items()))
    return LockedVenv(path=venv.path, wheels=tuple(wheels))
