"""The BIOS checklist of every host of a fleet: one document per host from remote detection, and an index.

Each host's document is rendered exactly as a single host's (:func:`provision.checklist.render_documents`
with that host's facts and spec); the index lists the hosts with their counts of confirmed, not
confirmed, observed and not observable items. A host Ansible could not reach (or, offline, without
its saved outputs) still gets its document: every item is not observable, with the reason; the
command names it as ``plan`` does and exits 1 (:func:`provision.fleet.summary.print_unreachable`).
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from provision.catalog import load_catalog
from provision.checklist import EXTENSIONS, Format, checklist_for, html_to_pdf, render_documents
from provision.checklist.render import Paper
from provision.detect.facts import Facts, Unknown
from provision.detect.peer import peer_access
from provision.detect.runner import unknown_facts
from provision.fleet.mapping import Fleet
from provision.fleet.orchestrate import held_hosts, unreachable_reason
from provision.hosts import detect_by_venv
from provision.output import make_output_directory, write_output
from provision.spec.models import Spec

COLUMNS = ("confirmed", "not-confirmed", "observed", "not-observable")
"""Observation states, in the index's column order."""


@dataclass(frozen=True)
class IndexRow:
    """One host in the index.

    Attributes:
        host: The inventory hostname.
        spec: The spec file the document was made for.
        document: The document's file name, relative to the index.
        counts: Items per observation state (every key of :data:`COLUMNS`).
        unreachable: Ansible's reason when the host could not be detected, else None.
        failed: Why the host has no document: its spec could not be loaded
            (``spec not loaded: ...``); ``document`` is empty then.
    """

    host: str
    spec: Path
    document: str
    counts: dict[str, int]
    unreachable: str | None = None
    failed: str | None = None


def host_facts(host: str, facts: Facts | None) -> tuple[Facts, str | None]:
    """The host's facts and its unreachable reason; an unreachable host's hardware carries the reason."""
    reason = unreachable_reason(facts)
    if facts is None or reason is not None:
        why = reason or "host unreachable"
        return unknown_facts(host, why).model_copy(update={"hardware": Unknown(unknown=why)}), why
    return facts, None


def observation_counts(spec: Spec, facts: Facts) -> dict[str, int]:
    """How many of the spec's checklist items are in each observation state on ``facts``."""
    checklist = checklist_for(
        spec,
        None,
        None,
        host=facts.host,
        facts=facts,
        peer=peer_access(facts, load_catalog(), spec.gpus.model),
    )
    seen: Counter[str] = Counter(item.observation.status for item in checklist.items if item.observation)
    return {status: seen.get(status, 0) for status in COLUMNS}


@dataclass(frozen=True)
class Written:
    """What :func:`write_fleet_checklists` wrote: the paths (the index last), host -> why it has
    no document (its spec could not be loaded), and host -> why nothing could be read from it
    (unreachable, or no saved outputs under ``--from-raw``: its document shows nothing observed)."""

    paths: list[Path]
    failed: dict[str, str]
    unreachable: dict[str, str] = field(default_factory=dict)


