"""apt and dpkg: Debian and Ubuntu behind :class:`~provision.os.base.PackageManager`.

Sources: dpkg version ordering and syntax, delegated to python-debian; apt_preferences(5) for
the pins (priority 1001 lets apt downgrade to the pinned version; preferences.d is read in
alphanumeric order and "the first specific-form record matching an available package version
determines the priority", hence the file name that sorts first); deb822 sources with
``Signed-By`` (sources.list(5)); unattended-upgrades' ``Package-Blacklist`` entries are regular
expression prefixes (pando85/homelab PR #4110, field failure FF-01).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from provision.os.base import FamilyProbes, LockState, ManagedFiles, Pin, installed
from provision.os.debian import CREDENTIALS_NOTE, probes
from provision.os.models import Package, PackageLocks
from provision.unknown import Unknown
from provision.versions import DottedVersion

FILES = ManagedFiles(
    keyring="/usr/share/keyrings/provision-nvidia-cuda.gpg",
    sources="/etc/apt/sources.list.d/provision-nvidia-cuda.sources",
    # "00-" sorts before NVIDIA's nvidia-driver-pinning-<branch>: apt reads preferences.d in
    # alphanumeric order and the first record matching a version sets its priority (apt_preferences(5)).
    pins="/etc/apt/preferences.d/00-provision-nvidia",
    upgrade_guard="/etc/apt/apt.conf.d/51provision-nvidia-unattended",
    legacy_pins=("/etc/apt/preferences.d/provision-nvidia",),
)
_IMAGE = re.compile(r"^linux-image-(\d\S*)$")
_DEB_VERSION = re.compile(
    r"^((?P<epoch>\d+):)?(?P<upstream_version>[A-Za-z0-9.+:~-]+?)(-(?P<debian_revision>[A-Za-z0-9+.~]+))?$"
)
"""``[epoch:]upstream_version[-debian_revision]`` (Debian Policy 5.6.12,
https://www.debian.org/doc/debian-policy/ch-controlfields.html#version), split as python-debian's
``debian_support.Version`` splits it; planning needs only the upstream part, and importing
python-debian costs ~6 ms (it is loaded for ordering versions, :meth:`Apt.compare`)."""
_HEADER_METAS = {
    "linux-image-generic": "linux-headers-generic",
    "linux-image-amd64": "linux-headers-amd64",
    "linux-image-cloud-amd64": "linux-headers-cloud-amd64",
    "linux-image-arm64": "linux-headers-arm64",
}


class Apt:
    """apt/dpkg behind the package-manager interface."""

    family = "Debian"
    package_format = "deb"
    files = FILES
    repair_command = "apt-get --fix-broken install"
    source_note = "Signed-By a keyring with a pinned fingerprint (deb822)"
    interrupted_note = "an interrupted dpkg run (entries in /var/lib/dpkg/updates)"
    state_source = "dpkg(1) (https://manpages.debian.org/bookworm/dpkg/dpkg.1.en.html)"
    reboot_flag = "/run/reboot-required was set"
    index_source = "apt-cache madison on the host (the repository's package index)"
    command_prefixes: tuple[str, ...] = ("'/usr/bin/apt", '"/usr/bin/apt', "/usr/bin/apt")
    credentials_note = CREDENTIALS_NOTE
    """apt_auth.conf(5)."""
    lock_noun = "apt pins"
    guard_noun = "unattended-upgrades guard"
    probes = FamilyProbes(packages=probes.PACKAGES, locks=probes.LOCKS, origins=probes.ORIGINS)

    initramfs_command = "update-initramfs -u -k all"
    """update-initramfs(8), https://manpages.debian.org/bookworm/initramfs-tools/update-initramfs.8.en.html"""

    def install_command(self, names: Sequence[str]) -> str:
        return f"apt-get install {' '.join(names)}"

    def remove_command(self, names: Sequence[str]) -> str:
        return f"apt-get remove {' '.join(names)}"

    def reinstall_command(self, names: Sequence[str]) -> str:
        return f"apt-get install --reinstall {' '.join(names)}"

    def add_on_repositories(self, component: str) -> tuple[str, ...]:
        """Debian and Ubuntu carry DKMS and the node exporter in their own archives."""
        return ()

    def repository_package(self, repository: str) -> str:
        return repository

    def satisfied(self, packages: tuple[Package, ...] | Unknown, request: str) -> bool:
        """Debian's kernel headers carry the release in the name: a request is a package name."""
        return installed(packages, self.request_name(request)) is not None

    def compiler_packages(self, major: str, cxx: bool) -> tuple[str, ...]:
        """``gcc-13`` (and ``g++-13``): Debian and Ubuntu package each gcc major apart."""
        return (f"gcc-{major}", *((f"g++-{major}",) if cxx else ()))

    def driver_stream(self, os_version: str, branch: int, flavor: str) -> str | None:
        return None

    def failure_cause(self, output: str) -> str | None:
        return failure_cause(output)

    def upstream(self, version: str) -> str:
        """The upstream part of a Debian version; ValueError when ``version`` is not one."""
        m = _DEB_VERSION.match(version)
        if m is None or (m["epoch"] is None and ":" in m["upstream_version"]):
            raise ValueError(f"Invalid version string {version!r}")
        return str(m["upstream_version"]) or version

    def compare(self, a: str, b: str) -> int:
        from debian.debian_support import Version as DebVersion  # ~6 ms: only when planning

        va, vb = DebVersion(a), DebVersion(b)
        return (va > vb) - (va < vb)

    def version_glob(self, target: DottedVersion, suffix: str = "", full_parts: int = 3) -> str:
        """``9.14.0.64-*`` for a full version (any Debian revision), ``9.14.*`` for a prefix;
        fnmatch patterns, as ansible.builtin.apt and apt_preferences(5) accept."""
        full = len(target.parts) >= full_parts
        return f"{target}-*{suffix}" if full else f"{target}.*{suffix}"

    def request(self, name: str, version: str | None = None) -> str:
        return f"{name}={version}" if version else name

    def request_name(self, request: str) -> str:
        return request.split("=")[0]

    def pins_text(self, pins: Sequence[Pin]) -> str:
        head = "# Managed by provision: NVIDIA package families pinned to the spec's versions.\n"
        stanzas = [
            f"Explanation: {p.why}\nPackage: {p.packages}\nPin: version {p.version}\nPin-Priority: 1001\n"
            for p in pins
        ]
        return head + "\n".join(stanzas)

    def upgrade_guard_text(self, patterns: tuple[str, ...]) -> str:
        entries = "".join(f'    "{p.rstrip("*")}";\n' for p in patterns)
        return (
            "// Managed by provision: keep unattended-upgrades away from the NVIDIA stack (FF-01).\n"
            f"Unattended-Upgrade::Package-Blacklist {{\n{entries}}};\n"
        )

    def repair_advice(self, broken: Sequence[Package], interrupted: bool) -> str:
        """The commands that finish this dpkg state, chosen from it (dpkg(1), apt-get(8)).

        An interrupted run (journal entries) or packages left unconfigured (``half-configured``,
        ``unpacked``, triggers pending) are finished by ``dpkg --configure -a``; apt itself refuses
        with "you must manually run 'dpkg --configure -a'", and ``apt-get --fix-broken install``
        does not help there. A package whose unpacking stopped (``half-installed``) or that dpkg
        flags reinstall-required is unpacked again by ``apt-get install --reinstall``. Should a
        maintainer script keep failing, dpkg's error names it: fix its cause or remove the package.
        """
        steps: list[str] = []
        unpack = [
            p.name for p in broken if p.state.split()[-1:] == ["half-installed"] or "reinstreq" in p.state
        ]
        configure = [p.name for p in broken if p.name not in unpack]
        if interrupted or configure:
            steps.append("`dpkg --configure -a`")
        if unpack:
            steps.append(f"`apt-get install --reinstall {' '.join(unpack)}`")
        advice = "run " + ", then ".join(steps)
        if configure:
            advice += (
                f"; if a maintainer script of {', '.join(configure)} fails again, dpkg's error names it: "
                "fix its cause, or remove that package with `dpkg --remove`"
            )
        return advice

    def lock_state(self, locks: PackageLocks | Unknown) -> LockState | Unknown:
        if isinstance(locks, Unknown):
            return locks
        # The detection reads the one legacy file there is (probes.LEGACY_PREFERENCES_FILE).
        legacy = self.files.legacy_pins if locks.legacy_pins is not None else ()
        return LockState(pins=locks.pins, upgrade_guard=locks.upgrade_guard, legacy_pins=legacy)

    def packaged_kernels(self, packages: tuple[Package, ...] | Unknown) -> tuple[str, ...]:
        if isinstance(packages, Unknown):
            return ()
        found = (_IMAGE.match(p.name) for p in packages if p.installed)
        return tuple(sorted({m[1] for m in found if m}))

    def kernel_build_packages(
        self, packages: tuple[Package, ...] | Unknown, kernels: tuple[str, ...]
    ) -> tuple[str, ...]:
        metas = tuple(headers for image, headers in _HEADER_METAS.items() if installed(packages, image))
        return (*(f"linux-headers-{k}" for k in kernels), *metas)


APT = Apt()


_SCRIPT_FAILED = re.compile(
    r"^dpkg: error processing package (?P<pkg>[^\s:]+)(?::\S+)? \((?P<op>--[a-z]+)\):\n\s*"
    r"(?:installed \S+ package |new \S+ package |)(?P<script>(?:post|pre)-(?:installation|removal)) script "
    r"subprocess returned error exit status (?P<status>\d+)",
    re.M,
)
_UNMET = re.compile(r"^The following packages have unmet dependencies:\n((?:^ .*\n?)+)", re.M)
_MAX_CAUSE = 800


def failure_cause(output: str) -> str | None:
    """The cause of a failed apt/dpkg run, from its combined messages, stdout and stderr; None when
    the text holds no apt or dpkg error.

    In order: a maintainer script that failed (the package named, with dpkg's exit status), the
    unmet dependencies apt printed (which package needs which version), then apt's ``E:`` lines.
    Never the first stderr line alone, which is often ``debconf: delaying package configuration``.
    Sources: apt-get(8), dpkg(1) (maintainer scripts and ``--configure -a``), issue 13.
    """
    causes: list[str] = []
    for failed in _SCRIPT_FAILED.finditer(output):
        cause = (
            f"the {failed['script']} script of {failed['pkg']} failed (exit status {failed['status']}); "
            f"fix what it needs, then run `dpkg --configure -a`"
        )
        if cause not in causes:
            causes.append(cause)
    for block in _UNMET.finditer(output):
        causes.append(
            "unmet dependencies: " + "; ".join(" ".join(line.split()) for line in block[1].splitlines())
        )
    errors = [line.strip() for line in output.splitlines() if line.startswith("E: ")]
    causes.extend(dict.fromkeys(errors))
    if not causes:
        return None
    text = "; ".join(causes)
    return text if len(text) <= _MAX_CAUSE else text[: _MAX_CAUSE - 3] + "..."
