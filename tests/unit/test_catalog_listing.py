"""``provision catalog`` resolves every source key its rows cite: a user can open what a row names.

The rows name their sources by key (``RN132``, ``FMUG``); findings print the same keys
(``... (RN132)``). The listing closes with those keys' citations and URLs
(``provision/catalog/data/sources.yaml``), in text and in ``--json``.
"""

from __future__ import annotations

import json

import pytest

from provision.catalog import load_catalog
from provision.catalog.listing import TABLES, listing
from tests.unit.factories import invoke

pytestmark = pytest.mark.usefixtures("no_colour")


def _cited(data: dict[str, object]) -> set[str]:
    keys: set[str] = set()
    for name, table in data.items():
        if name != "sources":
            assert isinstance(table, dict)
            for row in table["rows"]:
                keys.update(row["source"])
    return keys


@pytest.mark.parametrize("tables", [TABLES, *((t,) for t in TABLES)])
def test_every_cited_key_is_resolved_with_its_citation_and_url(tables: tuple[str, ...]) -> None:
    cat = load_catalog()
    data = listing(cat, tables)  # type: ignore[arg-type]
    cited = _cited(data)
    assert cited, tables
    sources = data["sources"]
    assert set(sources) == cited
    for key in cited:
        assert sources[key] == {"cite": cat.sources[key].cite, "url": cat.sources[key].url}


def test_json_carries_the_sources_of_the_table_shown() -> None:
    result = invoke("catalog", "cuda", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rn132 = load_catalog().sources["RN132"]
    assert doc["sources"]["RN132"] == {"cite": rn132.cite, "url": rn132.url}


def test_text_prints_each_key_with_its_url() -> None:
    result = invoke("catalog", "gpus")
    assert result.exit_code == 0, result.output
    fmug = load_catalog().sources["FMUG"]
    line = next(ln for ln in result.stdout.splitlines() if " FMUG " in ln and fmug.cite in ln)
    assert fmug.url is not None and fmug.url in line


def test_an_80_column_terminal_reads_every_first_column_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """COLUMNS=80: no line is wider, and each row's first value (the GPU id a spec names, the source
    key a finding names) stands whole at the start of its row: rich cut the GPU table's ids to
    ``a100-p…`` before."""
    from typer.testing import CliRunner

    from provision.cli import base, cli
    from provision.cli import spec as spec_cli

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(spec_cli, "out", base.console())  # as a process started with COLUMNS=80 builds it
    result = CliRunner().invoke(cli, ["catalog"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    data = listing(load_catalog())
    firsts = [str(next(iter(row.values()))) for t in TABLES for row in data[t]["rows"]]
    for first in [*firsts, *data["sources"]]:
        assert any(line.startswith(f"│ {first} ") for line in lines), first
