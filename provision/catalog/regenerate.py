"""Write ``data/prebuilt.json`` from the YAML files beside it: ``python3 -m provision.catalog.regenerate``.

A module of its own because :mod:`provision.catalog.prebuilt` is imported by the package itself.
"""

from __future__ import annotations

import sys

from provision.catalog.prebuilt import PREBUILT, render


def main() -> None:
    """Regenerate ``prebuilt.json`` (run after editing any file under ``provision/catalog/data/``)."""
    text = render()
    PREBUILT.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {PREBUILT} ({len(text.splitlines())} lines)\n")


if __name__ == "__main__":
    main()
