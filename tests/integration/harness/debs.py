"""Building the stand-in ``.deb`` files with ``dpkg-deb --root-owner-group --build``, cached.

The built set lives in ``<cache>/debs-<hash>/`` where the hash covers every package's fields
and :data:`BUILDER_VERSION`; changing a package, or this builder, builds a fresh set.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from .packages import MAINTAINER, Package
from .proc import file_lock, run

BUILDER_VERSION = "debs-1"


def recipe_hash(packages: list[Package]) -> str:
    """A short hash of the package recipes and the builder version."""
    blob = json.dumps([BUILDER_VERSION, [asdict(p) for p in packages]], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_debs(packages: list[Package], cache: Path) -> Path:
    """Return a directory holding one ``.deb`` per package, building it when not cached."""
    out = cache / f"debs-{recipe_hash(packages)}"
    with file_lock(cache / "debs.lock"):
        if out.is_dir():
            return out
        tmp = Path(tempfile.mkdtemp(prefix="debs-tmp-", dir=cache))
        try:
            for package in packages:
                build_deb(package, tmp)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def build_deb(package: Package, out_dir: Path) -> Path:
    """Build ``package`` into ``out_dir`` and return the ``.deb`` path."""
    with tempfile.TemporaryDirectory(prefix="deb-") as staging:
        tree = Path(staging) / "tree"
        (tree / "DEBIAN").mkdir(parents=True)
        (tree / "DEBIAN/control").write_text(control_text(package))
        for name, text in package.scripts.items():
            script = tree / "DEBIAN" / name
            script.write_text(text)
            script.chmod(0o755)
        for path, (mode, content) in package.files.items():
            target = tree / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            target.chmod(mode)
        _doc(tree, package)
        deb = out_dir / package.filename
        run(["dpkg-deb", "--root-owner-group", "-Zxz", "-z1", "--build", tree, deb])
        return deb


def control_text(package: Package) -> str:
    """The ``DEBIAN/control`` paragraph for ``package``."""
    fields = {
        "Package": package.name,
        "Version": package.version,
        "Architecture": package.arch,
        "Maintainer": MAINTAINER,
        "Section": "multiverse/devel",
        "Priority": "optional",
        "Depends": ", ".join(package.depends),
        "Conflicts": ", ".join(package.conflicts),
        "Provides": ", ".join(package.provides),
        "Replaces": ", ".join(package.replaces),
        "Description": f"{package.description}\n {package.name} {package.version}",
    }
    return "".join(f"{k}: {v}\n" for k, v in fields.items() if v)


def _doc(tree: Path, package: Package) -> None:
    # Every real package ships a copyright file; it also keeps meta packages from being empty.
    doc = tree / "usr/share/doc" / package.name
    doc.mkdir(parents=True, exist_ok=True)
    (doc / "copyright").write_text(f"Stand-in for NVIDIA's {package.name}; test data only.\n")
    os.chmod(doc / "copyright", 0o644)
