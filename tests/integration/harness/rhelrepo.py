"""Stand-ins of NVIDIA's ``rhel9`` and ``rhel10`` CUDA repositories (and of EPEL's ``dkms``).

NVIDIA's repositories cannot be reached from CI, so the harness builds tiny RPMs
(:mod:`tests.integration.harness.rpms`, empty payloads but one: ``nvidia-driver-cuda-libs``
carries a stand-in ``/usr/lib64/libcuda.so.<version>`` for the containers tests) whose *names,
epochs, versions, releases and dependency relations* follow the real ones, indexes them with real
``createrepo_c``, and for ``rhel9`` adds a real modulemd document set with ``modifyrepo_c
--mdtype=modules``. Real dnf then resolves, filters and locks them exactly as it would NVIDIA's.
Each fact mirrored, and where it comes from. Short names used below:

- DIG: NVIDIA Driver Installation Guide, "Kernel Modules" (RHEL 8/9: ``dnf module enable
  nvidia-driver:open-dkms`` / ``nvidia-driver:580-open`` then ``dnf install nvidia-open``; RHEL
  10: no modules, ``dnf install nvidia-open`` and ``dnf versionlock``), "Advanced Options"
  (``dnf module switch-to nvidia-driver:<stream> --allowerasing``), and the repository key
  D42D0685, https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/
- YPD: NVIDIA/yum-packaging-nvidia-driver ``nvidia-driver.spec`` (``Epoch: 3``, ``Release:
  1%{?dist}``; ``nvidia-driver`` Requires ``nvidia-driver-libs`` and ``nvidia-kmod-common`` at
  ``3:<version>``, ``nvidia-driver-cuda`` Requires ``nvidia-driver-cuda-libs`` and
  ``nvidia-persistenced`` at ``3:<version>``), https://github.com/NVIDIA/yum-packaging-nvidia-driver
- YDKMS: NVIDIA/yum-packaging-dkms-nvidia README (streams ``latest-dkms``/``XXX-dkms`` ship
  ``kmod-nvidia-latest-dkms``, ``open-dkms``/``XXX-open`` ship ``kmod-nvidia-open-dkms``; the
  kmods need ``dkms`` from EPEL), https://github.com/NVIDIA/yum-packaging-dkms-nvidia
- YFM: NVIDIA/yum-packaging-fabric-manager ``fabricmanager.spec`` (no epoch, ``Release: 1``
  without dist tag), https://github.com/NVIDIA/yum-packaging-fabric-manager; the unsuffixed
  ``nvidia-fabricmanager`` from branch 580 as on Debian (see ``packages.py``).
- LIST: ``dnf module list nvidia-driver`` on NVIDIA's repository (streams ``latest``,
  ``latest-dkms [d]``, ``open-dkms``, ``<branch>``, ``<branch>-dkms``, ``<branch>-open``;
  profiles ``default [d], fm, ks, src``; summaries ``Nvidia driver for <stream> branch``), as
  printed in public install notes and NVIDIA's guide-rhel8
  (https://github.com/NVIDIA/yum-packaging-nvidia-driver/blob/main/docs/guide-rhel8.md).
- ERR: the public dnf error on a host whose kmod was "filtered out by modular filtering"
  (``nvidia-kmod-common-3:515.48.07-1.el8.noarch requires nvidia-kmod = 3:515.48.07``).

Mirrored: driver branches 575 (575.57.08), 580 (580.82.07, 580.95.05) and 590 (590.48.01), each
release as ``nvidia-driver``, ``-libs``, ``-cuda``, ``-cuda-libs``, ``nvidia-persistenced``,
``nvidia-kmod-common`` (noarch, Requires ``nvidia-kmod = 3:<v>``), the two DKMS kmods (each
Provides ``nvidia-kmod = 3:<v>``; they conflict, as both build ``nvidia.ko``: inferred),
the metas ``nvidia-open`` (open kmod) and ``cuda-drivers`` (proprietary kmod; epoch 3 on both
is inferred), and ``nvidia-fabricmanager``. Streams per branch ``<b>-open`` and ``<b>-dkms``,
plus ``open-dkms`` and ``latest-dkms`` (the default, LIST) over every release; each stream
requires ``platform:el<major>`` as real module builds do, so the rhel9 repository on an el10
host is unusable and its packages are filtered (the issue's "filtered out by modular
filtering"). Not mirrored: the precompiled streams ``latest``/``<branch>`` (their kmods are
built per kernel) and ``dnf-plugin-nvidia`` (YPD Requires it on RHEL 8+; it guards kernel
upgrades for precompiled kmods only).

CUDA 13.0 (``cuda-toolkit-13-0`` 13.0.2-1 -> ``cuda-nvcc-13-0`` 13.0.88-1) and 12.8, cuDNN
(``libcudnn9-cuda-13``, ``-headers-``, ``-devel-``, devel needing both: RHEL names from
NVIDIA's "Installing cuDNN Backend on Linux"), NCCL (``libnccl``/``libnccl-devel``
``<v>-1+cuda13.0``, NVIDIA's NCCL Installation Guide) and the container toolkit
(``nvidia-container-toolkit`` -> ``-base``, ``libnvidia-container-tools`` ->
``libnvidia-container1``, 1.18.0-1, NVIDIA Container Toolkit install guide) are plain
(non-modular) packages, as in NVIDIA's repository. Packages are signed (``rpmsign --addsign``)
by a throwaway RSA key standing in for D42D0685, so ``gpgcheck=1`` runs real rpm signature
checks; EPEL's stand-in here is unsigned (the Rocky-like root's EPEL is signed).
rhel10 has the same packages with ``el10`` releases and no ``modules.yaml`` (DIG).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .proc import run
from .rpms import Rpm, ensure_rpms

Major = Literal[9, 10]
DRIVER_EPOCH = 3
DRIVER_VERSIONS = ("575.57.08", "580.82.07", "580.95.05", "590.48.01")
FLAVOUR_KMODS = {"open": "kmod-nvidia-open-dkms", "dkms": "kmod-nvidia-latest-dkms"}
MODULE = "nvidia-driver"
DEFAULT_STREAM = "latest-dkms"
CONTAINER_TOOLKIT = "1.18.0"
CUDNN_VERSIONS = ("9.14.0.64", "9.20.0.48")
NCCL_VERSIONS = ("2.28.3", "2.29.2")
REPO_KEY_ID = "D42D0685"
"""NVIDIA's rhel9/rhel10 repository key id (DIG); the stand-in is signed by a throwaway key."""


