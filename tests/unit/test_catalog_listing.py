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