def write_fleet_checklists(fleet: Fleet, fmt: Format, paper: Paper, output: Path) -> Written:
    """Detect every host through Ansible (or read it from ``fleet.from_raw/<host>/``, offline), write
    ``<host>.<ext>`` per host and ``index.<ext>`` into ``output``. A host whose own spec cannot be
    loaded gets no document, only its row in the index with the reason.

    Raises:
        ChecklistError: ``fmt`` is ``pdf`` and Chromium is missing or fails.
        FactsError: ansible-playbook failed before any host reported, or a saved host directory
            cannot be read.
        SpecError: Every host is held to one spec, and it cannot be loaded.
    """
    hosts, failed = held_hosts(fleet)
    detected = detect_by_venv(hosts) if hosts.specs else {}
    make_output_directory(output)
    written: list[Path] = []
    rows: list[IndexRow] = []
    origin = (
        f"read offline from {fleet.from_raw}/<host>/"
        if fleet.from_raw is not None
        else f"detected through Ansible from {fleet.inventory}"
    )
    for host, path in fleet.specs.items():
        if host in failed:
            rows.append(IndexRow(host, path, "", dict.fromkeys(COLUMNS, 0), failed=failed[host]))
            continue
        spec = hosts.specs[host].spec
        facts, reason = host_facts(host, detected.get(host))
        target = output / f"{host}.{EXTENSIONS[fmt]}"
        _write(target, _render(spec, fmt, paper, facts, origin))
        written.append(target)
        rows.append(IndexRow(host, path, target.name, observation_counts(spec, facts), reason))
    index = output / f"index.{EXTENSIONS[fmt]}"
    _write(index, render_index(rows, fmt, paper, fleet.inventory))
    lost = {row.host: row.unreachable for row in rows if row.unreachable is not None}
    return Written([*written, index], failed, lost)


def _render(spec: Spec, fmt: Format, paper: Paper, facts: Facts, origin: str) -> str | bytes:
    catalog = load_catalog()
    gpu = catalog.gpus.get(spec.gpus.model)
    documents = render_documents(
        spec,
        fmt,
        paper,
        {facts.host: facts},
        facts_from=origin,
        gpu_tdp_w=gpu.tdp_w if gpu else None,
        gpu_memory_gib=gpu.memory_gib if gpu else None,
        catalog=catalog,
    )
    return documents[facts.host]


def _write(path: Path, document: str | bytes) -> None:
    write_output(path, document)


def render_index(rows: list[IndexRow], fmt: Format, paper: Paper, inventory: Path) -> str | bytes:
    """The index in the documents' format (Markdown, HTML, or PDF printed from the HTML)."""
    if fmt == "md":
        return index_markdown(rows, inventory)
    page = index_html(rows, inventory, paper)
    return html_to_pdf(page) if fmt == "pdf" else page


def _cells(row: IndexRow) -> list[str]:
    state = row.failed or (f"unreachable: {row.unreachable}" if row.unreachable else "detected")
    return [row.host, str(row.spec), *(str(row.counts[c]) for c in COLUMNS), state, row.document or "-"]


HEADERS = ("host", "spec", "confirmed", "not confirmed", "observed", "not observable", "state", "document")


def index_markdown(rows: list[IndexRow], inventory: Path) -> str:
    """The index as a Markdown table, one row per host."""
    lines = [
        "# BIOS and hardware checklists",
        "",
        f"Inventory `{inventory}`, {len(rows)} host(s), generated {date.today().isoformat()}.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "| " + " | ".join("---" for _ in HEADERS) + " |",
    ]
    for row in rows:
        cells = [c.replace("|", "\\|") for c in _cells(row)]
        cells[-1] = f"[{cells[-1]}]({row.document})" if row.document else cells[-1]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def index_html(rows: list[IndexRow], inventory: Path, paper: Paper) -> str:
    """The index as a printable HTML page, one table row per host, each linking its document."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS)
    body = "".join(_html_row(row) for row in rows)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>BIOS checklists</title>'
        f"<style>@page {{ size: {paper}; margin: 15mm; }} body {{ font-family: sans-serif; }} "
        "table { border-collapse: collapse; } th, td { border: 1px solid #999; padding: 2px 6px; }</style>"
        f"</head><body><h1>BIOS and hardware checklists</h1><p>Inventory <code>{html.escape(str(inventory))}"
        f"</code>, {len(rows)} host(s), generated {date.today().isoformat()}.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></body></html>\n"
    )


def _html_row(row: IndexRow) -> str:
    cells = [html.escape(c) for c in _cells(row)]
    if row.document:
        cells[-1] = f'<a href="{html.escape(row.document)}">{cells[-1]}</a>'
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
