"""dnf and rpm: Rocky Linux and Red Hat Enterprise Linux 9 and 10 behind
:class:`~provision.os.base.PackageManager`.

Versions are RPM EVRs (``3:580.95.05-1.el9``; NVIDIA's driver packages carry epoch 3), ordered as
rpm orders them (:func:`.parse.evr_compare`, checked against real rpm). The spec's versions are held
with versionlock entries in one block of the lock list (``/etc/dnf/plugins/versionlock.list``), the
installed stack with ``dnf versionlock add`` as one unit; on 8/9 the driver branch and flavour are
also the ``nvidia-driver`` module stream (:func:`module_stream`). dnf-automatic loads dnf's plugins,
so the same list keeps it away from the stack; provision's guard keeps the plugin enabled.

Sources: NVIDIA Driver Installation Guide, "Kernel Modules" and "Version locking"
(https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html,
https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/version-locking.html);
CUDA Installation Guide for Linux, RHEL section (``kernel-devel-$(uname -r)``, EPEL for DKMS),
https://docs.nvidia.com/cuda/cuda-installation-guide-linux/ ; dnf(8), dnf-versionlock(8),
dnf-automatic(8), dracut(8).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from provision.os.base import FamilyProbes, LockState, ManagedFiles, Pin
from provision.os.models import Package, PackageLocks
from provision.os.redhat import CREDENTIALS_NOTE, probes
from provision.os.redhat.parse import evr_compare, failure_cause, split_evr
from provision.os.redhat.releases import release
from provision.unknown import Unknown
from provision.versions import DottedVersion

FILES = ManagedFiles(
    keyring=probes.KEYRING_FILE,
    sources=probes.REPO_FILE,
    pins=probes.LOCKLIST_FILE,
    upgrade_guard=probes.VERSIONLOCK_CONF,
)
_REQUEST = re.compile(r"^(?P<name>.+?)-(?P<version>(\d+:)?\d+\.[^-]*(-[^-]*)?)$")
"""``name-version`` (``cuda-toolkit-13-0-13.0.2*``, ``nvidia-driver-3:580.95.05-*``): the version is
the first ``-``-separated tail that starts with digits and a dot."""
KERNEL = "kernel-core"
"""The package holding the kernel image on EL 9 and 10 (``kernel`` is its meta-package)."""
EPEL = "epel"
"""Extra Packages for Enterprise Linux, enabled by installing ``epel-release`` (Rocky Linux
documentation, Admin guide, "The EPEL repository")."""
ADD_ON_REPOSITORIES: dict[str, tuple[str, ...]] = {"dkms": (EPEL,), "monitoring": (EPEL,)}
"""By component, the repositories its packages come from beyond the OS's own and NVIDIA's: DKMS
(CUDA Installation Guide, RHEL: "enable EPEL") and the node exporter ``node-exporter`` (Fedora
Packages: built for EPEL 9 and 10, https://packages.fedoraproject.org/pkgs/node-exporter/node-exporter/)."""


def module_stream(branch: int, flavor: str) -> str:
    """The ``nvidia-driver`` module stream of a branch and flavour on EL 8/9: ``580-open`` for the
    open kernel modules, ``580-dkms`` for the proprietary ones (Driver Installation Guide, Table 5)."""
    return f"{branch}-open" if flavor == "open" else f"{branch}-dkms"


class Dnf:
    """dnf/rpm behind the package-manager interface."""

    family = "RedHat"
    package_format = "rpm"
    files = FILES
    repair_command = "dnf remove --duplicates"
    interrupted_note = "an interrupted rpm transaction (packages installed at two versions)"
    state_source = "dnf(8) Check and Remove commands (https://dnf.readthedocs.io/en/latest/command_ref.html)"
    reboot_flag = "needs-restarting -r reports that a reboot is needed"
    source_note = "gpgcheck against a key with a pinned fingerprint (dnf.conf(5))"
    index_source = "dnf list --showduplicates on the host (the repository's package index)"
    command_prefixes: tuple[str, ...] = ("'/usr/bin/dnf", '"/usr/bin/dnf', "/usr/bin/dnf")
    credentials_note = CREDENTIALS_NOTE
    """dnf.conf(5) repository options ``username``/``password``."""
    lock_noun = "dnf versionlock entries"
    guard_noun = "versionlock plugin guard"
    probes = FamilyProbes(packages=probes.PACKAGES, locks=probes.LOCKS, origins=probes.ORIGINS)
    initramfs_command = "dracut --regenerate-all --force"
    """dracut(8): rebuild the initramfs of every installed kernel."""

    def install_command(self, names: Sequence[str]) -> str:
        return f"dnf install {' '.join(names)}"

    def remove_command(self, names: Sequence[str]) -> str:
        return f"dnf remove {' '.join(names)}"

    def reinstall_command(self, names: Sequence[str]) -> str:
        return f"dnf reinstall {' '.join(names)}"

    def add_on_repositories(self, component: str) -> tuple[str, ...]:
        return ADD_ON_REPOSITORIES.get(component, ())

    def repository_package(self, repository: str) -> str:
        """``epel-release``: the release package that writes the repository's ``.repo`` file and key."""
        return f"{repository}-release"

    def satisfied(self, packages: tuple[Package, ...] | Unknown, request: str) -> bool:
        """A name, or ``name-version-release`` (``kernel-devel-5.14.0-503.14.1.el9_5``: rpm installs
        one kernel-devel per kernel under one name), against the installed packages' EVRs."""
        if isinstance(packages, Unknown):
            return False
        return any(
            p.installed
            and request in (p.name, f"{p.name}-{p.version}", f"{p.name}-{self.upstream(p.version)}")
            for p in packages
        )

    def compiler_packages(self, major: str, cxx: bool) -> tuple[str, ...]:
        """``gcc`` (and ``gcc-c++``): the release's one system compiler, which builds its kernels."""
        return ("gcc", *(("gcc-c++",) if cxx else ()))

    def driver_stream(self, os_version: str, branch: int, flavor: str) -> str | None:
        """``nvidia-driver:<branch>-open`` (or ``-dkms``) on a release with modules (EL 8/9), else None."""
        found = release(os_version)
        return f"nvidia-driver:{module_stream(branch, flavor)}" if found and found.modules else None

    def failure_cause(self, output: str) -> str | None:
        return failure_cause(output)

    def upstream(self, version: str) -> str:
        """The version part of an EVR (``3:580.95.05-1.el9`` -> ``580.95.05``); ValueError when empty."""
        evr = split_evr(version)
        if not evr.version or not version.strip():
            raise ValueError(f"Invalid version string {version!r}")
        return evr.version

    def compare(self, a: str, b: str) -> int:
        return evr_compare(a, b)

    def version_glob(self, target: DottedVersion, suffix: str = "", full_parts: int = 3) -> str:
        """``580.95.05-*`` for a full version (any release), ``9.14.*`` for a prefix: dnf's and
        versionlock's glob patterns over ``version-release``."""
        full = len(target.parts) >= full_parts
        return f"{target}-*{suffix}" if full else f"{target}.*{suffix}"

    def request(self, name: str, version: str | None = None) -> str:
        return f"{name}-{version}" if version else name

    def request_name(self, request: str) -> str:
        found = _REQUEST.match(request)
        return found["name"] if found else request

    def pins_text(self, pins: Sequence[Pin]) -> str:
        """provision's block of the versionlock list: one entry per package glob and pin, each
        ``<name glob>-<version glob>`` (no epoch: an entry without one matches any, dnf's subject
        rules), so dnf installs and upgrades only those versions."""
        head = "# Managed by provision: NVIDIA package families locked to the spec's versions.\n"
        lines = [
            f"# {p.why}\n" + "".join(f"{name}-{p.version}\n" for name in p.packages.split()) for p in pins
        ]
        return head + "".join(lines)

    def upgrade_guard_text(self, patterns: tuple[str, ...]) -> str:
        """The versionlock plugin's configuration, enabled with its lock list: dnf-automatic loads
        dnf's plugins, so the list that holds the stack (``patterns``) binds it too (FF-01)."""
        held = " ".join(patterns)
        return (
            "# Managed by provision: dnf and dnf-automatic load this plugin, whose lock list holds the\n"
            f"# NVIDIA stack ({held}) (FF-01).\n"
            f"[main]\nenabled = 1\nlocklist = {FILES.pins}\n"
        )

    def repair_advice(self, broken: Sequence[Package], interrupted: bool) -> str:
        """rpm has no half-configured state: an interrupted transaction leaves a package installed
        at two versions, which ``dnf remove --duplicates`` resolves (dnf(8)); a scriptlet that
        failed is named by dnf's own error, to fix before running it again."""
        names = ", ".join(p.name for p in broken)
        advice = "run `dnf check --duplicates`, then `dnf remove --duplicates`"
        return advice + (f" (installed twice: {names})" if names else "")

    def lock_state(self, locks: PackageLocks | Unknown) -> LockState | Unknown:
        if isinstance(locks, Unknown):
            return locks
        return LockState(pins=locks.pins, upgrade_guard=locks.upgrade_guard)

    def packaged_kernels(self, packages: tuple[Package, ...] | Unknown) -> tuple[str, ...]:
        """``kernel-core`` packages as ``uname -r`` names them: ``5.14.0-503.14.1.el9_5.x86_64``."""
        if isinstance(packages, Unknown):
            return ()
        found = {f"{p.version}.{p.arch}" if p.arch else p.version for p in packages if p.name == KERNEL}
        return tuple(sorted(found))

    def kernel_build_packages(
        self, packages: tuple[Package, ...] | Unknown, kernels: tuple[str, ...]
    ) -> tuple[str, ...]:
        """``kernel-devel`` matching every installed kernel (``kernel-devel-5.14.0-503.14.1.el9_5``,
        dnf's ``name-version-release``), then ``kernel-devel`` itself, which follows kernel updates."""
        tails = [re.sub(r"\.(x86_64|aarch64)$", "", k) for k in kernels]
        return (*(f"kernel-devel-{t}" for t in tails), "kernel-devel")


DNF = Dnf()


def repo_code(version: str) -> str | None:
    """NVIDIA's repository code for a RHEL-family ``version`` (``9.5`` -> ``rhel9``), None when the
    release is not supported."""
    found = release(version)
    return found.repo_code if found else None
