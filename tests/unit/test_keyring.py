"""Repository key parsing: a key that is cut short is refused, never fingerprinted or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.apply.keyring import KeyringError, fetch_verified_keyring, packets, primary_fingerprint

# A version 4 public-key packet (old format, two-octet length) and a user-id packet (new format).
PRIMARY = b"\x99\x00\x0c" + b"\x04" + bytes(range(11))
USER_ID = b"\xcd\x05" + b"alice"


def _serve(tmp_path: Path, data: bytes) -> str:
    key = tmp_path / "key.gpg"
    key.write_bytes(data)
    return key.as_uri()


def test_whole_key_is_verified_and_written(tmp_path: Path) -> None:
    dest = tmp_path / "keyring.gpg"
    fetch_verified_keyring(_serve(tmp_path, PRIMARY + USER_ID), primary_fingerprint(PRIMARY), dest)
    assert dest.read_bytes() == PRIMARY + USER_ID


@pytest.mark.parametrize(
    "data",
    [PRIMARY + USER_ID[:-1], PRIMARY[:-1], PRIMARY + b"\xcd", PRIMARY + b"\xcd\xc1", PRIMARY + b"\x99\x00"],
    ids=["short user id", "short primary", "new header only", "two-octet length cut", "old length cut"],
)
def test_truncated_key_is_refused_and_nothing_written(tmp_path: Path, data: bytes) -> None:
    dest = tmp_path / "keyring.gpg"
    with pytest.raises(KeyringError, match="truncated"):
        fetch_verified_keyring(_serve(tmp_path, data), primary_fingerprint(PRIMARY), dest)
    assert not dest.exists()
    with pytest.raises(KeyringError, match="truncated"):
        packets(data)
