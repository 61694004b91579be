"""The lock: what one converged apply left on a host, exact enough to return to it.

Written on the target by ``playbooks/library/provision_lock.py`` (``/var/lib/provision/lock.json``
and ``/var/lib/provision/locks/NNNN.json``); the controller builds everything but the wheels,
which the module reads from the venv's ``*.dist-info`` on the host. Shapes (JSON, format 1)::

    {format_version: 1, number: int, created_at: ISO 8601 UTC, host, provision_version, run_dir,
     spec_path, spec_digest: "sha256:<hex>", spec: Spec,
     repository: {url, fingerprint} | null,
     packages: [{name, version, hold}], pins: str | null,
     venv: {path, wheels: [{name, version, record_sha256, hashes: {algo: hex}}]} | null,
     verify: {at, spec_digest, passed, counts: {status: n}, failed: [check id]} | null}
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from provision import __version__
from provision.catalog import Catalog
from provision.detect.facts import Facts, Unknown
from provision.models import Frozen
from provision.plan.models import Plan
from provision.spec.models import Spec

LOCK_DIR = "/var/lib/provision"
LOCK_FILE = f"{LOCK_DIR}/lock.json"


class LockedPackage(Frozen):
    """One managed package at its exact installed version, and whether it was held."""

    name: str
    version: str = Field(description="The package manager's full version, e.g. 580.95.05-1.")
    hold: bool = False


class LockedWheel(Frozen):
    """One distribution in the venv: PEP 503 name, version, and the hashes available for it."""

    name: str
    version: str
    record_sha256: str | None = Field(None, description="SHA-256 of the dist-info RECORD file.")
    hashes: dict[str, str] = Field(
        default_factory=dict, description="PEP 610 archive hashes pip recorded (URL/file installs only)."
    )


class LockedVenv(Frozen):
    """The spec's venv as it was locked."""

    path: str
    wheels: tuple[LockedWheel, ...] = ()


class LockedRepository(Frozen):
    """The package repository the versions came from."""

    url: str
    fingerprint: str = Field(description="Full OpenPGP fingerprint of its signing key.")


class VerifyResult(Frozen):
    """``provision verify``'s result on the host while this lock was current."""

    at: str
    spec_digest: str = Field(description="The spec verified against: the lock's own.")
    passed: bool
    counts: dict[str, int] = Field(default_factory=dict)
    failed: tuple[str, ...] = Field((), description="Failed checks, ``id[subject]``.")


class LockedState(Frozen):
    """What a host runs, exact: the part of a lock that reading the machine gives (also
    ``provision import``'s lock, :mod:`provision.importing.lock`)."""

    format_version: Literal[1] = 1
    created_at: str
    host: str
    provision_version: str
    spec_path: str | None = None
    spec_digest: str
    spec: Spec
    repository: LockedRepository | None = None
    packages: tuple[LockedPackage, ...] = ()
    pins: str | None = None
    venv: LockedVenv | None = None

    def package(self, name: str) -> LockedPackage | None:
        """The locked package ``name``, or None."""
        return next((p for p in self.packages if p.name == name), None)


class Lock(LockedState):
    """One lock of a converged apply: see the module docstring for the JSON shape."""

    number: int = Field(ge=1)
    run_dir: str | None = None
    verify: VerifyResult | None = None


def spec_digest(spec: Spec) -> str:
    """``sha256:<hex>`` over the spec's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def lock_document(plan: Plan, facts: Facts, catalog: Catalog, run_dir: str | None) -> dict[str, Any]:
    """The lock the controller sends for a converged host (pure); the module adds number and wheels.

    Packages are every package detection records (``catalog.package_name_patterns``) that the package
    database lists as installed, with their hold state; pins are provision's pins (locks) file as read.
    """
    installed = () if isinstance(facts.packages, Unknown) else facts.packages
    locks = facts.package_locks
    return {
        "format_version": 1,
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": plan.host,
        "provision_version": __version__,
        "run_dir": run_dir,
        "spec_path": plan.spec_path,
        "spec_digest": spec_digest(plan.spec),
        "spec": plan.spec.model_dump(mode="json"),
        "repository": repository(plan.spec, catalog),
        "packages": [
            {"name": p.name, "version": p.version, "hold": p.held}
            for p in sorted(installed, key=lambda p: p.name)
            if p.installed
        ],
        "pins": None if isinstance(locks, Unknown) else locks.pins,
        "verify": None,
    }


def repository(spec: Spec, catalog: Catalog) -> dict[str, str] | None:
    """The spec's mirror, else the catalog's NVIDIA repository for its OS; None when neither."""
    if spec.repository is not None:
        return {"url": str(spec.repository.url), "fingerprint": spec.repository.fingerprint}
    repo = catalog.repository(spec.os.repo_code, arch=spec.os.architecture)
    return {"url": repo.url, "fingerprint": repo.fingerprint} if repo else None
