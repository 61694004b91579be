"""OpenPGP packets and v4 fingerprints, read without gpg (RFC 4880 §4.2 packet headers, §12.2
fingerprints: SHA-1 over 0x99, a two-octet length and the public-key packet body).

Apply checks a downloaded key with it before the target trusts it; detection reads which keys an
installed keyring holds, so a rotated repository key is planned (issue 13).
"""

from __future__ import annotations

import hashlib

from provision.errors import ProvisionError

PUBLIC_KEY = 6
"""Packet tag of a primary public key (a subkey is tag 14)."""


class KeyringError(ProvisionError):
    """The signing key could not be fetched, parsed, or has the wrong fingerprint."""


def primary_fingerprint(binary: bytes) -> str:
    """Upper-case hex v4 fingerprint of the first public-key packet in ``binary``.

    Raises:
        KeyringError: If the first packet is not a version 4 public key.
    """
    tag, body = _first_packet(binary)
    if tag != 6 or not body or body[0] != 4:
        raise KeyringError("the repository key is not an OpenPGP version 4 public key")
    return _v4_fingerprint(body)


def keyring_fingerprints(binary: bytes) -> tuple[str, ...]:
    """Upper-case hex v4 fingerprints of every primary key in a binary keyring, in file order.

    Raises:
        KeyringError: ``binary`` is not a sequence of OpenPGP packets.
    """
    return tuple(
        _v4_fingerprint(body) for tag, body in packets(binary) if tag == PUBLIC_KEY and body[:1] == b"\x04"
    )


def _v4_fingerprint(body: bytes) -> str:
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
