"""Repository key parsing: a key that is cut short is refused, never fingerprinted or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.apply.keyring import (
    MAX_KEY_BYTES,
    KeyringError,
    fetch_key,
    packets,
    primary_fingerprint,
    read_key_file,
    write_verified_keyring,
)
from provision.spec.models import KEY_HOSTS

# A version 4 public-key packet (old format, two-octet length) and a user-id packet (new format).
PRIMARY = b"\x99\x00\x0c" + b"\x04" + bytes(range(11))
USER_ID = b"\xcd\x05" + b"alice"


def _verify(tmp_path: Path, data: bytes, dest: Path) -> Path:
    key = tmp_path / "key.gpg"
    key.write_bytes(data)
    return write_verified_keyring(read_key_file(key), str(key), primary_fingerprint(PRIMARY), dest)


def test_whole_key_is_verified_and_written(tmp_path: Path) -> None:
    dest = tmp_path / "keyring.gpg"
    _verify(tmp_path, PRIMARY + USER_ID, dest)
    assert dest.read_bytes() == PRIMARY + USER_ID


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://developer.download.nvidia.com/compute/cuda/repos/x.pub", "must be an https URL"),
        ("https://169.254.169.254/latest/meta-data/", "host 169.254.169.254 is not an allowed key host"),
        ("https://evil.example/3bf863cc.pub", "host evil.example is not an allowed key host"),
        ("https://user:hunter2@developer.download.nvidia.com/k.pub", "credentials may not be written"),
        ("file:///etc/shadow", "must be an https URL"),
    ],
)
def test_key_is_fetched_only_over_https_from_an_allowed_host(url: str, why: str) -> None:
    with pytest.raises(KeyringError, match=f"refusing to fetch the repository key .*: it {why}"):
        fetch_key(url, KEY_HOSTS)


def test_a_refused_key_url_never_shows_its_password() -> None:
    with pytest.raises(KeyringError) as refused:
        fetch_key("https://user:hunter2@evil.example/k.pub", KEY_HOSTS)
    assert "hunter2" not in str(refused.value) and "***@evil.example" in str(refused.value)


def test_a_key_file_that_is_not_a_small_regular_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyringError, match="not a regular file"):
        read_key_file(Path("/dev/zero"))
    big = tmp_path / "big.pub"
    big.write_bytes(b"\0" * (MAX_KEY_BYTES + 1))
    with pytest.raises(KeyringError, match="larger than"):
        read_key_file(big)


@pytest.mark.parametrize(
    "data",
    [PRIMARY + USER_ID[:-1], PRIMARY[:-1], PRIMARY + b"\xcd", PRIMARY + b"\xcd\xc1", PRIMARY + b"\x99\x00"],
    ids=["short user id", "short primary", "new header only", "two-octet length cut", "old length cut"],
)
def test_truncated_key_is_refused_and_nothing_written(tmp_path: Path, data: bytes) -> None:
    dest = tmp_path / "keyring.gpg"
    with pytest.raises(KeyringError, match="truncated"):
        _verify(tmp_path, data, dest)
    assert not dest.exists()
    with pytest.raises(KeyringError, match="truncated"):
        packets(data)
