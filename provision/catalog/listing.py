"""What a spec may name, as ``provision catalog`` lists it: one table per spec field family.

Pure: each table is a list of rows (plain data, JSON-ready) built from the loaded catalog, with
the spec field it feeds and each row's source keys (``data/sources.yaml``); the listing closes
with those keys' citations and URLs, so that every key a row (or a finding) names can be opened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from provision.catalog.catalog import Catalog
from provision.catalog.serving import load_serving

Table = Literal["gpus", "drivers", "cuda", "torch", "vllm", "monitoring"]
TABLES: tuple[Table, ...] = ("gpus", "drivers", "cuda", "torch", "vllm", "monitoring")

SPEC_FIELDS: dict[Table, str] = {
    "gpus": "gpus.model",
    "drivers": "driver.branch",
    "cuda": "cuda.toolkit",
    "torch": "python.torch, python.cuda_variant",
    "vllm": "serve.vllm",
    "monitoring": "monitoring.dcgm",
}
"""The spec fields each table's first column may be written into."""


def gpu_rows(cat: Catalog) -> list[dict[str, Any]]:
    """One row per GPU model: id, name, architecture, compute capability, memory, form factor."""
    return [
        {
            "id": g.id,
            "name": g.name,
            "architecture": g.architecture.value,
            "compute_capability": str(g.compute_capability),
            "memory_gib": g.memory_gib,
            "form_factor": g.form_factor,
            "nvswitch": g.nvswitch,
            "source": list(g.source),
        }
        for g in cat.gpus.values()
    ]


def driver_rows(cat: Catalog) -> list[dict[str, Any]]:
    """One row per driver branch: its type (LTSB, PB, NFB), end of life (``June 2028``, ``ended``),
    a release date where sourced, newest CUDA major, and the architectures it supports."""
    return [
        {
            "branch": b.branch,
            "type": b.type,
            "eol": b.eol_text,
            "released": f"{b.released} ({b.released_as})" if b.released else None,
            "max_cuda_major": b.max_cuda_major,
            "architectures": [a.value for a in cat.branch_architectures(b.branch)],
            "source": list(b.source),
        }
        for b in cat.driver_branches.values()
    ]


def cuda_rows(cat: Catalog) -> list[dict[str, Any]]:
    """One row per CUDA toolkit release: its GA driver, the branch floor, its updates."""
    return [
        {
            "release": str(r.release),
            "toolkit_driver": str(r.toolkit_driver) if r.toolkit_driver else None,
            "min_branch": r.family_floor,
            "updates": [str(u.version) for u in r.updates],
            "source": list(r.source),
        }
        for r in cat.cuda_releases.values()
    ]


def torch_rows(cat: Catalog) -> list[dict[str, Any]]:
    """One row per PyTorch release: status, Python range, CUDA variants, PyPI's default variant."""
    return [
        {
            "release": str(t.release),
            "status": t.status,
            "python_min": str(t.python[0]),
            "python_max": str(t.python[1]),
            "cuda_variants": list(t.builds),
            "pypi_default": t.pypi_default,
            "source": list(t.source),
        }
        for t in cat.torch_releases.values()
    ]


def vllm_rows(cat: Catalog) -> list[dict[str, Any]]:
    """One row per vLLM release (``serving.yaml``): the torch its wheel pins, its CUDA build, Python."""
    return [
        {
            "release": str(r.version),
            "torch": str(r.torch),
            "cuda_variant": r.cuda_variant,
            "python": ",".join(r.python),
            "source": list(r.source),
        }
        for r in load_serving().vllm_releases
    ]


def monitoring_rows(cat: Catalog) -> list[dict[str, Any]]:
    """One row per DCGM 4 release and the dcgm-exporter release paired with it (``monitoring.yaml``)."""
    from provision.catalog.monitoring import load_monitoring

    return [
        {"dcgm": str(p.dcgm), "exporter": str(p.exporter), "source": list(p.source)}
        for p in load_monitoring().pairs
    ]


ROWS: dict[Table, Callable[[Catalog], list[dict[str, Any]]]] = {
    "gpus": gpu_rows,
    "drivers": driver_rows,
    "cuda": cuda_rows,
    "torch": torch_rows,
    "vllm": vllm_rows,
    "monitoring": monitoring_rows,
}


def listing(cat: Catalog, tables: tuple[Table, ...] = TABLES) -> dict[str, Any]:
    """``{table: {"spec_field": str, "rows": [row, ...]}, ..., "sources": {key: {"cite", "url"}}}``.

    The tables are ``tables``, in that order; ``sources`` holds every key their rows cite, in order
    of first citation, with its citation and URL (``None`` for a document in this repository).
    """
    data: dict[str, Any] = {t: {"spec_field": SPEC_FIELDS[t], "rows": ROWS[t](cat)} for t in tables}
    cited = dict.fromkeys(k for t in tables for row in data[t]["rows"] for k in row["source"])
    data["sources"] = {k: {"cite": cat.sources[k].cite, "url": cat.sources[k].url} for k in cited}
    return data


def render_listing(data: dict[str, Any], console: Console) -> None:
    """Each table of :func:`listing` as a rich table titled with the spec field it feeds, then the
    source keys with their citations and URLs.

    The first column (what a spec or a finding names: a GPU id, a branch, a source key) is never
    wrapped or cut. A table wider than the console is shown in two columns, that one and the row's
    other values as ``field: value`` clauses that wrap at words, so that an 80-column terminal reads
    every value whole (rich would cut all eight of the GPU table's columns to a few letters)."""
    for name, table in data.items():
        if name == "sources":
            rows = [{"key": k, "cite": v["cite"], "url": v["url"]} for k, v in table.items()]
            title = "sources (the keys above)"
        else:
            rows, title = table["rows"], f"{name} ({table['spec_field']})"
        wide = _wide_view(title, rows)
        console.print(wide if _natural_width(console, wide) <= console.width else _narrow_view(title, rows))


def _natural_width(console: Console, view: RichTable) -> int:
    """Columns ``view`` takes with no cell wrapped (rich's measure of the console caps it at its width)."""
    return console.measure(view, options=console.options.update_width(1_000_000)).maximum


def _wide_view(title: str, rows: list[dict[str, Any]]) -> RichTable:
    """One column per field, the first never wrapped."""
    view = RichTable(title=title, title_justify="left")
    for i, column in enumerate(rows[0] if rows else ()):
        view.add_column(column, no_wrap=i == 0)
    for row in rows:
        view.add_row(*(escape(_cell(v)) for v in row.values()))
    return view


def _narrow_view(title: str, rows: list[dict[str, Any]]) -> RichTable:
    """The first field whole, then the others as ``field: value`` clauses in one wrapping column."""
    view = RichTable(title=title, title_justify="left")
    fields = list(rows[0]) if rows else []
    view.add_column(fields[0] if fields else "", no_wrap=True)
    view.add_column(", ".join(fields[1:]), overflow="fold")
    for row in rows:
        first, *rest = row.items()
        view.add_row(escape(_cell(first[1])), escape("; ".join(f"{k}: {_cell(v)}" for k, v in rest)))
    return view


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)
