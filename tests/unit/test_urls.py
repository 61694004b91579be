"""Secrets in URLs: refused in the spec, redacted in what leaves the machine (provision/spec/urls.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from provision.spec.models import PythonSpec, ServeSpec
from provision.spec.urls import redact_urls, secret_problem, token_like
from provision.support import redact

NAMES = [
    "cu130",
    "x86_64",
    "ubuntu2404",
    "simple",
    "whl",
    "nvidia-cuda-toolkit-12-4",
    "pypi-remote-virtual-repository-2024",
    "3fa85f64-5717-4562-b3fc-2c963f66afa6",
    "2024-12-01",
    "12345678901234567890",
]
TOKENS = [
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "glpat-xxxxxxxxxxxxxxxxxxxx",
    "pypi-AgEIcHlwaS5vcmc",
    "hf_abc",
    "AKIAIOSFODNN7EXAMPLE",
    "Xq7RbN3kLmP9sT2vWz4Y",
    "a1b2c3d4e5f6a7b8c9d0a1b2c3d4e5f6",
    "dGhpcyBpcyBhIHNlY3JldCB0b2tlbg12",
]


@pytest.mark.parametrize("segment", NAMES)
def test_names_in_index_paths_are_not_tokens(segment: str) -> None:
    assert not token_like(segment)


@pytest.mark.parametrize("segment", TOKENS)
def test_published_token_shapes_and_random_segments_are_tokens(segment: str) -> None:
    assert token_like(segment)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://mirror.example/simple/?token=abc", "it has a query string (?...)"),
        ("https://bucket.s3.amazonaws.com/key.asc?X-Amz-Signature=0f", "it has a query string (?...)"),
        ("https://mirror.example/simple/#abc", "it has a fragment (#...)"),
        ("https://pypi.fury.io/Xq7RbN3kLmP9sT2vWz4Y/acme/", "its path segment 1 looks like an access token"),
        ("https://download.pytorch.org/whl/cu130", None),
    ],
)
def test_a_url_that_may_carry_a_secret_is_named_without_quoting_it(url: str, why: str | None) -> None:
    assert secret_problem(url) == why


def test_the_spec_refuses_secret_urls_in_every_index_field() -> None:
    with pytest.raises(ValidationError, match="which may carry a secret") as raised:
        PythonSpec(interpreter="3.12", venv="/opt/v", index_url="https://m.example/simple?t=ghp_x")  # type: ignore[arg-type]
    assert "ghp_x" not in str(raised.value).split("input_value")[0]
    with pytest.raises(ValidationError, match="looks like an access token"):
        ServeSpec.model_validate(
            {
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "index_url": "https://pypi.fury.io/Xq7RbN3kLmP9sT2vWz4Y/",
            }
        )


def test_support_bundles_redact_every_url_shape() -> None:
    text = (
        "pip install --index-url https://__token__:s3cr3t@mirror.example/simple/?token=ghp_x#y torch\n"
        "fetched https://dl.cloudsmith.io/Xq7RbN3kLmP9sT2vWz4Y/acme/ml/python/simple/ and "
        "https://download.pytorch.org/whl/cu130\npassword: hunter2\n"
    )
    out = redact(text)
    for secret in ("s3cr3t", "ghp_x", "Xq7RbN3kLmP9sT2vWz4Y", "hunter2"):
        assert secret not in out
    assert "https://<redacted>@mirror.example/simple/?<redacted>" in out
    assert "https://dl.cloudsmith.io/<redacted>/acme/ml/python/simple/" in out
    assert "https://download.pytorch.org/whl/cu130" in out


@given(st.text(max_size=300))
def test_redaction_never_raises_and_never_grows_a_url_without_secrets(text: str) -> None:
    out = redact_urls(text)
    assert isinstance(out, str)
    if "://" not in text:
        assert out == text
