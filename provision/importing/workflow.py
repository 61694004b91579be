"""``provision import``: read hosts, draft and settle each one's spec, group hosts by machine shape,
and write the specs, their locks and (for an inventory) a fleet file.

A *shape* is one spec: hosts whose imported specs are equal but for name and description share it.
Exit codes: 0 every spec written plans no changes on its hosts; 2 written, but a host's plan still
changes or refuses something (named in the header and on stderr); 1 nothing written, or a host
could not be imported (the others are written).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from provision.catalog import Catalog, load_catalog
from provision.detect.facts import Facts, OsRelease, Unknown
from provision.errors import ProvisionError
from provision.hosts import unreachable_reason
from provision.importing.draft import Draft, NotImportable, updated
from provision.importing.gpu import gpu_section
from provision.importing.lock import imported_lock
from provision.importing.machine import fabric_manager_section, gpus_section, os_section
from provision.importing.render import render
from provision.importing.settle import Settled, plan_of, settle
from provision.importing.stack import cuda_section, driver_section, python_section, repository_note
from provision.plan.models import Plan
from provision.plan.render import summary
from provision.unknown import because

NOT_IMPORTED = "bios, verify, monitoring, serve, containers"
"""Sections import leaves to their defaults (nothing to read them from, or a choice only a person makes)."""


@dataclass(frozen=True)
class Source:
    """Where the hosts' facts come from (one of them), and the options that shape the import.

    Attributes:
        venv: The venv to read (``--venv``); None searches this machine's (live, local only).
        name: The spec's name for one host (``--name``); None derives it from the shape.
        gpus: ``--gpus MODEL[:COUNT]``: the GPU model (and count) where the facts cannot name them.
    """

    facts_file: Path | None = None
    from_raw: Path | None = None
    inventory: Path | None = None
    limit: str | None = None
    forks: int | None = None
    venv: str | None = None
    name: str | None = None
    gpus: tuple[str, int | None] | None = None

    @property
    def fleet(self) -> bool:
        return self.inventory is not None


@dataclass(frozen=True)
class Shape:
    """One spec and the hosts it describes."""

    name: str
    data: dict[str, Any]
    notes: dict[str, list[str]]
    hosts: tuple[str, ...]
    plans: dict[str, Plan] = field(default_factory=dict)
    text: str = ""
    path: Path | None = None


@dataclass
class Imported:
    """Everything one ``provision import`` produced."""

    source: Source
    shapes: list[Shape] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    locks: dict[str, dict[str, Any]] = field(default_factory=dict)
    fleet_text: str | None = None
    files: dict[Path, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.failed or not self.shapes:
            return 1
        plans = [p for s in self.shapes for p in s.plans.values()]
        return 2 if any(p.refused or p.changes for p in plans) else 0


def import_hosts(source: Source, out: Path | None, catalog: Catalog | None = None) -> Imported:
    """Read every host of ``source``, settle its spec, group by shape and render the files for ``out``
    (a spec file for one host, a directory for an inventory; None: nothing to write).

    Raises:
        NotImportable: One host (not an inventory) could not be imported.
        FactsError: The facts could not be read (see :func:`gather`).
    """
    cat = catalog or load_catalog()
    facts, venv_notes = gather(source)
    result = Imported(source)
    settled: dict[str, Settled] = {}
    for host, host_facts in facts.items():
        if (lost := unreachable_reason(host_facts)) is not None:
            if not source.fleet:
                raise NotImportable(f"cannot import: {lost}")
            result.failed[host] = lost
            continue
        try:
            settled[host] = import_one(host_facts, cat, source, venv_notes.get(host))
        except NotImportable as exc:
            if not source.fleet:
                raise NotImportable(f"cannot import: {exc}") from None
            result.failed[host] = f"cannot import: {exc}"
    result.shapes = _named(_grouped(settled), source.name if not source.fleet else None)
    _finish(result, facts, cat, out)
    return result


def import_one(
    facts: Facts, catalog: Catalog, source: Source | None = None, venv_note: tuple[str, str] | None = None
) -> Settled:
    """One host's spec, settled against its facts (its name is a placeholder until it is grouped).

    Raises:
        NotImportable: The facts cannot describe a spec (see :mod:`provision.importing.machine`).
    """
    draft = Draft()
    draft.put("schema_version", 1)
    draft.put("name", "imported")
    draft.put("description", "")
    os_section(draft, facts)
    options = source or Source()
    gpu = gpus_section(draft, facts, catalog, options.gpus)
    distro = draft.data["os"]["distro"]
    driver_section(draft, facts, catalog, gpu, distro)
    cuda_section(draft, facts, catalog, distro)
    fabric_manager_section(draft, facts)
    repository_note(draft, facts, catalog)
    python_section(draft, facts, options.venv)
    gpu_section(draft, facts)
    if venv_note is not None:
        draft.note(*venv_note)
    return settle(draft, facts, catalog)


def gather(source: Source) -> tuple[dict[str, Facts], dict[str, tuple[str, str]]]:
    """Facts per host, and for this machine (live, no ``--venv``) the note on the venv search.

    Raises:
        FactsError: A facts file or raw directory that cannot be read, an inventory without hosts.
    """
    from provision.app import read_facts
    from provision.detect import runner

    if source.facts_file is not None:
        facts = read_facts(source.facts_file)
        return {facts.host: facts}, {}
    if source.from_raw is not None and source.inventory is not None:
        from provision.inventory import read_inventory

        hosts = [h.name for h in read_inventory(source.inventory, source.limit, error=ProvisionError).hosts]
        return runner.facts_from_raw_hosts(source.from_raw, hosts, dict.fromkeys(hosts, source.venv)), {}
    if source.from_raw is not None:
        facts = runner.facts_from_raw(
            source.from_raw, host=runner.raw_host(source.from_raw), venv=source.venv
        )
        return {facts.host: facts}, {}
    if source.inventory is not None:
        from provision.hosts import detect_hosts

        return detect_hosts(source.inventory, source.limit, source.venv, forks=source.forks), {}
    venv, note = (source.venv, None) if source.venv else search_venv()
    facts = runner.detect_local(venv=venv)
    return {facts.host: facts}, ({facts.host: note} if note else {})


def search_venv() -> tuple[str | None, tuple[str, str]]:
    """This machine's venv to import (the first holding torch), and the note saying how it was found."""
    from provision.detect.domains.python import VenvSearchFact
    from provision.detect.runner import run_probes

    probe = VenvSearchFact.probe()
    assert probe is not None  # not a venv fact
    out = run_probes([probe])[VenvSearchFact.id]
    return chosen_venv(VenvSearchFact.parse(out.output, out.rc))


