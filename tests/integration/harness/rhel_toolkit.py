"""The stand-in of NVIDIA's libnvidia-container RPM repository: the container toolkit on the RHEL family.

NVIDIA's repository (``https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch``, as its
``nvidia-container-toolkit.repo`` names it; install guide "With dnf: RHEL/CentOS, Fedora, Amazon
Linux", https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html)
cannot be reached from CI, so the harness publishes tiny RPMs built by real ``rpmbuild``
(:mod:`tests.integration.harness.rpms`) in their own repository, indexed by real ``createrepo_c``.
What follows the real repository, and where from:

- the four packages of a release, ``nvidia-container-toolkit``, ``nvidia-container-toolkit-base``,
  ``libnvidia-container-tools`` and ``libnvidia-container1``, at ``<version>-1`` without a dist
  tag and no epoch (the repository's files: ``libnvidia-container1-1.18.0-1.x86_64.rpm``,
  ``nvidia-container-toolkit-1.18.0-1.x86_64.rpm``; one repository for every RPM distribution);
- their relations as NVIDIA's spec files give them: the toolkit Requires
  ``nvidia-container-toolkit-base == <version>-<release>`` and ``libnvidia-container-tools >= <v>,
  < 2.0.0`` (NVIDIA/nvidia-container-toolkit ``packaging/rpm/SPECS/nvidia-container-toolkit.spec``);
  the tools Require the library at their version (release notes 1.18.0: the libraries must match
  the toolkit exactly);
- releases 1.17.8 and 1.18.2 (real ones, as on the Debian stand-in, harness/toolkit.py); 1.19.1 is
  left out, so that a spec naming it asks for a release the repository lacks;
- the repository's *metadata* is signed (``repodata/repomd.xml.asc``, which NVIDIA's repository
  serves), the packages are not: NVIDIA's ``.repo`` file sets ``repo_gpgcheck=1`` and
  ``gpgcheck=0``. The stand-in's key is a throwaway RSA key of its own (the real repository's key
  is not the CUDA repository's either).

Payloads, unlike the CUDA stand-in's empty ones, because the apply runs them: ``/usr/bin/nvidia-ctk``
is the Debian stand-in's Python program (harness/toolkit.py, with the real command's arguments),
reading the driver's libraries from ``/usr/lib64`` as on the RHEL family; from 1.18.0 the base
package ships ``nvidia-cdi-refresh.path`` and ``.service`` (bodies ours). The driver library it
needs (``libcuda.so.<version>``) is the CUDA stand-in's ``nvidia-driver-cuda-libs`` payload, at the
path NVIDIA's ``nvidia-driver.spec`` gives it (``%files cuda-libs``: ``%{_libdir}/libcuda.so.%{version}``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .packages import STANDIN_DEV
from .proc import run
from .rhelrepo import RpmKey, index_repo, make_rpm_key
from .rpms import Rpm, ensure_rpms
from .server import StaticServer
from .toolkit import NVIDIA_CTK, REFRESH_PATH, REFRESH_SERVICE, RELEASES

SUBPATH = "libnvidia-container/stable/rpm/x86_64"
LIBDIR = "/usr/lib64"
"""The RHEL family's library directory (``%{_libdir}`` on x86_64)."""
UNITS = "/usr/lib/systemd/system"


def nvidia_ctk(upstream: str) -> str:
    """The stand-in ``nvidia-ctk`` of harness/toolkit.py, looking for the driver in :data:`LIBDIR`."""
    debian = 'LIBDIR = "/usr/lib/x86_64-linux-gnu"'
    text = NVIDIA_CTK.format(version=upstream, standin=STANDIN_DEV)
    assert debian in text, "harness/toolkit.py's nvidia-ctk no longer names its library directory"
    return text.replace(debian, f'LIBDIR = "{LIBDIR}"')


def toolkit_release(upstream: str) -> list[Rpm]:
    """The four RPMs of one release, with NVIDIA's relations and the payloads the apply runs."""
    v = f"{upstream}-1"
    base: tuple[tuple[str, int, str], ...] = (("/usr/bin/nvidia-ctk", 0o755, nvidia_ctk(upstream)),)
    if tuple(map(int, upstream.split("."))) >= (1, 18, 0):
        base += (
            (f"{UNITS}/nvidia-cdi-refresh.path", 0o644, REFRESH_PATH),
            (f"{UNITS}/nvidia-cdi-refresh.service", 0o644, REFRESH_SERVICE),
        )
    hook = (("/usr/bin/nvidia-container-runtime-hook", 0o755, "#!/bin/sh\nexit 0\n"),)
    cli = (("/usr/bin/nvidia-container-cli", 0o755, f"#!/bin/sh\necho 'cli-version: {upstream}'\n"),)
    lib = (
        (f"{LIBDIR}/libnvidia-container.so.{upstream}", 0o644, f"stand-in libnvidia-container {upstream}\n"),
    )
    summary = "Stand-in for an NVIDIA container toolkit package (test data only)"
    return [
        Rpm(
            "nvidia-container-toolkit",
            upstream,
            "1",
            requires=(
                f"nvidia-container-toolkit-base == {v}",
                f"libnvidia-container-tools >= {v}",
                "libnvidia-container-tools < 2.0.0",
            ),
            summary=summary,
            files=hook,
        ),
        Rpm("nvidia-container-toolkit-base", upstream, "1", summary=summary, files=base),
        Rpm(
            "libnvidia-container-tools",
            upstream,
            "1",
            requires=(f"libnvidia-container1 = {v}",),
            summary=summary,
            files=cli,
        ),
        Rpm("libnvidia-container1", upstream, "1", summary=summary, files=lib),
    ]


def sign_metadata(repo: Path, key: RpmKey) -> Path:
    """``repodata/repomd.xml.asc``: an armored detached signature of the index, as NVIDIA serves."""
    repomd = repo / "repodata" / "repomd.xml"
    gpg: list[str | Path] = ["gpg", "--homedir", key.gnupghome, "--batch", "--quiet", "--yes"]
    run(
        [
            *gpg,
            "--local-user",
            key.fingerprint,
            "--armor",
            "--detach-sign",
            "--output",
            f"{repomd}.asc",
            repomd,
        ]
    )
    return repomd.with_name("repomd.xml.asc")


@dataclass(frozen=True)
class ToolkitRpmRepo:
    """The published stand-in: its ``baseurl``, the key that signs its metadata, build time."""

    url: str
    key: RpmKey
    build_seconds: float

    @property
    def fingerprint(self) -> str:
        """The metadata key's fingerprint (40 hex digits)."""
        return self.key.fingerprint


def publish_toolkit_rpm_repo(server: StaticServer, cache: Path, scratch: Path) -> ToolkitRpmRepo:
    """Build (or reuse) the RPMs of :data:`RELEASES`, index them under ``server.root`` and sign
    the metadata (never the packages)."""
    started = time.monotonic()
    rpms = [rpm for release in RELEASES for rpm in toolkit_release(release)]
    key = make_rpm_key(scratch / "ctk-key", "NVIDIA container toolkit stand-in <cudatools@nvidia.com>")
    where = server.root / SUBPATH
    index_repo(ensure_rpms(rpms, cache), rpms, where, None, None)
    sign_metadata(where, key)
    return ToolkitRpmRepo(f"{server.url}/{SUBPATH}", key, time.monotonic() - started)
