"""Real dnf in an ``--installroot``: an empty RHEL-like root that only dnf and rpm touch.

A root is a directory with ``/etc/os-release`` naming the release (dnf reads its
``PLATFORM_ID``, e.g. ``platform:el9``, for module platform filtering), ``/etc/yum.repos.d``
with the stand-in repositories, and ``/etc/dnf/plugins/versionlock.conf`` whose ``locklist``
lies inside the root. Every dnf call passes ``--installroot``, ``--releasever``,
``--setopt=reposdir=`` and ``--setopt=pluginconfpath=`` into the root: without the last one the
versionlock plugin reads the host's ``/etc/dnf/plugins/versionlock.conf`` and writes the host's
own lock list; with the option but no ``versionlock.conf`` there it stops every command with
"Error: Locklist not set" (both measured here with dnf 4.14).

Run as a module it captures the fixture files of ``tests/fixtures/redhat/`` from real dnf:
``python3 -m tests.integration.harness.dnfroot capture tests/fixtures/redhat``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from provision.os.redhat.parse import RPM_QA_QUERYFORMAT, parse_rpm_qa

from .rhelrepo import RhelRepo, make_rpm_key, publish_epel, publish_rhel_repo

OS_RELEASE = {
    9: 'NAME="Rocky Linux"\nVERSION="9.5 (Blue Onyx)"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
    'VERSION_ID="9.5"\nPLATFORM_ID="platform:el9"\nPRETTY_NAME="Rocky Linux 9.5 (Blue Onyx)"\n',
    10: 'NAME="Rocky Linux"\nVERSION="10.0 (Red Quartz)"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
    'VERSION_ID="10.0"\nPLATFORM_ID="platform:el10"\nPRETTY_NAME="Rocky Linux 10.0 (Red Quartz)"\n',
}
"""Rocky Linux's ``/etc/os-release`` fields that dnf and Ansible read (Rocky Linux 9.5 and 10.0)."""


@dataclass(frozen=True)
class Result:
    """One dnf or rpm run: exit status and the combined stdout+stderr as the user saw it."""

    rc: int
    output: str


class InstallRoot:
    """A RHEL-like installroot at ``path`` for release ``major``, with ``repos`` configured."""

    def __init__(self, path: Path, major: int, repos: list[RhelRepo]) -> None:
        self.path = path
        self.major = major
        (path / "etc/yum.repos.d").mkdir(parents=True, exist_ok=True)
        (path / "etc/dnf/plugins").mkdir(parents=True, exist_ok=True)
        (path / "etc/os-release").write_text(OS_RELEASE[major])
        for repo in repos:
            (path / f"etc/yum.repos.d/{repo.repo_id}.repo").write_text(repo.repo_file())
        self.locklist.touch()
        (path / "etc/dnf/plugins/versionlock.conf").write_text(
            f"[main]\nenabled = 1\nlocklist = {self.locklist}\n"
        )

    @property
    def locklist(self) -> Path:
        """The versionlock plugin's lock list inside the root."""
        return self.path / "etc/dnf/plugins/versionlock.list"

    def argv(self, *args: str) -> list[str]:
        """The full dnf argv for ``args``, confined to this root."""
        root = self.path
        return [
            "dnf",
            "-y",
            f"--installroot={root}",
            f"--releasever={self.major}",
            f"--setopt=reposdir={root}/etc/yum.repos.d",
            f"--setopt=pluginconfpath={root}/etc/dnf/plugins",
            f"--setopt=cachedir={root}/var/cache/dnf",
            "--setopt=install_weak_deps=False",
            *args,
        ]

    def dnf(self, *args: str) -> Result:
        """Run dnf with ``args`` in the root; never raises on a non-zero exit."""
        return run_captured(self.argv(*args))

    def rpm_qa(self) -> Result:
        """``rpm --root <root> -qa --qf`` with the detect probe's query format."""
        return run_captured(["rpm", f"--root={self.path}", "-qa", "--qf", RPM_QA_QUERYFORMAT])

    def installed(self) -> dict[str, str]:
        """Installed package name -> ``epoch:version-release`` (from rpm, not dnf)."""
        return {p.name: f"{p.epoch}:{p.version}-{p.release}" for p in parse_rpm_qa(self.rpm_qa().output)}


def run_captured(argv: list[str]) -> Result:
    """Run ``argv`` in the C.UTF-8 locale; the exit status and stdout+stderr, never raising on rc."""
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=300)
    return Result(proc.returncode, proc.stdout + proc.stderr)