def chosen_venv(found: Any) -> tuple[str | None, tuple[str, str]]:
    """The venv to import from a :class:`~provision.detect.domains.python.VenvSearch` (or an
    Unknown), and the note (path, text) saying why."""
    if isinstance(found, Unknown):
        return None, ("python", because("venvs not searched", found.unknown) + "; give --venv PATH")
    roots = " and ".join(found.roots)
    with_torch = found.with_torch()
    if not with_torch:
        seen = ", ".join(c.path for c in found.found) or "none"
        return None, (
            "python",
            f"no venv with torch under {roots} (venvs: {seen}); give --venv PATH to import one",
        )
    pick, others = with_torch[0], [c.path for c in found.found if c.path != with_torch[0].path]
    also = f"; also there: {', '.join(others)} (--venv PATH imports another)" if others else ""
    return pick.path, ("python.venv", f"found under {roots} with torch {pick.torch}{also}")


def _grouped(settled: Mapping[str, Settled]) -> list[Shape]:
    """Hosts with equal specs (but for name and description) as one shape each, in host order."""
    shapes: dict[str, Shape] = {}
    for host, one in settled.items():
        key = json.dumps(
            {k: v for k, v in one.data.items() if k not in ("name", "description")}, sort_keys=True
        )
        if key in shapes:
            shapes[key] = Shape("", shapes[key].data, shapes[key].notes, (*shapes[key].hosts, host))
        else:
            shapes[key] = Shape("", one.data, one.notes, (host,))
    return list(shapes.values())


