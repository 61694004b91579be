"""A signed, flat apt repository laid out like NVIDIA's, plus deliberately broken variants.

Layout, as NVIDIA's network repository on developer.download.nvidia.com
(``https://developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/``, e.g.
https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/; NVIDIA Driver
Installation Guide, https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/)::

    <served root>/compute/cuda/repos/debian12/x86_64/
        Packages, Packages.gz, Release, InRelease, Release.gpg, <keyid>.pub, *.deb

and the apt line ``deb [signed-by=KEYRING] <base>/repos/debian12/x86_64/ /`` (suite ``/``).
Index with ``apt-ftparchive packages|release``; sign with a throwaway ed25519 key made in a
temporary ``GNUPGHOME`` (``--quick-gen-key ... ed25519 sign never``, empty passphrase).

The bad variants (:func:`make_bad_repo`) each cost apt an ``rc=100`` and install nothing
(measured by tests/integration/test_harness.py::test_apt_refuses_bad_repository).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .proc import run

DISTRO = "debian12"
ARCH_DIR = "x86_64"
REPO_SUBPATH = f"compute/cuda/repos/{DISTRO}/{ARCH_DIR}"
RELEASE_FIELDS = {
    "Origin": "NVIDIA",
    "Label": "NVIDIA CUDA",
    "Architectures": "amd64",
    "Description": "Stand-in for NVIDIA's CUDA repository, provision integration tests",
}
BadKind = Literal["unsigned", "tampered", "other-key"]


@dataclass(frozen=True)
class SigningKey:
    """A throwaway OpenPGP signing key.

    Attributes:
        gnupghome: The private keyring directory (mode 0700).
        fingerprint: 40 upper-case hex digits.
        keyring: Binary (dearmored) public keyring for apt's ``Signed-By``.
        armored: ASCII-armored public key, as NVIDIA serves ``<keyid>.pub``.
    """

    gnupghome: Path
    fingerprint: str
    keyring: Path
    armored: Path


def make_signing_key(directory: Path, uid: str) -> SigningKey:
    """Generate an ed25519 signing key under ``directory`` and export its public half."""
    home = directory / "gnupg"
    home.mkdir(parents=True, mode=0o700)
    gpg: list[str | Path] = ["gpg", "--homedir", home, "--batch", "--quiet"]
    run([*gpg, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never"])
    listing = run([*gpg, "--with-colons", "--list-keys", uid]).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    keyring, armored = directory / "keyring.gpg", directory / f"{fingerprint[-8:].lower()}.pub"
    run([*gpg, "--yes", "--output", keyring, "--export", fingerprint])
    run([*gpg, "--yes", "--armor", "--output", armored, "--export", fingerprint])
    return SigningKey(home, fingerprint, keyring, armored)


def build_repo(debs: Path, repo: Path, key: SigningKey) -> None:
    """Publish every ``.deb`` in ``debs`` as a signed flat repository in ``repo``.

    The ``.deb`` files are hard-linked (copied across filesystems), so this takes ~0.1 s.
    """
    repo.mkdir(parents=True, exist_ok=True)
    for deb in sorted(debs.glob("*.deb")):
        _link(deb, repo / deb.name)
    index_repo(repo)
    sign_repo(repo, key)
    shutil.copy2(key.armored, repo / key.armored.name)


def index_repo(repo: Path) -> None:
    """Write ``Packages``, ``Packages.gz`` and ``Release`` with apt-ftparchive."""
    packages = run(["apt-ftparchive", "packages", "."], cwd=repo).stdout
    (repo / "Packages").write_text(packages)
    run(["gzip", "-9nkf", "Packages"], cwd=repo)
    options = [a for k, v in RELEASE_FIELDS.items() for a in ("-o", f"APT::FTPArchive::Release::{k}={v}")]
    (repo / "Release").write_text(run(["apt-ftparchive", *options, "release", "."], cwd=repo).stdout)


def sign_repo(repo: Path, key: SigningKey) -> None:
    """Write ``InRelease`` (clearsigned) and ``Release.gpg`` (detached) for ``Release``."""
    gpg: list[str | Path] = ["gpg", "--homedir", key.gnupghome, "--batch", "--yes", "--quiet"]
    gpg += ["--local-user", key.fingerprint]
    run([*gpg, "--clearsign", "--output", repo / "InRelease", repo / "Release"])
    run([*gpg, "--armor", "--detach-sign", "--output", repo / "Release.gpg", repo / "Release"])


def make_bad_repo(kind: BadKind, good: Path, dest: Path, other_key: SigningKey) -> None:
    """Make a broken copy of the repository ``good`` in ``dest``.

    Args:
        kind: ``unsigned``: no InRelease or Release.gpg. ``tampered``: Packages edited after
            signing, so its hash no longer matches Release. ``other-key``: validly signed, but
            by ``other_key``, which the client's ``Signed-By`` keyring does not hold.
        good: A repository made by :func:`build_repo`.
        dest: Where to put the variant (created).
        other_key: The foreign key used by ``other-key``.
    """
    dest.mkdir(parents=True)
    for item in good.iterdir():
        if item.name not in ("InRelease", "Release.gpg"):
            _link(item, dest / item.name)
    if kind == "unsigned":
        return
    if kind == "other-key":
        sign_repo(dest, other_key)
        return
    shutil.copy2(good / "InRelease", dest / "InRelease")
    shutil.copy2(good / "Release.gpg", dest / "Release.gpg")
    # Same length, different bytes: apt must catch it by hash, not by size. Packages.gz is
    # left out so apt falls back to the uncompressed index listed in the signed Release.
    for name in ("Packages", "Packages.gz"):
        (dest / name).unlink()  # break the hard links before editing
    text = (good / "Packages").read_text()
    (dest / "Packages").write_text(text.replace("Version: 580.95.05-1", "Version: 580.95.06-1", 1))


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
