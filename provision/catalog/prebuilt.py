"""The shipped YAML data files, pre-parsed into one JSON file so that start-up skips the YAML parser.

ruamel's pure-Python parser takes ~160 ms for ``data/*.yaml`` on the 2-core build machine; reading
the same content as JSON takes ~2 ms. The YAML files stay the source of truth: ``prebuilt.json``
holds, per file (path relative to ``data/``), its SHA-256 and its parsed content, and
:func:`read_data` uses an entry only while the file's hash still matches, so a stale or missing
entry costs time, never correctness. ``tests/unit/test_prebuilt.py`` fails while the JSON
disagrees with the YAML. Regenerate after editing any data file::

    python3 -m provision.catalog.regenerate

Nothing is written anywhere else (no cache in the user's home).
"""

from __future__ import annotations

import functools
import hashlib
import json
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
def _entries() -> dict[str, dict[str, Any]]:
    try:
        doc = json.loads(PREBUILT.read_bytes())
    except (OSError, ValueError):
        return {}
    files = doc.get("files") if isinstance(doc, dict) and doc.get("format") == FORMAT else None
    return files if isinstance(files, dict) else {}


def build(directory: Path = DATA_DIR) -> dict[str, Any]:
    """The prebuilt document for every ``*.yaml`` under ``directory``: ``{format, files: {relative
    path: {sha256, data}}}``.

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
    return {"format": FORMAT, "files": files}


def render(directory: Path = DATA_DIR) -> str:
    """``prebuilt.json``'s text for ``directory`` (stable: sorted files, one-space indent)."""
    return json.dumps(build(directory), indent=1, ensure_ascii=False) + "\n"