def _capture(dest: Path) -> None:
    """Write real dnf/rpm outputs as fixture files under ``dest``."""
    with tempfile.TemporaryDirectory(prefix="dnf-capture-") as tmp:
        base = Path(tmp)
        cache = base / "cache"
        cache.mkdir()
        key, other = (
            make_rpm_key(base / "key"),
            make_rpm_key(base / "other", "Someone else <x@example.invalid>"),
        )
        r9 = publish_rhel_repo(9, cache, base / "rhel9", key)
        r10 = publish_rhel_repo(10, cache, base / "rhel10", key)
        unsigned = publish_rhel_repo(10, cache, base / "rhel10-unsigned")
        epel9 = publish_epel(9, cache, base / "epel9")
        epel10 = publish_epel(10, cache, base / "epel10")

        def save(name: str, result: Result) -> None:
            text = result.output.replace(str(base), "/tmp/standin")
            (dest / name).write_text(text)
            print(f"{name}: rc={result.rc}", file=sys.stderr)

        el9 = InstallRoot(base / "el9", 9, [r9, epel9])
        save("dnf-module-list-default.txt", el9.dnf("module", "list"))
        el9.dnf("module", "install", "nvidia-driver:580-open/default")
        save("dnf-module-list-enabled-installed.txt", el9.dnf("module", "list", "nvidia-driver"))
        save("dnf-filtered-modular-other-stream.txt", el9.dnf("install", "nvidia-driver-3:590.48.01"))
        save("dnf-module-enable-other-stream.txt", el9.dnf("module", "enable", "nvidia-driver:590-open"))
        save("dnf-no-match.txt", el9.dnf("install", "nvidia-driver-9999"))
        el9.dnf("module", "disable", "nvidia-driver")
        save("dnf-module-list-disabled.txt", el9.dnf("module", "list", "nvidia-driver"))
        save("rpm-qa-el9.txt", el9.rpm_qa())

        flavour = InstallRoot(base / "flavour", 9, [r9, epel9])
        flavour.dnf("module", "enable", "nvidia-driver:580-open")
        flavour.dnf("install", "nvidia-open")
        flavour.dnf("module", "switch-to", "nvidia-driver:580-dkms", "--allowerasing")
        save("dnf-conflicts-other-flavour.txt", flavour.dnf("install", "cuda-drivers"))

        nodkms = InstallRoot(base / "nodkms", 9, [r9])
        nodkms.dnf("module", "enable", "nvidia-driver:580-open")
        save("dnf-nothing-provides.txt", nodkms.dnf("install", "nvidia-open"))

        wrong = InstallRoot(base / "el10-rhel9", 10, [r9, epel10])
        save("dnf-filtered-modular-other-major.txt", wrong.dnf("install", "nvidia-open"))
        save("dnf-module-enable-other-major.txt", wrong.dnf("module", "enable", "nvidia-driver:580-open"))

        el10 = InstallRoot(base / "el10", 10, [r10, epel10])
        el10.dnf("install", "nvidia-open-3:580.82.07", "nvidia-fabricmanager-580.82.07")
        el10.dnf("versionlock", "add", "nvidia-*-3:580.82.07*", "kmod-nvidia-*-3:580.82.07*")
        save("dnf-versionlock-list.txt", el10.dnf("versionlock", "list"))
        shutil.copyfile(el10.locklist, dest / "versionlock.list")
        save("dnf-versionlock-excluded.txt", el10.dnf("install", "nvidia-open-3:580.95.05"))
        save("rpm-qa-el10.txt", el10.rpm_qa())

        partial = InstallRoot(base / "el10-partial", 10, [r10, epel10])
        partial.dnf("install", "nvidia-driver-cuda-3:580.82.07")
        partial.dnf("versionlock", "add", "nvidia-driver-cuda-libs")
        save("dnf-versionlock-requires.txt", partial.dnf("install", "nvidia-driver-cuda-3:580.95.05"))

        def gpg_case(name: str, repo: RhelRepo, **repo_file: str | bool) -> None:
            root = InstallRoot(base / name, 10, [repo, epel10])
            (root.path / f"etc/yum.repos.d/{repo.repo_id}.repo").write_text(repo.repo_file(**repo_file))  # type: ignore[arg-type]
            save(f"dnf-{name}.txt", root.dnf("install", "nvidia-persistenced"))

        gpg_case("gpg-unsigned", unsigned, gpgcheck=True, gpgkey=key.url)
        gpg_case("gpg-wrong-key", r10, gpgkey=other.url)
        gpg_case("gpg-no-key", r10, gpgcheck=True, gpgkey="")

        gone = InstallRoot(base / "repo-down", 10, [])
        missing = RhelRepo(10, base / "missing", (base / "missing").as_uri(), r10.repo_id, False, 0.0)
        (gone.path / f"etc/yum.repos.d/{r10.repo_id}.repo").write_text(missing.repo_file())
        save("dnf-repo-down.txt", gone.dnf("--setopt=skip_if_unavailable=False", "install", "nvidia-open"))


if __name__ == "__main__":
    if sys.argv[1:2] == ["capture"] and len(sys.argv) == 3:
        _capture(Path(sys.argv[2]))
    else:
        sys.exit("usage: python3 -m tests.integration.harness.dnfroot capture DIR")
