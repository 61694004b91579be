"""What the components declare in the catalog, for the stages that run before planning."""

from __future__ import annotations

from provision.catalog.loader import load_catalog


def package_name_patterns(package_format: str | None = None) -> tuple[str, ...]:
    """Regular expressions of every package name a component reads (searched, ``re.search``).

    Detection keeps the installed packages matching one of them and drops the rest; the patterns
    come from ``data/components/*.yaml``, so a new component's packages are kept by adding its
    data file, never by editing detection. ``package_format``: one format's (``deb``, ``rpm``), the
    one a family's package database holds; every format's when None.
    """
    return load_catalog().package_name_patterns(package_format)