def branch(version: str) -> str:
    """``580.95.05`` -> ``580``."""
    return version.split(".", 1)[0]


def _ev(version: str) -> str:
    return f"{DRIVER_EPOCH}:{version}"


def driver_release(version: str, dist: str) -> list[Rpm]:
    """One driver release's packages, tied together by ``= 3:<version>`` relations (YPD)."""
    rel, ev = f"1.{dist}", _ev(version)

    def drv(
        name: str,
        arch: str = "x86_64",
        requires: tuple[str, ...] = (),
        provides: tuple[str, ...] = (),
        conflicts: tuple[str, ...] = (),
        files: tuple[tuple[str, int, str], ...] = (),
    ) -> Rpm:
        return Rpm(name, version, rel, arch, DRIVER_EPOCH, requires, provides, conflicts, files=files)

    kmods = set(FLAVOUR_KMODS.values())
    return [
        drv("nvidia-driver", requires=(f"nvidia-driver-libs = {ev}", f"nvidia-kmod-common = {ev}")),
        drv("nvidia-driver-libs"),
        drv(
            "nvidia-driver-cuda", requires=(f"nvidia-driver-cuda-libs = {ev}", f"nvidia-persistenced = {ev}")
        ),
        # The one payload of the driver stand-in: the library nvidia-ctk cdi generate looks for
        # (YPD %files cuda-libs: %{_libdir}/libcuda.so.%{version}), for the containers tests.
        drv(
            "nvidia-driver-cuda-libs",
            files=((f"/usr/lib64/libcuda.so.{version}", 0o644, f"stand-in {version}\n"),),
        ),
        drv("nvidia-persistenced"),
        drv("nvidia-kmod-common", arch="noarch", requires=(f"nvidia-kmod = {ev}",)),
        *(
            drv(
                kmod,
                requires=("dkms",),
                provides=(f"nvidia-kmod = {ev}",),
                conflicts=tuple(sorted(kmods - {kmod})),
            )
            for kmod in sorted(kmods)
        ),
        drv(
            "nvidia-open",
            requires=(f"nvidia-driver = {ev}", f"nvidia-driver-cuda = {ev}", f"kmod-nvidia-open-dkms = {ev}"),
            conflicts=("cuda-drivers",),
        ),
        drv(
            "cuda-drivers",
            requires=(
                f"nvidia-driver = {ev}",
                f"nvidia-driver-cuda = {ev}",
                f"kmod-nvidia-latest-dkms = {ev}",
            ),
            conflicts=("nvidia-open",),
        ),
        Rpm("nvidia-fabricmanager", version, "1"),
    ]