def _named(shapes: list[Shape], name: str | None) -> list[Shape]:
    """Each shape named ``<gpu>-x<count>-<os>`` (``-2``, ``-3`` for a second shape of that name)."""
    taken: dict[str, int] = {}
    named = []
    for shape in shapes:
        base = name or _shape_name(shape.data)
        taken[base] = taken.get(base, 0) + 1
        final = base if taken[base] == 1 else f"{base}-{taken[base]}"
        named.append(Shape(final, shape.data, shape.notes, shape.hosts))
    return named


def _shape_name(data: Mapping[str, Any]) -> str:
    gpus, os = data["gpus"], data["os"]
    return f"{gpus['model']}-x{gpus['count']}-{os['distro']}{os['version'].replace('.', '')}"


def _finish(result: Imported, facts: Mapping[str, Facts], catalog: Catalog, out: Path | None) -> None:
    """Plans, texts, locks and the files to write for every shape."""
    fleet = result.source.fleet
    for i, shape in enumerate(result.shapes):
        data = updated(shape.data, {"name": shape.name, "description": _description(shape, facts)})
        plans = {h: plan_of(data, facts[h], catalog) for h in shape.hosts}
        path = (out / "specs" / f"{shape.name}.yaml" if fleet else out) if out is not None else None
        lock_name = _lock_path(out, shape.hosts[0], fleet)
        header = _header(result.source, shape, plans, lock_name, path)
        result.shapes[i] = Shape(
            shape.name, data, shape.notes, shape.hosts, plans, render(data, shape.notes, header), path
        )
        for host, plan in plans.items():
            lock = imported_lock(
                plan.model_copy(update={"spec_path": str(path) if path else None}),
                facts[host],
                catalog,
                _source_text(result.source, host),
            )
            result.locks[host] = lock.model_dump(mode="json")
    if fleet:
        result.fleet_text = _fleet_text(result, out)
    if out is not None:
        result.files = _files(result, out)


def _description(shape: Shape, facts: Mapping[str, Facts]) -> str:
    first = facts[shape.hosts[0]]
    os = first.os.pretty_name if isinstance(first.os, OsRelease) and first.os.pretty_name else "its OS"
    gpus = shape.data["gpus"]
    hosts = ", ".join(shape.hosts[:4]) + (f" and {len(shape.hosts) - 4} more" if len(shape.hosts) > 4 else "")
    return f"{gpus['count']} x {gpus['model']} on {os}, imported from {hosts}."


def _lock_path(out: Path | None, host: str, fleet: bool) -> Path | None:
    from provision.detect.runner import host_dir_name

    if out is None:
        return None
    if fleet:
        return out / "locks" / f"{host_dir_name(host)}.lock.json"
    return out.with_name(f"{out.stem if out.suffix in ('.yaml', '.yml') else out.name}.lock.json")


def _source_text(source: Source, host: str) -> str:
    if source.facts_file is not None:
        return f"facts file {source.facts_file}"
    if source.from_raw is not None:
        return f"raw outputs in {source.from_raw}" + (f" of inventory host {host}" if source.fleet else "")
    if source.inventory is not None:
        return f"inventory host {host} ({source.inventory})"
    return f"this machine ({host})"


