"""Fetch a repository signing key and check its fingerprint before anything trusts it.

The key is fetched on the controller, de-armored, and its OpenPGP v4
fingerprint computed here (RFC 4880 §12.2: SHA-1 over 0x99, a two-octet
length and the public-key packet body). Only a key whose primary fingerprint
equals the pinned one is written as the binary keyring that the target's
deb822 source names in ``Signed-By``.
"""

from __future__ import annotations

import base64
import hashlib
import urllib.request
from pathlib import Path
from typing import Any

from provision.errors import ProvisionError
from provision.files import read_bytes
from provision.spec.models import KEY_HOSTS, key_url_problem, redacted


class KeyringError(ProvisionError):
    """The signing key could not be fetched, parsed, or has the wrong fingerprint."""


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
    dest.write_bytes(binary)
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


def primary_fingerprint(binary: bytes) -> str:
    """Upper-case hex v4 fingerprint of the first public-key packet in ``binary``.

    Raises:
        KeyringError: If the first packet is not a version 4 public key.
    """
    tag, body = _first_packet(binary)
    if tag != 6 or not body or body[0] != 4:
        raise KeyringError("the repository key is not an OpenPGP version 4 public key")
    digest = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body, usedforsecurity=False)
    return digest.hexdigest().upper()


def packets(data: bytes) -> list[tuple[int, bytes]]:
    """Every (tag, body) packet in binary OpenPGP data, in order."""
    out: list[tuple[int, bytes]] = []
    while data:
        tag, body, end = _packet(data)
        out.append((tag, body))
        data = data[end:]
    return out


def _first_packet(data: bytes) -> tuple[int, bytes]:
    tag, body, _ = _packet(data)
    return tag, body


def _packet(data: bytes) -> tuple[int, bytes, int]:
    if not data or not data[0] & 0x80:
        raise KeyringError("the repository key is not OpenPGP data")
    if data[0] & 0x40:  # new format: tag in low 6 bits, variable length
        # Zero padding lets a cut-off length header read as a length the bounds check rejects.
        tag, (length, start) = data[0] & 0x3F, _new_length(data + b"\0" * 5, 1)
    else:  # old format: tag in bits 5-2, length type in bits 1-0
        tag, size = (data[0] >> 2) & 0x0F, {0: 1, 1: 2, 2: 4}.get(data[0] & 0x03, 0)
        if not size:
            raise KeyringError("indeterminate-length OpenPGP packets are not supported")
        length, start = int.from_bytes(data[1 : 1 + size], "big"), 1 + size
    if start + length > len(data):  # a short body would be fingerprinted or written as if whole
        raise KeyringError("the repository key is truncated (an OpenPGP packet ends early)")
    return tag, data[start : start + length], start + length


def _new_length(data: bytes, i: int) -> tuple[int, int]:
    first = data[i]
    if first < 192:
        return first, i + 1
    if first < 224:
        return ((first - 192) << 8) + data[i + 1] + 192, i + 2
    if first == 255:
        return int.from_bytes(data[i + 1 : i + 5], "big"), i + 5
    raise KeyringError("partial-length OpenPGP packets are not supported in a key")
