"""The session's loopback services: the NVIDIA stand-in repository and the wheel index.

One ``http.server`` serves one directory::

    <served>/compute/cuda/repos/debian12/x86_64/   signed stand-in repository (good)
    <served>/bad/<kind>/repos/debian12/x86_64/     broken variants, made on demand
    <served>/keys/                                 keyring.gpg (binary) and <keyid>.pub (armored)
    <served>/whl/<variant>/                        PEP 503 torch index
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from . import aptrepo, wheels
from .debs import ensure_debs
from .packages import all_packages
from .server import StaticServer


@dataclass
class NvidiaRepo:
    """The signed stand-in of NVIDIA's CUDA repository for Debian 12.

    Attributes:
        base_url: Replaces ``https://developer.download.nvidia.com/compute/cuda``.
        url: The repository itself, ``<base_url>/repos/debian12/x86_64/`` (apt suite ``/``).
        keyring: Binary public keyring on the host (copy it into a target for ``Signed-By``).
        fingerprint: The signing key's 40-hex fingerprint (upper case).
        key_url: The armored public key over http, like NVIDIA's ``.../3bf863cc.pub``.
        keyring_url: The binary keyring over http.
        path: The repository directory on the host.
        build_seconds: Time to index and sign the repository (the .debs were already built).
    """

    base_url: str
    url: str
    keyring: Path
    fingerprint: str
    key_url: str
    keyring_url: str
    path: Path
    build_seconds: float
    _server: StaticServer
    _other_key: aptrepo.SigningKey
    _bad: dict[str, str] = field(default_factory=dict)

    def bad(self, kind: aptrepo.BadKind) -> str:
        """URL of a broken variant (``unsigned``, ``tampered``, ``other-key``), built once."""
        if kind not in self._bad:
            subpath = f"bad/{kind}/repos/{aptrepo.DISTRO}/{aptrepo.ARCH_DIR}"
            aptrepo.make_bad_repo(kind, self.path, self._server.root / subpath, self._other_key)
            self._bad[kind] = f"{self._server.url}/{subpath}/"
        return self._bad[kind]

    def apt_line(self, keyring_in_target: str) -> str:
        """The one-line apt source, as NVIDIA documents it, for a keyring at that target path."""
        return f"deb [signed-by={keyring_in_target}] {self.url} /"


@dataclass(frozen=True)
class WheelIndex:
    """The stand-in PyTorch index. ``url`` is the cu130 index; ``urls`` maps variant -> URL."""

    url: str
    urls: dict[str, str]


def publish_nvidia_repo(server: StaticServer, cache: Path, scratch: Path) -> NvidiaRepo:
    """Build (or reuse) the .debs, then publish and sign the repository under ``server.root``."""
    debs = ensure_debs(all_packages(), cache)
    started = time.monotonic()
    key = aptrepo.make_signing_key(scratch / "key", "NVIDIA CUDA stand-in <cudatools@nvidia.com>")
    repo_path = server.root / aptrepo.REPO_SUBPATH
    aptrepo.build_repo(debs, repo_path, key)
    build_seconds = time.monotonic() - started
    other = aptrepo.make_signing_key(scratch / "other-key", "Someone else <other@example.invalid>")
    keys = server.root / "keys"
    keys.mkdir()
    for item in (key.keyring, key.armored):
        (keys / item.name).write_bytes(item.read_bytes())
    return NvidiaRepo(
        base_url=f"{server.url}/compute/cuda",
        url=f"{server.url}/{aptrepo.REPO_SUBPATH}/",
        keyring=key.keyring,
        fingerprint=key.fingerprint,
        key_url=f"{server.url}/{aptrepo.REPO_SUBPATH}/{key.armored.name}",
        keyring_url=f"{server.url}/keys/{key.keyring.name}",
        path=repo_path,
        build_seconds=build_seconds,
        _server=server,
        _other_key=other,
    )


def publish_wheel_index(server: StaticServer) -> WheelIndex:
    """Build the torch wheels and their PEP 503 pages under ``server.root``."""
    paths = wheels.build_index(server.root)
    urls = {variant: f"{server.url}{path}" for variant, path in paths.items()}
    return WheelIndex(url=urls["cu130"], urls=urls)
