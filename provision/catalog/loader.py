"""Read and validate the catalog's YAML files into a :class:`Catalog`.

The shipped files come from the snapshot pickled at build time, else from ``prebuilt.json``;
edited files are read one by one (:mod:`provision.catalog.tables`). Any problem raises
:class:`CatalogError` naming the file and the problem: a broken catalog is a packaging bug,
never a user error.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import ValidationError

from provision.catalog.catalog import Catalog
from provision.catalog.prebuilt import DATA_DIR, catalog_data, files_digest
from provision.catalog.snapshot import load as load_snapshot

__all__ = ["DATA_DIR", "catalog_files", "load_catalog", "load_catalog_from"]

_FILES = (
    "sources.yaml",
    "cuda.yaml",
    "torch.yaml",
    "gpus.yaml",
    "drivers.yaml",
    "repos.yaml",
    "packages.yaml",
)


def catalog_files(directory: Path) -> list[Path]:
    """The files a catalog is built from: the tables, then ``components/*.yaml`` sorted."""
    return [directory / name for name in _FILES] + sorted((directory / "components").glob("*.yaml"))


def load_catalog_from(directory: Path, *, prebuilt: bool = True) -> Catalog:
    """Load and validate the catalog files in ``directory`` (uncached; tests use it on edited copies).

    With ``prebuilt`` (the default), files identical to the shipped ones are served from the
    catalog pickled at build time (:mod:`provision.catalog.snapshot`), else from the catalog
    assembled in ``prebuilt.json`` (:mod:`provision.catalog.prebuilt`), validated by the one
    :class:`Catalog` model; anything else is read file by file.

    Raises:
        CatalogError: Naming the file and the problem, for unreadable YAML, a row failing its model,
            an undefined source key, a duplicate id or a torch variant without an arch list.
    """
    if prebuilt:
        digest = files_digest(directory, catalog_files(directory))
        if (pickled := load_snapshot(digest)) is not None:
            return pickled
        data = catalog_data(digest)
        if data is not None:
            try:
                return Catalog.model_validate(data)
            except ValidationError:  # models changed since prebuilt.json was written: read the files
                pass
    from provision.catalog.tables import read_catalog  # the file models: only for edited files

    return read_catalog(directory)


@functools.cache
def load_catalog() -> Catalog:
    """The shipped catalog, loaded and validated once per process.

    Raises:
        CatalogError: If a shipped file is invalid (a packaging bug).
    """
    return load_catalog_from(DATA_DIR)