def stack_rpms(dist: str) -> list[Rpm]:
    """CUDA, cuDNN, NCCL and the container toolkit: NVIDIA's non-modular packages."""
    nvcc = Rpm("cuda-nvcc-13-0", "13.0.88", "1")
    ctk = CONTAINER_TOOLKIT
    rpms = [
        nvcc,
        Rpm("cuda-toolkit-13-0", "13.0.2", "1", requires=(f"cuda-nvcc-13-0 >= {nvcc.version}",)),
        Rpm("cuda-nvcc-12-8", "12.8.93", "1"),
        Rpm("cuda-toolkit-12-8", "12.8.1", "1", requires=("cuda-nvcc-12-8 >= 12.8.93",)),
        Rpm("libnvidia-container1", ctk, "1"),
        Rpm("libnvidia-container-tools", ctk, "1", requires=(f"libnvidia-container1 >= {ctk}-1",)),
        Rpm("nvidia-container-toolkit-base", ctk, "1"),
        Rpm(
            "nvidia-container-toolkit",
            ctk,
            "1",
            requires=(f"nvidia-container-toolkit-base = {ctk}-1", f"libnvidia-container-tools >= {ctk}-1"),
        ),
    ]
    for v in CUDNN_VERSIONS:
        rpms += [
            Rpm("libcudnn9-cuda-13", v, "1"),
            Rpm("libcudnn9-headers-cuda-13", v, "1"),
            Rpm(
                "libcudnn9-devel-cuda-13",
                v,
                "1",
                requires=(f"libcudnn9-cuda-13 = {v}-1", f"libcudnn9-headers-cuda-13 = {v}-1"),
            ),
        ]
    for v in NCCL_VERSIONS:
        rel = "1+cuda13.0"
        rpms += [Rpm("libnccl", v, rel), Rpm("libnccl-devel", v, rel, requires=(f"libnccl = {v}-{rel}",))]
    return rpms


def repo_rpms(major: Major) -> list[Rpm]:
    """Every package of the stand-in ``rhel<major>`` repository."""
    dist = f"el{major}"
    return [rpm for v in DRIVER_VERSIONS for rpm in driver_release(v, dist)] + stack_rpms(dist)


def epel_rpms(major: Major) -> list[Rpm]:
    """EPEL's ``dkms`` (the DKMS kmods Require it; YDKMS), a stand-in with an empty payload."""
    return [Rpm("dkms", "3.2.1", f"1.el{major}", arch="noarch")]


@dataclass(frozen=True)
class Stream:
    """One ``nvidia-driver`` module stream: its name, flavour and the releases it carries."""

    name: str
    flavour: Literal["open", "dkms"]
    versions: tuple[str, ...]

    @property
    def kmod(self) -> str:
        """The kmod package this stream's profiles install."""
        return FLAVOUR_KMODS[self.flavour]


def streams() -> list[Stream]:
    """``<branch>-open``/``<branch>-dkms`` per branch, plus ``open-dkms`` and ``latest-dkms``."""
    branches = sorted({branch(v) for v in DRIVER_VERSIONS})
    out = [Stream("open-dkms", "open", DRIVER_VERSIONS), Stream("latest-dkms", "dkms", DRIVER_VERSIONS)]
    for b in branches:
        versions = tuple(v for v in DRIVER_VERSIONS if branch(v) == b)
        out += [Stream(f"{b}-open", "open", versions), Stream(f"{b}-dkms", "dkms", versions)]
    return out


