"""The prebuilt JSON of the catalog's YAML files agrees with them, and never stands in for a changed file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from provision.catalog import loader, prebuilt, regenerate
from provision.catalog.loader import load_catalog_from
from provision.errors import CatalogError

REGENERATE = "python3 -m provision.catalog.regenerate"


def test_prebuilt_json_matches_the_yaml_files() -> None:
    shipped = prebuilt.PREBUILT.read_text(encoding="utf-8")
    assert shipped == regenerate.render(), (
        f"provision/catalog/data/prebuilt.json is stale: run `{REGENERATE}`"
    )


def test_every_yaml_file_is_served_from_the_prebuilt_json(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_parse(text: str) -> object:
        raise AssertionError("parsed YAML although prebuilt.json holds the file")

    expected = {
        p: prebuilt.parse_yaml(p.read_text(encoding="utf-8")) for p in prebuilt.DATA_DIR.rglob("*.yaml")
    }
    monkeypatch.setattr(prebuilt, "parse_yaml", no_parse)
    assert expected
    for path, data in expected.items():
        assert prebuilt.read_data(path) == data, path


def test_a_changed_file_is_parsed_not_read_from_the_stale_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    path = prebuilt.DATA_DIR / "drivers.yaml"
    stale = {"drivers.yaml": {"sha256": "0" * 64, "data": {"branches": []}}}
    monkeypatch.setattr(prebuilt, "_entries", lambda: stale)
    assert prebuilt.read_data(path) == prebuilt.parse_yaml(path.read_text(encoding="utf-8"))


def test_a_copy_outside_the_data_directory_is_parsed(tmp_path: Path) -> None:
    copy = tmp_path / "drivers.yaml"
    copy.write_text("branches: []\n", encoding="utf-8")
    assert prebuilt.read_data(copy) == {"branches": []}


def test_catalog_from_prebuilt_equals_catalog_parsed_from_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = load_catalog_from(prebuilt.DATA_DIR)
    monkeypatch.setattr(prebuilt, "_document", dict)
    assert load_catalog_from(prebuilt.DATA_DIR) == fast
    assert load_catalog_from(prebuilt.DATA_DIR, prebuilt=False) == fast


def test_the_shipped_catalog_is_the_assembled_document_not_the_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_files(directory: Path) -> object:
        raise AssertionError("validated the files one by one although prebuilt.json holds the catalog")

    monkeypatch.setattr(loader, "_read_all", no_files)
    assert load_catalog_from(prebuilt.DATA_DIR).gpu("h200-sxm") is not None


def test_an_edited_copy_is_read_file_by_file(tmp_path: Path) -> None:
    copy = tmp_path / "data"
    shutil.copytree(prebuilt.DATA_DIR, copy)
    gpus = copy / "gpus.yaml"
    text = gpus.read_text(encoding="utf-8")
    shipped, edited_line = 'smi_names: ["NVIDIA H200"]', 'smi_names: ["NVIDIA H200 edited"]'
    assert text.count(shipped) == 1
    gpus.write_text(text.replace(shipped, edited_line), encoding="utf-8")
    edited = load_catalog_from(copy)
    assert any("NVIDIA H200 edited" in g.smi_names for g in edited.gpus.values())
    assert edited != load_catalog_from(prebuilt.DATA_DIR)


def test_a_catalog_entry_the_models_refuse_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = load_catalog_from(prebuilt.DATA_DIR, prebuilt=False)
    digest = prebuilt.files_digest(prebuilt.DATA_DIR, loader.catalog_files(prebuilt.DATA_DIR))
    stale = prebuilt._document() | {"catalog": {"sha256": digest, "data": {"gpus": "not a table"}}}
    monkeypatch.setattr(prebuilt, "_document", lambda: stale)
    assert load_catalog_from(prebuilt.DATA_DIR) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [("a: [1\n", "catalog file"), ("\xff", "catalog file")],
)
def test_unreadable_yaml_is_one_catalog_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(CatalogError, match=problem):
        prebuilt.read_data(path)


def test_a_value_that_json_would_change_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dated.yaml").write_text("eol: 2026-01-01\n", encoding="utf-8")
    with pytest.raises(ValueError, match="quote it"):
        prebuilt.build(tmp_path)
