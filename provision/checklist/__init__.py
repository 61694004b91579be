"""Printable BIOS / hardware checklist: the manual steps software cannot do, and how Linux checks them.

Entry point for the CLI: :func:`render`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypedDict, Unpack

from provision.catalog import Catalog
from provision.checklist.items import (
    Checklist,
    ChecklistItem,
    checklist_for,
    load_default_items,
    merge_items,
    psu_watts,
)
from provision.checklist.observe import Observation, observe
from provision.checklist.pdf import ChecklistError, html_to_pdf
from provision.checklist.render import Paper, render_html, render_markdown
from provision.detect.facts import Facts
from provision.detect.peer import PeerAccess, peer_access
from provision.output import make_output_directory, write_output
from provision.spec.models import Spec

__all__ = [
    "Checklist",
    "ChecklistError",
    "ChecklistItem",
    "Observation",
    "Paper",
    "checklist_for",
    "html_to_pdf",
    "load_default_items",
    "merge_items",
    "observe",
    "psu_watts",
    "render",
    "render_html",
    "render_markdown",
    "render_pdf",
]


def render(
    spec: Spec,
    fmt: Literal["md", "html"],
    paper: Paper = "a4",
    *,
    gpu_tdp_w: int | None = None,
    gpu_memory_gib: float | None = None,
    host: str | None = None,
    facts: Facts | None = None,
    facts_from: str | None = None,
    peer: PeerAccess | None = None,
) -> str:
    """Build the checklist for ``spec`` (with each item's observed state when ``facts`` is given).

    Args:
        spec: The validated spec.
        fmt: ``"md"`` for the terminal (print with ``rich.markdown.Markdown``) or ``"html"`` to print.
        paper: Paper size for HTML (``"a4"`` or ``"letter"``); ignored for Markdown.
        gpu_tdp_w: Catalog board power of one GPU in watts; None prints "TDP unknown in catalog".
        gpu_memory_gib: Catalog memory of one GPU in GiB; None prints "memory unknown in catalog".
        host: Host name for the header; None takes ``facts.host``, or leaves a blank to fill in.
        facts: Detected facts of the host; None renders the blank paper checklist.
        facts_from: Where the facts came from, for the header (``detected``, a file name).
        peer: Whether the GPUs do P2P (:func:`provision.detect.peer.peer_access`), for the ACS item.

    Returns:
        The rendered document.

    Raises:
        SpecError: If ``spec.bios`` repeats an item id or skips an unknown id.
        CatalogError: If the shipped default items fail to load.
    """
    checklist = checklist_for(
        spec, gpu_tdp_w, gpu_memory_gib, host=host, facts=facts, facts_from=facts_from, peer=peer
    )
    if fmt == "html":
        return render_html(checklist, paper)
    return render_markdown(checklist)


class RenderOptions(TypedDict, total=False):
    """The keyword arguments of :func:`render`, for callers that pass them through."""

    gpu_tdp_w: int | None
    gpu_memory_gib: float | None
    host: str | None
    facts: Facts | None
    facts_from: str | None
    peer: PeerAccess | None


def render_pdf(spec: Spec, paper: Paper = "a4", **options: Unpack[RenderOptions]) -> bytes:
    """Render the printable HTML and print it to PDF with headless Chromium.

    Arguments as for :func:`render`.

    Raises:
        ChecklistError: Chromium is not installed or failed to print.
    """
    return html_to_pdf(render(spec, "html", paper, **options))


Format = Literal["md", "html", "pdf"]
EXTENSIONS: dict[Format, str] = {"md": "md", "html": "html", "pdf": "pdf"}


def render_documents(
    spec: Spec,
    fmt: Format,
    paper: Paper,
    facts_by_host: dict[str, Facts],
    *,
    facts_from: str | None = None,
    host: str | None = None,
    gpu_tdp_w: int | None = None,
    gpu_memory_gib: float | None = None,
    catalog: Catalog | None = None,
) -> dict[str | None, str | bytes]:
    """One document per host of ``facts_by_host``, or one blank document keyed None when it is empty;
    with ``catalog``, each tailored to whether its GPUs do P2P (:func:`~provision.detect.peer.peer_access`).

    Returns:
        ``{host: text (md, html) or PDF bytes}``.

    Raises:
        ChecklistError: ``fmt`` is ``pdf`` and Chromium is missing or fails.
    """
    hosts: dict[str | None, Facts | None] = {host: None}
    if facts_by_host:
        hosts = {name: facts for name, facts in facts_by_host.items()}
    documents: dict[str | None, str | bytes] = {}
    for name, facts in hosts.items():
        html_or_md = render(
            spec,
            "md" if fmt == "md" else "html",
            paper,
            gpu_tdp_w=gpu_tdp_w,
            gpu_memory_gib=gpu_memory_gib,
            host=name,
            facts=facts,
            facts_from=facts_from,
            peer=peer_access(facts, catalog, spec.gpus.model) if catalog is not None else None,
        )
        documents[name] = html_to_pdf(html_or_md) if fmt == "pdf" else html_or_md
    return documents


def write_documents(documents: dict[str | None, str | bytes], output: Path, fmt: Format) -> list[Path]:
    """Write one file, or with several hosts one ``<host>.<ext>`` per host into directory ``output``.

    One document and an existing directory ``output``: ``<host>.<ext>`` there (``checklist.<ext>``
    without a host).

    Returns:
        The paths written.
    """
    if len(documents) == 1 and not output.is_dir():
        targets = {output: next(iter(documents.values()))}
    else:
        make_output_directory(output)
        targets = {
            output / f"{name or 'checklist'}.{EXTENSIONS[fmt]}": doc for name, doc in documents.items()
        }
    for path, doc in targets.items():
        write_output(path, doc)
    return list(targets)
