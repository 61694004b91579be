"""Write ``data/prebuilt.json`` from the YAML files beside it: ``python3 -m provision.catalog.regenerate``.

A module of its own because :mod:`provision.catalog.prebuilt` is imported by the package itself,
and the document holds the catalog the loader (which reads through ``prebuilt``) builds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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


def main() -> None:
    """Regenerate ``prebuilt.json`` (run after editing any file under ``provision/catalog/data/`` or
    the catalog's models)."""
    text = render()
    PREBUILT.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {PREBUILT} ({len(text.splitlines())} lines)\n")


if __name__ == "__main__":
    main()
