"""Fetch a repository signing key and check its fingerprint before anything trusts it.

The key is fetched on the controller, de-armored, and its OpenPGP v4
fingerprint computed here (RFC 4880 §12.2: SHA-1 over 0x99, a two-octet
length and the public-key packet body). Only a key whose primary fingerprint
equals the pinned one is written as the binary keyring that the target's
deb822 source names in ``Signed-By``.
"""

from __future__ import annotations

import base64
import urllib.request
from pathlib import Path
from typing import Any

from provision.errors import ProvisionError
from provision.files import read_bytes
from provision.openpgp import KeyringError, packets, primary_fingerprint
from provision.spec.models import KEY_HOSTS, key_url_problem, redacted

MAX_KEY_BYTES = 1 << 20
"""Largest key accepted (NVIDIA's 3bf863cc.pub is under 2 KiB); a bigger answer is refused unread."""


class _AllowedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to a URL the key may be fetched from (https, an allowed host)."""

    def __init__(self, hosts: tuple[str, ...]) -> None:
        self.hosts = hosts

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        if (why := key_url_problem(newurl, self.hosts)) is not None:
            raise KeyringError(f"the repository key redirects to {redacted(newurl)}, which {why}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def fetch_key(key_url: str, hosts: tuple[str, ...], timeout_s: float = 30.0) -> bytes:
    """The bytes at ``key_url`` after checking it (and every redirect) against ``hosts``.

    Raises:
        KeyringError: The URL is not https to an allowed host, the download failed, or the answer
            is larger than :data:`MAX_KEY_BYTES`.
    """
    if (why := key_url_problem(key_url, hosts)) is not None:
        raise KeyringError(f"refusing to fetch the repository key {redacted(key_url)}: it {why}")
    opener = urllib.request.build_opener(_AllowedRedirects(hosts))
    try:
        with opener.open(key_url, timeout=timeout_s) as response:
            raw: bytes = response.read(MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise KeyringError(f"cannot fetch the repository key {key_url}: {exc}") from None
    if len(raw) > MAX_KEY_BYTES:
        raise KeyringError(f"the repository key {key_url} is larger than {MAX_KEY_BYTES} bytes")
    return raw


def read_key_file(path: Path) -> bytes:
    """The signing key from a file on the controller (regular file, at most :data:`MAX_KEY_BYTES`)."""
    try:
        return read_bytes(path, limit=MAX_KEY_BYTES, what="repository key")
    except ProvisionError as exc:
        raise KeyringError(str(exc)) from None


def fetch_verified_keyring(
    key_url: str, fingerprint: str, dest: Path, hosts: tuple[str, ...] = KEY_HOSTS
) -> Path:
    """Download the key at ``key_url``, check ``fingerprint`` (40 hex digits) and write it to ``dest``.

    Raises:
        KeyringError: The URL is not allowed, the download failed, the data is not an OpenPGP
            key, or the fingerprint differs (the message shows both).
    """
    return write_verified_keyring(fetch_key(key_url, hosts), key_url, fingerprint, dest)


def write_verified_keyring(raw: bytes, key_url: str, fingerprint: str, dest: Path) -> Path:
    """Check that ``raw`` holds one primary key with ``fingerprint``, and write it to ``dest``.

    Raises:
        KeyringError: ``raw`` is not one OpenPGP key, or its fingerprint differs.
    """
    binary = dearmor(raw)
    primaries = sum(1 for tag, _ in packets(binary) if tag == 6)
    if primaries != 1:
        raise KeyringError(f"repository key {key_url} holds {primaries} primary keys; exactly one is trusted")
    found = primary_fingerprint(binary)
    if found != fingerprint.upper():
        raise KeyringError(
            f"repository key {key_url} has fingerprint {found}, the catalog pins {fingerprint}; "
            "refusing to trust it"
        )
    from provision.output import write_output

    write_output(dest, binary)
    return dest


def dearmor(data: bytes) -> bytes:
    """Binary OpenPGP data from ASCII armor (or ``data`` unchanged if already binary)."""
    text = data.lstrip()
    if not text.startswith(b"-----BEGIN PGP"):
        return data
    lines = text.decode("ascii", "replace").splitlines()
    body: list[str] = []
    in_body = False
    for line in lines[1:]:
        if line.startswith("-----END"):
            break
        if in_body and not line.startswith("="):
            body.append(line.strip())
        elif not line.strip():
            in_body = True
    try:
        return base64.b64decode("".join(body))
    except ValueError:
        raise KeyringError("the repository key's ASCII armor is not valid base64") from None


__all__ = ["KeyringError", "packets", "primary_fingerprint"]
