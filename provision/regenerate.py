"""Write every generated file: ``python3 -m provision.regenerate``.

Run after editing a file under ``provision/catalog/data/``, the catalog's models, or a probe of the
fact registry; the unit tests fail while a generated file disagrees with its source:

- ``provision/catalog/data/prebuilt.json`` and the catalog snapshot (:mod:`provision.catalog.regenerate`);
- ``provision/detect/probes.json``: the probes :mod:`provision.detect.early` starts before a
  command has loaded, from the fact registry;
- ``playbooks/library/provision_trust.py``: :mod:`provision.trust` verbatim, the Ansible module
  through which the roles and plays apply the same trust rule on each host.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from provision import trust
from provision.catalog import regenerate as catalog_files
from provision.detect import early
from provision.resources import data_dir


def trust_module() -> tuple[Path, str]:
    """``playbooks/library/provision_trust.py`` and its text: :mod:`provision.trust`'s source."""
    return data_dir("playbooks") / "library" / "provision_trust.py", Path(trust.__file__).read_text("utf-8")


def early_probes_text() -> str:
    """``provision/detect/probes.json``: the registry's probes in the collector's input form, the
    venv written as :data:`provision.detect.early.VENV`."""
    from provision.detect.registry import all_probes

    return json.dumps([p.to_json() for p in all_probes(early.VENV)], indent=1) + "\n"


def main() -> None:
    """Regenerate the catalog's files, the early probe list and the trust module's copy."""
    catalog_files.main()
    probes = early_probes_text()
    early.PROBES.write_text(probes, encoding="utf-8")
    sys.stdout.write(f"wrote {early.PROBES} ({len(json.loads(probes))} probes)\n")
    module, text = trust_module()
    module.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {module} (a copy of provision/trust.py)\n")


if __name__ == "__main__":
    main()
