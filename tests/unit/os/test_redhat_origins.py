"""The RHEL family's driver origins: the host comes from the repository's own ``baseurl`` (or
``metalink``/``mirrorlist``), never from its id, and an origin not read is never another origin.

The probe output is constructed in the formats of real dnf 4.14 (``repoquery --installed --qf
'%{name} %{from_repo}'`` prints the bare repository id, checked by
tests/integration/test_dnf_real.py::test_origins_probe_reads_the_repository_host_from_the_repo_file_not_the_id)
and of dnf.conf(5) ``.repo`` files (NVIDIA's ``cuda-rhel9.repo`` names its section ``cuda-rhel9-x86_64``).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provision.detect.facts import PackageOrigins
from provision.os.redhat.parse import parse_repo_files
from provision.os.redhat.probes import parse_origins
from provision.plan.origins import origin_findings
from provision.unknown import Unknown
from tests.unit.factories import CATALOG, spec_from
from tests.unit.test_redhat_plan import SPEC, _rocky

INSTALLED = (
    "nvidia-driver cuda-rhel9-x86_64\nkmod-nvidia-open-dkms cuda-rhel9-x86_64\n"
    "nvidia-persistenced @System\nlibnvidia-ml \n"
)
NVIDIA = (
    "[cuda-rhel9-x86_64]\nname=cuda-rhel9-x86_64\n"
    "baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64\nenabled=1\ngpgcheck=1\n"
)


def _probe(repos: str, installed: str = INSTALLED) -> str:
    return f"=== installed\n{installed}=== repos\n{repos}"


def _origins(repos: str) -> dict[str, str]:
    parsed = parse_origins(_probe(repos), 0)
    assert isinstance(parsed, PackageOrigins), parsed
    return parsed.origins


@pytest.mark.parametrize(
    ("repos", "host"),
    [
        (NVIDIA, "developer.download.nvidia.com"),
        # a mirror keeps NVIDIA's id: the host is the mirror's (mixed case, a port, several URLs)
        (
            "[cuda-rhel9-x86_64]\nbaseurl = HTTPS://Mirror.Example.org:8443/cuda/rhel9/x86_64,\n"
            "  https://second.example.org/cuda/\n",
            "mirror.example.org:8443",
        ),
        # the stand-in of the integration tests, on loopback, under provision's own id
        ("[provision-nvidia-cuda]\nbaseurl=http://127.0.0.1:40123/rhel9/\n", None),
        (
            "[cuda-rhel9-x86_64]\nmetalink=https://mirrors.example.net/metalink?repo=cuda\n",
            "mirrors.example.net",
        ),
        ("[cuda-rhel9-x86_64]\nbaseurl=file:///srv/mirror/cuda/rhel9/\n", "local"),
        ("[cuda-rhel9-x86_64]\nbaseurl=https://user:secret@mirror.example.org/cuda/\n", "mirror.example.org"),
    ],
)
def test_the_host_is_the_repositorys_baseurl_not_its_id(repos: str, host: str | None) -> None:
    origins = _origins(repos.replace("provision-nvidia-cuda", "cuda-rhel9-x86_64") if host is None else repos)
    assert origins["nvidia-driver"] == origins["kmod-nvidia-open-dkms"] == (host or "127.0.0.1:40123")
    assert origins["nvidia-persistenced"] == origins["libnvidia-ml"] == "local"  # @System, no from_repo


@pytest.mark.parametrize(
    "repos",
    [
        "",  # the .repo file removed since the install
        "[cuda-rhel9-x86_64]\nname=cuda\nenabled=1\n",  # no URL
        "[cuda-rhel9-x86_64]\nbaseurl=https://$mirrorhost/cuda/\n",  # a dnf variable in the host
        "[cuda-rhel9-x86_64]\nbaseurl=gopher://old.example.org/\n",
        "baseurl=https://outside.example.org/\n[other]\nbaseurl=https://other.example.org/\n",
    ],
)
def test_an_origin_not_read_is_left_out_never_guessed(repos: str) -> None:
    origins = _origins(repos)
    assert "nvidia-driver" not in origins and "kmod-nvidia-open-dkms" not in origins
    assert origins["nvidia-persistenced"] == "local"


def test_repo_files_first_section_wins_and_main_comments_and_junk_are_skipped() -> None:
    text = (
        "# comment\n[main]\nbaseurl=https://main.example.org/\n; other comment\n"
        "[a]\nbaseurl=https://a.example.org/x\n[a]\nbaseurl=https://dup.example.org/\n"
        "[b]\nmirrorlist=http://b.example.org/list\nbaseurl=\nnot a key\n[c\n"
    )
    assert parse_repo_files(text) == {"a": "a.example.org", "b": "b.example.org"}


def test_probe_failures_and_noise() -> None:
    assert parse_origins("sh: 1: dnf: not found\n", 127) == Unknown(unknown="dnf: not found")
    assert isinstance(parse_origins("", 0), Unknown)  # no package list: not "no packages"
    assert parse_origins(_probe(NVIDIA, ""), 0) == PackageOrigins()
    noisy = _probe(NVIDIA, "Failed to set locale, defaulting to C.UTF-8\nnvidia-driver cuda-rhel9-x86_64\n")
    assert parse_origins(noisy, 0) == PackageOrigins(
        origins={"nvidia-driver": "developer.download.nvidia.com"}
    )


@given(st.text(max_size=400))
def test_parsers_never_raise(text: str) -> None:
    assert isinstance(parse_repo_files(text), dict)
    assert isinstance(parse_origins(text, 0), PackageOrigins | Unknown)
    assert isinstance(parse_origins(_probe(text, text), 0), PackageOrigins | Unknown)


FROM_NVIDIA_ID = "nvidia-driver cuda-rhel9-x86_64\nkmod-nvidia-open-dkms cuda-rhel9-x86_64\n"
FROM_PROVISION_ID = FROM_NVIDIA_ID.replace("cuda-rhel9-x86_64", "provision-nvidia-cuda")


def _rules(url: str | None, repos: str, installed: str = FROM_NVIDIA_ID) -> set[str]:
    spec = spec_from(SPEC)
    if url is not None:
        repository = {"url": url, "key_file": "/etc/pki/key.asc", "fingerprint": "A" * 40}
        spec = spec.model_validate(
            {**spec.model_dump(mode="json", exclude_none=True), "repository": repository}
        )
    facts = _rocky(origins=parse_origins(_probe(repos, installed), 0))
    return {f.rule for f in origin_findings(spec, facts, CATALOG)}


def test_plan_compares_hosts_mirror_standin_nvidia_and_unknown() -> None:
    mirror = "[cuda-rhel9-x86_64]\nbaseurl=https://mirror.example.org/cuda/rhel9/x86_64/\n"
    standin = "[provision-nvidia-cuda]\nbaseurl=http://127.0.0.1:40123/rhel9/\n"
    assert _rules(None, NVIDIA) == set()  # NVIDIA's own repository, the catalog's host
    assert _rules("https://mirror.example.org/cuda/rhel9/x86_64/", mirror) == set()
    assert _rules("http://127.0.0.1:40123/rhel9/", standin, FROM_PROVISION_ID) == set()
    assert _rules(None, mirror) == {"driver-origin-not-spec"}  # a mirror the spec does not name
    assert _rules("https://mirror.example.org/cuda/", NVIDIA) == {"driver-origin-not-spec"}
    assert _rules("https://mirror.example.org/cuda/", "") == set()  # nothing read: nothing reported
    assert _rules(None, NVIDIA, FROM_NVIDIA_ID + "nvidia-persistenced @System\n") == {"mixed-driver-sources"}
