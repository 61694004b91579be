"""The shipped YAML data files, pre-parsed into one JSON file so that start-up skips the YAML parser.

ruamel's pure-Python parser takes ~160 ms for ``data/*.yaml`` on the 2-core build machine; reading
the same content as JSON takes ~2 ms. The YAML files stay the source of truth: ``prebuilt.json``
holds, per file (path relative to ``data/``), its SHA-256 and its parsed content, and
:func:`read_data` uses an entry only while the file's hash still matches, so a stale or missing
entry costs time, never correctness.

It also holds the assembled catalog (``catalog``: :class:`~provision.catalog.Catalog` dumped by
alias, with one SHA-256 over the files it is built from, :func:`files_digest`): the loader
validates that one document with the one ``Catalog`` model instead of validating each file with
its own model and assembling them (pydantic builds one validator instead of nine; ~50 ms less on
the 2-core machine). It is used only while the digest matches and the document validates.

``tests/unit/test_prebuilt.py`` fails while the JSON disagrees with the YAML or with what the
loader makes of it. Regenerate after editing any data file or the catalog's models::

    python3 -m provision.regenerate

Nothing is written anywhere else (no cache in the user's home).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from provision.errors import CatalogError

DATA_DIR = Path(__file__).resolve().parent / "data"
PREBUILT = DATA_DIR / "prebuilt.json"
FORMAT = 1


def parse_yaml(text: str) -> Any:
    """Plain data (dicts, lists, scalars) from YAML text, by ruamel's safe pure-Python loader.

    Raises:
        ruamel.yaml.error.YAMLError: The text is not YAML.
    """
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(text)


def read_data(path: Path) -> Any:
    """The parsed content of a YAML data file: from ``prebuilt.json`` when ``path`` lies under
    ``data/`` and its entry's SHA-256 matches the file, else parsed from the file.

    Raises:
        CatalogError: ``catalog file <path>: <problem>`` when the file cannot be read, is not
            UTF-8 or is not YAML.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CatalogError(f"catalog file {path}: {exc}") from None
    entry = _entries().get(_relative(path))
    if entry is not None and entry["sha256"] == hashlib.sha256(raw).hexdigest():
        return entry["data"]
    from ruamel.yaml.error import YAMLError  # only when parsing: the import alone costs ~10 ms

    try:
        return parse_yaml(raw.decode("utf-8"))
    except (UnicodeDecodeError, YAMLError) as exc:
        raise CatalogError(f"catalog file {path}: {exc}") from None


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(DATA_DIR).as_posix()
    except ValueError:
        return ""


@functools.cache
def _document() -> dict[str, Any]:
    """``prebuilt.json`` parsed, or ``{}`` when it is missing, unreadable or of another format."""
    try:
        doc = json.loads(PREBUILT.read_bytes())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else {}


def _entries() -> dict[str, dict[str, Any]]:
    files = _document().get("files")
    return files if isinstance(files, dict) else {}


def files_digest(directory: Path, paths: Iterable[Path]) -> str:
    """One SHA-256 over ``paths`` (names relative to ``directory``, and contents), in the order given.

    Raises:
        CatalogError: ``catalog file <path>: <problem>`` when a file cannot be read.
    """
    digest = hashlib.sha256()
    for path in paths:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise CatalogError(f"catalog file {path}: {exc}") from None
        name = path.relative_to(directory).as_posix()
        digest.update(f"{name}\0{hashlib.sha256(raw).hexdigest()}\n".encode())
    return digest.hexdigest()


def catalog_data(digest: str) -> Any:
    """The assembled catalog's JSON data when ``prebuilt.json`` holds it for files of ``digest``,
    else None."""
    entry = _document().get("catalog")
    if isinstance(entry, dict) and entry.get("sha256") == digest:
        return entry.get("data")
    return None


def build(directory: Path = DATA_DIR) -> dict[str, Any]:
    """The ``files`` part of the prebuilt document for every ``*.yaml`` under ``directory``:
    ``{relative path: {sha256, data}}`` (:mod:`provision.catalog.regenerate` adds the catalog).

    Raises:
        ValueError: A file's content does not survive a JSON round trip unchanged (a YAML date or a
            non-string key): quote it in the YAML.
    """
    files: dict[str, Any] = {}
    for path in sorted(directory.rglob("*.yaml")):
        raw = path.read_bytes()
        data = parse_yaml(raw.decode("utf-8"))
        try:
            same = json.loads(json.dumps(data)) == data
        except TypeError:  # a YAML date or timestamp
            same = False
        if not same:
            raise ValueError(f"{path}: content changes in JSON (a date or a non-string key?); quote it")
        digest = hashlib.sha256(raw).hexdigest()
        files[path.relative_to(directory).as_posix()] = {"sha256": digest, "data": data}
    return files
