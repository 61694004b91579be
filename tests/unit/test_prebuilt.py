"""The prebuilt JSON of the catalog's YAML files agrees with them, and never stands in for a changed file."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import shutil
import typing
from pathlib import Path

import pytest

from provision.catalog import loader, prebuilt, regenerate, snapshot, snapshot_key, tables
from provision.catalog.loader import load_catalog_from
from provision.errors import CatalogError

REGENERATE = "python3 -m provision.regenerate"


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


def _imported_by_a_fresh_load() -> set[str]:
    import subprocess
    import sys

    program = "import sys; from provision.catalog import load_catalog; load_catalog(); print(*sys.modules)"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_the_shipped_catalog_is_the_assembled_document_not_the_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_files(directory: Path) -> object:
        raise AssertionError("validated the files one by one although prebuilt.json holds the catalog")

    monkeypatch.setattr(tables, "read_catalog", no_files)
    assert load_catalog_from(prebuilt.DATA_DIR).gpu("h200-sxm") is not None
    assert "provision.catalog.tables" not in _imported_by_a_fresh_load(), "the file models were imported"


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


def _shipped_digest() -> str:
    return prebuilt.files_digest(prebuilt.DATA_DIR, loader.catalog_files(prebuilt.DATA_DIR))


def test_the_snapshot_is_current_and_loads_to_the_catalog_the_files_make() -> None:
    assert regenerate.snapshot_current(), (
        f"provision/catalog/data/catalog.pickle is stale: run `{REGENERATE}`"
    )
    _, key = regenerate.snapshot_files()
    shipped = snapshot.KEY_MODULE.read_text(encoding="utf-8")
    assert [line for line in shipped.splitlines() if not line.startswith("PICKLE_SHA256")] == [
        line for line in key.splitlines() if not line.startswith("PICKLE_SHA256")
    ]


def test_the_shipped_catalog_is_unpickled_not_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_validation(digest: str) -> object:
        raise AssertionError("validated prebuilt.json although the snapshot matches")

    monkeypatch.setattr(loader, "catalog_data", no_validation)
    assert load_catalog_from(prebuilt.DATA_DIR) == load_catalog_from(prebuilt.DATA_DIR, prebuilt=False)


def _with_pickle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data: bytes, **key: object) -> None:
    path = tmp_path / "catalog.pickle"
    path.write_bytes(data)
    monkeypatch.setattr(snapshot, "PICKLE", path)
    for name, value in key.items():
        monkeypatch.setattr(snapshot_key, name, value)


def test_a_changed_pickle_is_not_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data = bytearray(snapshot.PICKLE.read_bytes())
    data[len(data) // 2] ^= 0xFF
    _with_pickle(monkeypatch, tmp_path, bytes(data))
    assert snapshot.load(_shipped_digest()) is None
    assert load_catalog_from(prebuilt.DATA_DIR) == load_catalog_from(prebuilt.DATA_DIR, prebuilt=False)


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch /nonexistent/provision-pwned",))


def test_the_unpickler_resolves_only_catalog_classes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    evil = pickle.dumps(_Evil(), protocol=snapshot.PROTOCOL)
    modules = (*snapshot_key.MODULES, os.system.__module__, "os")
    sources = snapshot.source_digest(modules)
    digest = hashlib.sha256(evil).hexdigest()
    _with_pickle(monkeypatch, tmp_path, evil, PICKLE_SHA256=digest, MODULES=modules, SOURCES_SHA256=sources)
    with pytest.raises(pickle.UnpicklingError, match="is not a catalog class"):
        snapshot._Unpickler(evil, frozenset(modules)).load()
    assert snapshot.load(_shipped_digest()) is None


@pytest.mark.parametrize(
    ("name", "value"),
    [("SOURCES_SHA256", "0" * 64), ("PYDANTIC_MAJOR", "1"), ("FILES_SHA256", "0" * 64)],
)
def test_a_snapshot_of_other_models_files_or_pydantic_is_not_used(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setattr(snapshot_key, name, value)
    assert snapshot.load(_shipped_digest()) is None


def test_versions_are_pickled_as_their_text() -> None:
    named: set[tuple[str, str]] = set()

    class Recorder(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> object:
            named.add((module, name))
            return super().find_class(module, name)

    catalog = load_catalog_from(prebuilt.DATA_DIR)
    assert Recorder(io.BytesIO(snapshot.dumps(catalog))).load() == catalog
    assert {name for module, name in named if module.startswith("packaging")} == {"Version"}


def _global(module: str, name: str) -> bytes:
    """A protocol 4 pickle of the global ``module``.``name`` alone."""

    def text(value: str) -> bytes:
        raw = value.encode()
        return b"\x8c" + bytes([len(raw)]) + raw  # SHORT_BINUNICODE

    return b"\x80\x04" + text(module) + text(name) + b"\x93."  # PROTO 4, STACK_GLOBAL, STOP


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("packaging.version", "InvalidVersion.__class__"),  # `type`, through a dotted name
        ("provision.catalog.catalog", "re.functools.partial"),  # another module's class
        ("provision.catalog.catalog", "Frozen"),  # a class the module imported
        ("provision.catalog.models", "functools.partial"),
    ],
)
def test_the_unpickler_resolves_no_class_outside_the_modules_it_names(module: str, name: str) -> None:
    assert pickle.loads(_global(module, name)) is not None  # plain pickle resolves every one
    with pytest.raises(pickle.UnpicklingError, match="is not a catalog class"):
        snapshot._Unpickler(_global(module, name), frozenset(snapshot_key.MODULES)).load()


def test_the_unpickler_resolves_the_classes_defined_in_the_modules_it_names() -> None:
    from packaging.version import Version

    from provision.catalog.catalog import Catalog

    allowed = frozenset(snapshot_key.MODULES)
    assert snapshot._Unpickler(_global("provision.catalog.catalog", "Catalog"), allowed).load() is Catalog
    assert snapshot._Unpickler(_global("packaging.version", "Version"), allowed).load() is Version


def test_a_change_to_a_module_the_catalog_classes_build_on_makes_the_snapshot_unused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``provision.models.Frozen`` (the base of every catalog model, its config) is in no pickled
    global, yet changing it can change what validating the YAML makes."""
    assert snapshot.load(_shipped_digest()) is not None
    real = snapshot._source

    def edited(name: str) -> bytes | None:
        raw = real(name)
        return raw + b"\n# edited\n" if name == "provision.models" and raw is not None else raw

    monkeypatch.setattr(snapshot, "_source", edited)
    assert snapshot.load(_shipped_digest()) is None
    assert load_catalog_from(prebuilt.DATA_DIR) == load_catalog_from(prebuilt.DATA_DIR, prebuilt=False)


