"""apt and dpkg: Debian and Ubuntu (the one :class:`~provision.pkg.base.PackageManager` today).

Sources: dpkg version ordering and syntax, delegated to python-debian; apt_preferences(5) for
the pins (priority 1001 lets apt downgrade to the pinned version); deb822 sources with
``Signed-By`` (sources.list(5)); unattended-upgrades' ``Package-Blacklist`` entries are regular
expression prefixes (pando85/homelab PR #4110, field failure FF-01).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from debian.debian_support import Version as DebVersion

from provision.detect.facts import Facts, Unknown
from provision.pkg.base import LockState, ManagedFiles, Pin, installed
from provision.versions import DottedVersion

FILES = ManagedFiles(
    keyring="/usr/share/keyrings/provision-nvidia-cuda.gpg",
    sources="/etc/apt/sources.list.d/provision-nvidia-cuda.sources",
    pins="/etc/apt/preferences.d/provision-nvidia",
    upgrade_guard="/etc/apt/apt.conf.d/51provision-nvidia-unattended",
)
_IMAGE = re.compile(r"^linux-image-(\d\S*)$")
_HEADER_METAS = {
    "linux-image-generic": "linux-headers-generic",
    "linux-image-amd64": "linux-headers-amd64",
    "linux-image-cloud-amd64": "linux-headers-cloud-amd64",
    "linux-image-arm64": "linux-headers-arm64",
}


class Apt:
    """apt/dpkg behind the package-manager interface."""

    family = "Debian"
    files = FILES
    repair_command = "apt-get --fix-broken install"

    def upstream(self, version: str) -> str:
        return DebVersion(version).upstream_version or version

    def compare(self, a: str, b: str) -> int:
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

    def lock_state(self, facts: Facts) -> LockState | Unknown:
        locks = facts.apt_locks
        if isinstance(locks, Unknown):
            return locks
        return LockState(pins=locks.preferences, upgrade_guard=locks.unattended_guard)

    def packaged_kernels(self, facts: Facts) -> tuple[str, ...]:
        if isinstance(facts.packages, Unknown):
            return ()
        found = (_IMAGE.match(p.name) for p in facts.packages if p.installed)
        return tuple(sorted({m[1] for m in found if m}))

    def kernel_build_packages(self, facts: Facts, kernels: tuple[str, ...]) -> tuple[str, ...]:
        metas = tuple(headers for image, headers in _HEADER_METAS.items() if installed(facts, image))
        return (*(f"linux-headers-{k}" for k in kernels), *metas)


APT = Apt()
