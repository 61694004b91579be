"""Write the catalog's generated files (``python3 -m provision.regenerate`` writes these and the others).

``data/prebuilt.json`` and the catalog snapshot (``data/catalog.pickle`` and ``snapshot_key.py``)
from the YAML files beside them.

A module of its own because :mod:`provision.catalog.prebuilt` is imported by the package itself,
and the document holds the catalog the loader (which reads through ``prebuilt``) builds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from provision.catalog import snapshot
from provision.catalog.loader import catalog_files, load_catalog_from
from provision.catalog.prebuilt import DATA_DIR, FORMAT, PREBUILT, build, files_digest


def document(directory: Path = DATA_DIR) -> dict[str, Any]:
    """The prebuilt document: ``{format, files: {relative path: {sha256, data}}, catalog: {sha256,
    data}}``; ``catalog`` is the catalog the loader builds from the files one by one, dumped by
    alias (its own input form), keyed by :func:`~provision.catalog.prebuilt.files_digest` over them.

    Raises:
        ValueError: A file's content does not survive a JSON round trip (a YAML date): quote it.
        CatalogError: The files do not make a valid catalog.
    """
    files = build(directory)
    catalog = load_catalog_from(directory, prebuilt=False).model_dump(mode="json", by_alias=True)
    digest = files_digest(directory, catalog_files(directory))
    return {"format": FORMAT, "files": files, "catalog": {"sha256": digest, "data": catalog}}


def render(directory: Path = DATA_DIR) -> str:
    """``prebuilt.json``'s text for ``directory`` (stable: sorted files, one-space indent)."""
    return json.dumps(document(directory), indent=1, ensure_ascii=False) + "\n"


def snapshot_files(directory: Path = DATA_DIR) -> tuple[bytes, str]:
    """The catalog snapshot for ``directory``: the pickle of the catalog built from its files one
    by one, and the text of its key module (:mod:`provision.catalog.snapshot`).

    Raises:
        CatalogError: The files do not make a valid catalog.
    """
    data = snapshot.dumps(load_catalog_from(directory, prebuilt=False))
    return data, snapshot.key_text(files_digest(directory, catalog_files(directory)), data)


def main() -> None:
    """Regenerate ``prebuilt.json`` and the snapshot (run after editing any file under
    ``provision/catalog/data/`` or the catalog's models)."""
    text = render()
    PREBUILT.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {PREBUILT} ({len(text.splitlines())} lines)\n")
    if snapshot_current():
        sys.stdout.write(f"kept {snapshot.PICKLE}: it loads to the same catalog\n")
        return
    data, key = snapshot_files()
    snapshot.PICKLE.write_bytes(data)
    snapshot.KEY_MODULE.write_text(key, encoding="utf-8")
    sys.stdout.write(f"wrote {snapshot.PICKLE} ({len(data)} bytes) and {snapshot.KEY_MODULE}\n")


def snapshot_current(directory: Path = DATA_DIR) -> bool:
    """Whether the shipped snapshot loads (its key matching) to the catalog the files make."""
    digest = files_digest(directory, catalog_files(directory))
    pickled = snapshot.load(digest)
    return pickled is not None and pickled == load_catalog_from(directory, prebuilt=False)


if __name__ == "__main__":
    main()
