"""Secrets never enter the spec, and the repository key comes only from where the spec allows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from provision.errors import SpecError
from provision.spec.loader import load_spec
from provision.spec.models import CREDENTIALS_HELP, PythonSpec, RepositorySpec

SPEC = Path(__file__).parents[2] / "specs" / "h200-ubuntu2404.yaml"

FINGERPRINT = "EB693B3035CD5710E231E123A4B469963BF863CC"
NVIDIA_KEY = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/3bf863cc.pub"
MIRROR = "https://mirror.example.org/cuda/ubuntu2404/x86_64/"


def _python(index_url: str) -> PythonSpec:
    return PythonSpec.model_validate(
        {
            "interpreter": "3.12",
            "venv": "/opt/venv",
            "torch": "2.11.0",
            "cuda_variant": "cu130",
            "index_url": index_url,
        }
    )


def _repository(**fields: Any) -> RepositorySpec:
    return RepositorySpec.model_validate({"url": MIRROR, "fingerprint": FINGERPRINT, **fields})


@pytest.mark.parametrize(
    "url",
    [
        "https://user:s3cret@download.pytorch.org/whl/cu130",
        "https://token@download.pytorch.org/whl/cu130",
        "https://download.pytorch.org@other.host/whl/cu130",
    ],
)
def test_urls_with_userinfo_are_refused_with_where_credentials_go(url: str) -> None:
    with pytest.raises(ValidationError) as refused:
        _python(url)
    message = str(refused.value)
    assert CREDENTIALS_HELP in message and "auth.conf.d" in message and "0600" in message


def test_the_refusal_never_shows_the_secret(tmp_path: Path) -> None:
    text = SPEC.read_text().replace(
        "venv: /opt", "index_url: https://u:s3cret@download.pytorch.org/whl/\n  venv: /opt"
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError) as refused:
        load_spec(spec)
    assert refused.value.problems == [
        f"{spec}:{_line(text, 'index_url')}:3: python.index_url: {CREDENTIALS_HELP}"
    ]


def _line(text: str, key: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if key in line)


def test_a_mirror_url_with_a_password_is_refused() -> None:
    with pytest.raises(ValidationError, match="credentials may not be written in a URL"):
        _repository(url="https://u:p@mirror.example.org/cuda/", key_url=NVIDIA_KEY)


@pytest.mark.parametrize(
    ("key_url", "why"),
    [
        ("http://developer.download.nvidia.com/x.pub", "must be an https URL"),
        ("https://169.254.169.254/latest/meta-data/", "host 169.254.169.254 is not an allowed key host"),
        ("https://mirror.example.org/key.pub", "host mirror.example.org is not an allowed key host"),
    ],
)
def test_key_url_must_be_https_to_an_allowed_host(key_url: str, why: str) -> None:
    with pytest.raises(ValidationError, match=f"key_url\n  Value error, {why}"):
        _repository(key_url=key_url)


def test_key_hosts_extend_the_allowed_list_with_names_only() -> None:
    assert _repository(key_url="https://mirror.example.org/key.pub", key_hosts=["mirror.example.org"])
    with pytest.raises(ValidationError, match="key_hosts"):
        _repository(key_url="https://169.254.169.254/k.pub", key_hosts=["169.254.169.254"])


def test_exactly_one_key_source() -> None:
    assert _repository(key_url=NVIDIA_KEY).key_file is None
    assert _repository(key_file="/etc/provision/mirror.pub").key_url is None
    for fields in ({}, {"key_url": NVIDIA_KEY, "key_file": "/etc/provision/mirror.pub"}):
        with pytest.raises(
            ValidationError, match=r"exactly one of repository\.key_url and repository\.key_file"
        ):
            _repository(**fields)