def _project_classes(annotation: object) -> set[type]:
    """The project's classes an annotation names, through ``dict[str, X]``, ``X | None`` etc."""
    found = {annotation} if isinstance(annotation, type) else set()
    for arg in typing.get_args(annotation):
        found |= _project_classes(arg)
    return {c for c in found if c.__module__.startswith("provision.")}


def test_the_hashed_sources_hold_every_project_module_the_catalog_classes_come_from() -> None:
    from provision.catalog.catalog import Catalog

    seen: set[type] = set()
    todo: list[type] = [Catalog]
    while todo:
        cls = todo.pop()
        seen.add(cls)
        for field in getattr(cls, "model_fields", {}).values():
            todo.extend(_project_classes(field.annotation) - seen)
    modules = {base.__module__ for cls in seen for base in cls.__mro__}
    assert {m for m in modules if m.startswith("provision.")} <= set(snapshot_key.SOURCES)
    assert "provision.models" in snapshot_key.SOURCES  # Frozen: the base of every catalog model


@pytest.mark.parametrize(
    "problem",
    [SyntaxError("torn write"), ImportError("missing")],
    ids=["does-not-import", "missing"],
)
def test_a_key_module_that_does_not_import_falls_back_to_validation(
    monkeypatch: pytest.MonkeyPatch, problem: Exception
) -> None:
    real = snapshot.importlib.import_module

    def failing(name: str, package: str | None = None) -> object:
        if name == "provision.catalog.snapshot_key":
            raise problem
        return real(name, package)

    monkeypatch.setattr(snapshot.importlib, "import_module", failing)
    assert snapshot.load(_shipped_digest()) is None
    assert load_catalog_from(prebuilt.DATA_DIR) == load_catalog_from(prebuilt.DATA_DIR, prebuilt=False)


@pytest.mark.parametrize("name", ["SOURCES", "MODULES", "PICKLE_SHA256"])
def test_a_key_of_another_layout_is_not_used(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.delattr(snapshot_key, name)
    assert snapshot.load(_shipped_digest()) is None
