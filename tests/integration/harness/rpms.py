"""Building stand-in ``.rpm`` files with real ``rpmbuild`` from generated spec files, cached.

The packages are *stand-ins*: their names, epochs, versions, releases, architectures and
Requires/Provides/Conflicts follow NVIDIA's RHEL packaging (the facts and their sources are in
:mod:`tests.integration.harness.rhelrepo`), but every payload is empty: no kernel module, no
library, no scriptlet. What real NVIDIA RPM scriptlets, DKMS builds and a real Rocky kernel do
cannot run here and is not imitated.

One spec file per package (``Name``/``Epoch``/``Version``/``Release``/``BuildArch`` and the
relations, an empty ``%files``), built with ``rpmbuild -bb --target <arch>`` under a private
``_topdir``. The built set lives in ``<cache>/rpms-<hash>/`` where the hash covers every
package's fields and :data:`BUILDER_VERSION`, so changing a package or this builder builds a
fresh set. Measured here: ~0.06 s per package.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from .proc import file_lock, run

BUILDER_VERSION = "rpms-3"
ARCHES = ("x86_64", "noarch")


@dataclass(frozen=True)
class Rpm:
    """One stand-in binary RPM.

    Attributes:
        name: The package name, e.g. ``kmod-nvidia-open-dkms``.
        version: The upstream version, e.g. ``580.95.05``.
        release: The release with its dist tag where NVIDIA gives one, e.g. ``1.el9``.
        arch: ``x86_64`` or ``noarch``.
        epoch: ``None`` for no ``Epoch:`` tag (rpm then reports epoch 0), else the epoch.
        requires, provides, conflicts, obsoletes: rpm dependency strings such as
            ``nvidia-kmod = 3:580.95.05``.
        summary: One line for ``Summary:``.
    """

    name: str
    version: str
    release: str
    arch: str = "x86_64"
    epoch: int | None = None
    requires: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    obsoletes: tuple[str, ...] = ()
    summary: str = "Stand-in for an NVIDIA package (empty payload, test data only)"
    files: tuple[tuple[str, int, str], ...] = ()
    """Payload, ``(path, mode, content)``: empty for the NVIDIA stand-ins but the few a test runs
    or reads (the container toolkit's ``nvidia-ctk``, the driver's ``libcuda.so``); the OS
    stand-ins that must answer a command (``dracut``) or configure dnf carry a file."""

    @property
    def evr(self) -> str:
        """``[epoch:]version-release`` as dnf prints it."""
        prefix = f"{self.epoch}:" if self.epoch is not None else ""
        return f"{prefix}{self.version}-{self.release}"

    @property
    def nevra(self) -> str:
        """``name-epoch:version-release.arch`` as modulemd artifacts list it (epoch always shown)."""
        return f"{self.name}-{self.epoch or 0}:{self.version}-{self.release}.{self.arch}"

    @property
    def filename(self) -> str:
        """The file rpmbuild writes: ``name-version-release.arch.rpm``."""
        return f"{self.name}-{self.version}-{self.release}.{self.arch}.rpm"


def spec_text(rpm: Rpm) -> str:
    """The spec file that builds ``rpm`` with an empty payload."""
    tags = [
        ("Name", rpm.name),
        *([("Epoch", str(rpm.epoch))] if rpm.epoch is not None else []),
        ("Version", rpm.version),
        ("Release", rpm.release),
        ("Summary", rpm.summary),
        ("License", "Stand-in, test data only"),
        ("BuildArch", rpm.arch),
        # The payload's scripts would gain "Requires: /bin/sh", which no rpm in a Debian-based
        # target provides (dash is Debian's); the stand-ins declare their relations themselves.
        ("AutoReqProv", "no"),
        *(("Requires", r) for r in rpm.requires),
        *(("Provides", p) for p in rpm.provides),
        *(("Conflicts", c) for c in rpm.conflicts),
        *(("Obsoletes", o) for o in rpm.obsoletes),
    ]
    tags += [(f"Source{i}", f"payload-{i}") for i in range(len(rpm.files))]
    head = "".join(f"{tag}: {value}\n" for tag, value in tags)
    install = "".join(
        f"install -D -m {mode:o} %{{SOURCE{i}}} %{{buildroot}}{path}\n"
        for i, (path, mode, _) in enumerate(rpm.files)
    )
    listed = "".join(f"{path}\n" for path, _, _ in rpm.files)
    # No debuginfo, no build-id links: there is nothing to strip and Debian's rpm macros differ.
    return (
        "%global debug_package %{nil}\n%global _build_id_links none\n"
        f"{head}\n%description\nStand-in for {rpm.name} {rpm.evr} (test data only).\n\n"
        f"%install\n{install}\n%files\n{listed}"
    )


def recipe_hash(rpms: list[Rpm]) -> str:
    """A short hash of the package recipes and the builder version."""
    blob = json.dumps([BUILDER_VERSION, [asdict(r) for r in rpms]], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_rpms(rpms: list[Rpm], cache: Path) -> Path:
    """Return a directory holding one ``.rpm`` per recipe, building the set when not cached."""
    out = cache / f"rpms-{recipe_hash(rpms)}"
    with file_lock(cache / "rpms.lock"):
        if out.is_dir():
            return out
        tmp = Path(tempfile.mkdtemp(prefix="rpms-tmp-", dir=cache))
        try:
            for rpm in rpms:
                build_rpm(rpm, tmp)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def build_rpm(rpm: Rpm, out_dir: Path) -> Path:
    """Build ``rpm`` with ``rpmbuild`` into ``out_dir`` and return the ``.rpm`` path.

    Raises:
        ValueError: for an architecture outside :data:`ARCHES`.
        HarnessError: when rpmbuild fails (its output is in the message).
    """
    if rpm.arch not in ARCHES:
        raise ValueError(f"stand-in rpms are {ARCHES}, not {rpm.arch!r}")
    with tempfile.TemporaryDirectory(prefix="rpmbuild-") as top:
        spec = Path(top) / f"{rpm.name}.spec"
        spec.write_text(spec_text(rpm))
        (Path(top) / "SOURCES").mkdir()
        for i, (_, _, content) in enumerate(rpm.files):
            (Path(top) / "SOURCES" / f"payload-{i}").write_text(content)
        run(["rpmbuild", "-bb", "--quiet", "--define", f"_topdir {top}", "--target", rpm.arch, spec])
        built = Path(top) / "RPMS" / rpm.arch / rpm.filename
        target = out_dir / rpm.filename
        shutil.move(built, target)
        return target
