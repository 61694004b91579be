"""Secrets in URLs: found before a URL enters the spec, redacted wherever text leaves the machine.

A URL of the spec reaches the saved plan (0644), the extravars, pip's and apt's command lines
(``/proc/<pid>/cmdline`` is world-readable), the run directory, the lock and Ansible's logs. So a
credential never belongs in one: the spec refuses a URL with userinfo (``user:token@``, checked by
the models), a query or a fragment (``?token=...``, a presigned ``?X-Amz-Signature=...``), or a path
segment that looks like a token (:func:`token_like`: Cloudsmith and Gemfury put them there), and
says where credentials go instead (docs/security.md#secrets). Support bundles redact the same
shapes again (:func:`redact_urls`), for text that did not come from the spec.

Standard library only: the spec's models use it on every command that reads a spec.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from urllib.parse import unquote, urlsplit

TOKEN_PREFIXES = (
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "gldt-",
    "pypi-Ag",
    "hf_",
    "npm_",
    "xoxb-",
    "xoxp-",
    "AKIA",
    "ASIA",
    "AKCp",
)
"""Prefixes of access tokens whose format is published: GitHub ("About authentication to GitHub",
token formats ghp_/gho_/ghs_/ghu_/github_pat_), GitLab ("Token prefixes": glpat-, gldt-), PyPI API
tokens (pypi-AgE...), Hugging Face (hf_), npm (npm_), Slack (xoxb-/xoxp-), AWS access key ids
(AKIA/ASIA, "Understanding unique ID prefixes" in the IAM user guide), JFrog API keys (AKCp)."""

MIN_TOKEN = 20
"""Shortest path segment judged by its randomness: shorter ones are names (``cu130``, ``x86_64``)."""
MIN_ENTROPY = 4.0
"""Bits per character from which a mixed-case segment with digits reads as random: a random base62
token of 32 characters scores ~4.8, descriptive names (``pypi-remote-virtual-repository-2024``)
stay under 3.9, a UUID ~3.6."""
MIN_HEX = 32
"""Length from which a run of hex digits (a hex token or secret) is refused whatever its entropy."""


def entropy(text: str) -> float:
    """Shannon entropy of ``text``'s characters, bits per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values()) if text else 0.0


def token_like(segment: str) -> bool:
    """Whether a URL path segment looks like an access token rather than a name.

    A published token prefix (:data:`TOKEN_PREFIXES`); at least :data:`MIN_HEX` hex digits; or at
    least :data:`MIN_TOKEN` characters of ``[A-Za-z0-9_-]`` holding digits and both cases (or a
    quarter digits) with at least :data:`MIN_ENTROPY` bits of entropy per character.
    """
    if segment.startswith(TOKEN_PREFIXES):
        return True
    if len(segment) >= MIN_HEX and re.fullmatch(r"[0-9a-fA-F]+", segment):
        return True
    if len(segment) < MIN_TOKEN or not re.fullmatch(r"[A-Za-z0-9_-]+", segment):
        return False
    digits = sum(c.isdigit() for c in segment)
    mixed = any(c.isupper() for c in segment) and any(c.islower() for c in segment)
    return digits >= 3 and (mixed or digits * 4 >= len(segment)) and entropy(segment) >= MIN_ENTROPY


def secret_problem(url: str) -> str | None:
    """Why ``url`` may carry a secret (never quoting it), or None: a query, a fragment, or the
    number of a token-like path segment."""
    parts = urlsplit(url)
    if parts.query:
        return "it has a query string (?...)"
    if parts.fragment:
        return "it has a fragment (#...)"
    for number, segment in enumerate(parts.path.split("/")[1:], start=1):
        if token_like(unquote(segment)):
            return f"its path segment {number} looks like an access token"
    return None


_URL = re.compile(r"\b([a-z][a-z0-9+.-]*://)([^\s\"'<>]+)", re.IGNORECASE)


def redact_urls(text: str) -> str:
    """``text`` with every URL's userinfo, query, fragment and token-like path segments replaced by
    ``<redacted>`` (the scheme, host and the other segments kept, so the URL is still recognisable)."""
    return _URL.sub(lambda m: m.group(1) + _redact_rest(m.group(2)), text)


def _redact_rest(rest: str) -> str:
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, path = rest[:end], rest[end:]
    if "@" in netloc:
        netloc = "<redacted>@" + netloc.rpartition("@")[2]
    for mark in ("?", "#"):
        if mark in path:
            path = path.partition(mark)[0] + mark + "<redacted>"
    segments = ["<redacted>" if token_like(unquote(s)) else s for s in path.split("/")]
    return netloc + "/".join(segments)