def _module_document(stream: Stream, rpms: list[Rpm], major: Major, index: int) -> str:
    other = {k for k in FLAVOUR_KMODS.values() if k != stream.kmod} | {
        "cuda-drivers" if stream.flavour == "open" else "nvidia-open"
    }
    artifacts = sorted(
        r.nevra
        for r in rpms
        if r.epoch == DRIVER_EPOCH and r.version in stream.versions and r.name not in other
    )
    meta = "nvidia-open" if stream.flavour == "open" else "cuda-drivers"
    base = ["nvidia-driver", "nvidia-driver-cuda", stream.kmod]
    profiles = {"default": [meta, *base], "ks": base, "fm": [*base, "nvidia-fabricmanager"]}
    lines = [
        "---",
        "document: modulemd",
        "version: 2",
        "data:",
        f"  name: {MODULE}",
        f'  stream: "{stream.name}"',
        f"  version: {20250101000000 + index}",
        '  context: "c0ffee42"',
        "  arch: x86_64",
        f"  summary: Nvidia driver for {stream.name} branch",
        "  description: >-",
        f"    Stand-in of NVIDIA's {MODULE}:{stream.name} stream (provision integration tests).",
        "  license:",
        "    module: [MIT]",
        "  dependencies:",
        f"  - buildrequires: {{platform: [el{major}]}}",
        f"    requires: {{platform: [el{major}]}}",
        "  profiles:",
        *(f"    {name}:\n      rpms: [{', '.join(pkgs)}]" for name, pkgs in profiles.items()),
        "  artifacts:",
        "    rpms:",
        *(f"    - {nevra}" for nevra in artifacts),
        "...",
    ]
    return "\n".join(lines) + "\n"


def modules_yaml(rpms: list[Rpm], major: Major) -> str:
    """The modulemd v2 documents of every stream and the modulemd-defaults (``latest-dkms``)."""
    docs = [_module_document(s, rpms, major, i) for i, s in enumerate(streams())]
    defaults = (
        "---\ndocument: modulemd-defaults\nversion: 1\ndata:\n"
        f"  module: {MODULE}\n  stream: {DEFAULT_STREAM}\n  profiles:\n"
        + "".join(f"    {s.name}: [default]\n" for s in streams())
        + "...\n"
    )
    return "".join(docs) + defaults


@dataclass(frozen=True)
class RpmKey:
    """A throwaway RSA signing key for the stand-in RPMs (NVIDIA signs with D42D0685, RSA).

    Attributes:
        gnupghome: The private keyring directory (mode 0700).
        fingerprint: 40 upper-case hex digits.
        armored: The ASCII-armored public key, as NVIDIA serves ``D42D0685.pub``.
    """

    gnupghome: Path
    fingerprint: str
    armored: Path

    @property
    def url(self) -> str:
        """``file://`` URL of the public key, for ``gpgkey=``."""
        return self.armored.as_uri()


def make_rpm_key(directory: Path, uid: str = "NVIDIA CUDA stand-in <cudatools@nvidia.com>") -> RpmKey:
    """Generate an RSA-2048 signing key under ``directory`` (~0.2 s) and export its public half."""
    home = directory / "gnupg"
    home.mkdir(parents=True, mode=0o700)
    gpg: list[str | Path] = ["gpg", "--homedir", home, "--batch", "--quiet"]
    run([*gpg, "--passphrase", "", "--quick-gen-key", uid, "rsa2048", "sign", "never"])
    listing = run([*gpg, "--with-colons", "--list-keys", uid]).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    armored = directory / f"{fingerprint[-8:]}.pub"
    run([*gpg, "--yes", "--armor", "--output", armored, "--export", fingerprint])
    return RpmKey(home, fingerprint, armored)


def sign_rpms(paths: list[Path], key: RpmKey) -> None:
    """Add ``key``'s RSA header signature to each ``.rpm`` in place (``rpmsign --addsign``)."""
    gpg = shutil.which("gpg") or "gpg"
    macros = ["--define", f"__gpg {gpg}", "--define", f"_gpg_path {key.gnupghome}"]
    run(["rpmsign", *macros, "--define", f"_gpg_name {key.fingerprint}", "--addsign", *paths])