def _header(
    source: Source, shape: Shape, plans: Mapping[str, Plan], lock: Path | None, path: Path | None
) -> list[str]:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    where = (
        _source_text(source, shape.hosts[0])
        if len(shape.hosts) == 1
        else f"{len(shape.hosts)} hosts of {source.inventory}"
    )
    lines = [f"Imported by `provision import` from {where} on {when}."]
    if len(shape.hosts) > 1:
        lines.append(f"Hosts of this shape: {', '.join(shape.hosts)}.")
    lines += [_plan_line(h, p, path) for h, p in plans.items()]
    lines.append(
        "The comment above a key says how its value was read or chosen: review them before `provision apply`."
    )
    lines.append(f"Not imported (their defaults apply): {NOT_IMPORTED}.")
    if lock is not None:
        lines.append(f"The exact versions read: {lock.name if not source.fleet else lock.parent.name + '/'}.")
    return lines


def _plan_line(host: str, plan: Plan, path: Path | None) -> str:
    said = summary(plan)
    where = f"`provision plan {path.name if path else 'SPEC'}` on {host}"
    if not plan.refused and not plan.changes:
        return f"{where}: {said}"
    what = [f"refused [{f.rule}] {f.message}" for f in plan.blockers] + [
        f"{s.component.value}: {s.reason}" for s in plan.changes
    ]
    return f"{where} still shows: {'; '.join(what)}"


def _fleet_text(result: Imported, out: Path | None) -> str:
    """The fleet file: the inventory (relative to the fleet file) and each host's shape."""
    source = result.source
    assert source.inventory is not None
    base = out.resolve() if out is not None else Path.cwd()
    inventory = os.path.relpath(source.inventory.resolve(), base)
    specs = {h: f"specs/{s.name}.yaml" for s in result.shapes for h in s.hosts}
    limit = f" -l '{':'.join(f'!{h}' for h in result.failed)}'" if result.failed else ""
    header = [
        f"Imported by `provision import` from {source.inventory}: one spec per machine shape.",
        f"`provision plan --fleet fleet.yaml{limit}` plans every host against its own spec.",
    ]
    if result.failed:
        header.append(f"Not imported: {'; '.join(f'{h} ({why})' for h, why in result.failed.items())}.")
    return render({"inventory": inventory, "specs": specs}, {}, header)


def _files(result: Imported, out: Path) -> dict[Path, str]:
    files = {s.path: s.text for s in result.shapes if s.path is not None}
    for host, lock in result.locks.items():
        path = _lock_path(out, host, result.source.fleet)
        if path is not None:
            files[path] = json.dumps(lock, indent=2) + "\n"
    if result.fleet_text is not None:
        files[out / "fleet.yaml"] = result.fleet_text
    return files


def document(result: Imported, written: list[Path]) -> dict[str, Any]:
    """``--json``'s document (see README, "JSON output"), the hosts form
    (:data:`provision.jsonout.HOSTS_FORMAT`): ``hosts`` is a list of ``{host, spec, summary,
    changes, blockers, lock, error}``; format 1 keyed them by name (:func:`provision.jsonout.host_rows`
    reads both)."""
    from provision.jsonout import HOSTS_FORMAT

    hosts: dict[str, Any] = {}
    for shape in result.shapes:
        for host, plan in shape.plans.items():
            hosts[host] = {
                "host": host,
                "spec": shape.name,
                "summary": summary(plan),
                "changes": [f"{s.component.value}: {s.reason}" for s in plan.changes],
                "blockers": [f"[{f.rule}] {f.message}" for f in plan.blockers],
                "lock": result.locks.get(host),
                "error": None,
            }
    hosts |= {h: {"host": h, "spec": None, "error": why} for h, why in result.failed.items()}
    specs = {
        s.name: {
            "file": str(s.path) if s.path else None,
            "hosts": list(s.hosts),
            "spec": s.data,
            "notes": s.notes,
            "yaml": s.text,
        }
        for s in result.shapes
    }
    outcome = {0: "imported", 2: "imported-with-changes"}.get(result.exit_code, "failed")
    return {
        "format_version": HOSTS_FORMAT,
        "outcome": outcome,
        "hosts": list(hosts.values()),
        "specs": specs,
        "fleet": result.fleet_text,
        "written": [str(p) for p in written],
    }