@dataclass(frozen=True)
class RhelRepo:
    """A published stand-in repository.

    Attributes:
        major: 9 or 10 (which NVIDIA repository it stands in for).
        path: The repository directory (``repodata/`` and the ``.rpm`` files).
        url: ``file://`` URL of ``path``, for a ``baseurl=``.
        repo_id: The section name NVIDIA's ``cuda-rhel<major>.repo`` uses.
        modular: Whether ``repodata/`` carries a ``modules`` document set.
        build_seconds: Time to build (or reuse) the RPMs, sign and index them.
        key: The key every package is signed with, or ``None`` for unsigned packages.
    """

    major: int
    path: Path
    url: str
    repo_id: str
    modular: bool
    build_seconds: float
    key: RpmKey | None = None

    def repo_file(self, *, gpgcheck: bool | None = None, gpgkey: str | None = None) -> str:
        """A ``.repo`` file like NVIDIA's ``cuda-rhel<major>.repo``, pointing at the stand-in.

        Args:
            gpgcheck: Defaults to whether the packages are signed (NVIDIA's file: ``gpgcheck=1``).
            gpgkey: Defaults to the signing key's ``file://`` URL; ``""`` writes none.
        """
        check = self.key is not None if gpgcheck is None else gpgcheck
        key_url = (self.key.url if self.key else None) if gpgkey is None else gpgkey
        lines = [f"[{self.repo_id}]", f"name={self.repo_id}", f"baseurl={self.url}", "enabled=1"]
        lines.append(f"gpgcheck={int(check)}")
        if key_url:
            lines.append(f"gpgkey={key_url}")
        return "\n".join(lines) + "\n"


def index_repo(rpm_dir: Path, rpms: list[Rpm], dest: Path, modules: str | None, key: RpmKey | None) -> None:
    """Copy ``rpms`` from ``rpm_dir`` to ``dest``, sign them with ``key``, index with createrepo_c,
    and add ``modules`` (modulemd YAML) as the ``modules`` metadata when given."""
    dest.mkdir(parents=True, exist_ok=True)
    for rpm in rpms:
        (dest / rpm.filename).write_bytes((rpm_dir / rpm.filename).read_bytes())
    if key is not None:
        sign_rpms([dest / rpm.filename for rpm in rpms], key)
    run(["createrepo_c", "--quiet", "--no-database", dest])
    if modules is not None:
        source = dest.parent / f"{dest.name}-modules.yaml"
        source.write_text(modules)
        run(["modifyrepo_c", "--mdtype=modules", source, dest / "repodata"])


def publish_rhel_repo(major: Major, cache: Path, dest: Path, key: RpmKey | None = None) -> RhelRepo:
    """Build (or reuse) the RPMs, sign them with ``key`` and index ``rhel<major>`` at ``dest``.

    rhel9 gets ``modules.yaml`` (:func:`modules_yaml`); rhel10 none (DIG: no modules on 10).

    Raises:
        HarnessError: when rpmbuild, createrepo_c or modifyrepo_c fails.
    """
    started = time.monotonic()
    rpms = repo_rpms(major)
    rpm_dir = ensure_rpms(rpms, cache)
    modules = modules_yaml(rpms, major) if major == 9 else None
    index_repo(rpm_dir, rpms, dest, modules, key)
    return RhelRepo(
        major=major,
        path=dest,
        url=dest.as_uri(),
        repo_id=f"cuda-rhel{major}-x86_64",
        modular=modules is not None,
        build_seconds=time.monotonic() - started,
        key=key,
    )


def publish_epel(major: Major, cache: Path, dest: Path) -> RhelRepo:
    """The stand-in EPEL repository holding ``dkms`` (:func:`epel_rpms`)."""
    started = time.monotonic()
    rpms = epel_rpms(major)
    index_repo(ensure_rpms(rpms, cache), rpms, dest, None, None)
    return RhelRepo(major, dest, dest.as_uri(), "epel", False, time.monotonic() - started)
