"""Debian and Ubuntu detection: installed packages of the NVIDIA stack (dpkg), where they came from
(apt), and provision's apt locks, each parsed into the OS-neutral :mod:`provision.os.models`.

Only names matching a pattern that some component declares are recorded (each component's
``provision/catalog/data/components/<name>.yaml``), so a name the plan installs is always seen again.

Sources: dpkg-query(1) (``${Status}`` is want/error/state), apt-cache(8) ``policy``,
apt_preferences(5).
"""

from __future__ import annotations

import base64
import functools
import re

from provision.openpgp import KeyringError, keyring_fingerprints
from provision.os.base import FamilyProbe
from provision.os.debian.dpkg import package_state
from provision.os.models import Package, PackageLocks, PackageOrigins
from provision.unknown import Unknown, failure

UNATTENDED_FILE = "/etc/apt/apt.conf.d/51provision-nvidia-unattended"
PREFERENCES_FILE = "/etc/apt/preferences.d/00-provision-nvidia"
LEGACY_PREFERENCES_FILE = "/etc/apt/preferences.d/provision-nvidia"
"""Where provision wrote its pins before they moved ahead of NVIDIA's nvidia-driver-pinning-<branch>
file (apt_preferences(5): preferences.d is read in alphanumeric order, the first matching pin wins)."""
KEYRING_FILE = "/usr/share/keyrings/provision-nvidia-cuda.gpg"
MAX_KEYRING_BYTES = 65536
"""Most of the keyring read (NVIDIA's key is under 2 KiB); a longer file is read cut, its tail unparsed."""
DPKG_FORMAT = r"${Package}\t${Version}\t${Status}\n"
"""dpkg-query format; dpkg expands the ``\\t``/``\\n`` escapes itself."""


@functools.cache
def _recorded() -> re.Pattern[str]:
    # Imported here: the catalog is read only when package output is parsed.
    from provision.catalog import package_name_patterns

    return re.compile("|".join(f"(?:{p})" for p in package_name_patterns("deb")))


@functools.lru_cache(maxsize=8192)
def recorded(name: str) -> bool:
    """True when detection records the package ``name`` (it matches a detected pattern).

    Cached by name: a fleet's hosts list mostly the same few hundred packages.
    """
    return _recorded().search(name) is not None


def parse_dpkg(output: str, rc: int) -> tuple[Package, ...] | Unknown:
    """``dpkg-query -W -f='${Package}\\t${Version}\\t${Status}\\n'`` -> NVIDIA-stack packages, and
    every package dpkg has not finished whatever its name (a broken package anywhere stops apt's
    next transaction, so the plan must see it: issue 13).

    Keeps half-installed states (``install ok half-configured``, dpkg's ``iF``) and
    drops ``not-installed`` entries, which dpkg lists for packages it merely knows.
    """
    if (bad := failure("dpkg-query", output, rc)) is not None:
        return bad
    packages = []
    for line in output.splitlines():
        fields = line.split("\t")
        if len(fields) != 3 or len(fields[2].split()) != 3:
            continue
        found = Package(name=fields[0], version=fields[1], **package_state(fields[2]))
        if (recorded(found.name) and not fields[2].endswith("not-installed")) or found.unfinished:
            packages.append(found)
    return tuple(packages)


def parse_apt_locks(output: str, rc: int) -> PackageLocks | Unknown:
    """Sections ``=== FILE`` of the apt-locks probe, and the unattended-upgrades package state."""
    if rc not in (0, 1) or "=== unattended-upgrades" not in output:
        return Unknown(unknown=f"apt configuration unreadable (exit {rc})")
    sections = dict(re.findall(r"^=== (\S+)\n(.*?)(?=^=== )", output, re.M | re.S))
    status = re.search(r"^=== unattended-upgrades (\S*)", output, re.M)
    return PackageLocks(
        pins=sections.get(PREFERENCES_FILE),
        legacy_pins=sections.get(LEGACY_PREFERENCES_FILE),
        upgrade_guard=sections.get(UNATTENDED_FILE),
        upgrade_service_installed=bool(status and status[1].endswith("i")),
        keyring_fingerprints=_fingerprints(sections.get(KEYRING_FILE)),
        unfinished_transactions=int(journal[1])
        if (journal := re.search(r"^=== dpkg-journal (\d+)$", output, re.M))
        else None,
        reboot_required=_reboot_packages(sections.get("reboot-required")),
    )


def _reboot_packages(section: str | None) -> tuple[str, ...] | None:
    """The ``reboot-required`` section (``absent``, or the flag's package list) -> package names."""
    if section is None or section.strip() == "absent":
        return None
    return tuple(dict.fromkeys(line.strip() for line in section.splitlines() if line.strip()))


def _fingerprints(section: str | None) -> tuple[str, ...] | None:
    """The keyring section (base64 of the file, or ``absent``) -> its keys' fingerprints."""
    if section is None:
        return None
    try:
        return keyring_fingerprints(base64.b64decode("".join(section.split()), validate=True))
    except (ValueError, KeyringError):  # "absent", or not a keyring: no key the spec could match
        return ()


def parse_origins(output: str, rc: int) -> PackageOrigins | Unknown:
    """``apt-cache policy`` blocks: the repository host of each package's installed (``***``) version."""
    if (bad := failure("apt-cache", output, rc)) is not None:
        return bad
    origins: dict[str, str] = {}
    for block in re.split(r"^(?=\S+:$)", output, flags=re.M):
        name, installed = _policy_block(block)
        if name and installed is not None:
            origins[name] = installed
    return PackageOrigins(origins=origins)


def _policy_block(block: str) -> tuple[str | None, str | None]:
    """(package, origin host of the installed version) of one ``apt-cache policy`` block."""
    head = re.match(r"^(\S+):$", block, re.M)
    star = re.search(r"^ \*\*\* \S+ \d+\n((?:^ {8}.*\n?)*)", block, re.M)
    if head is None or star is None:
        return (head[1] if head else None), None
    hosts = re.findall(r"^\s+-?\d+\s+\w+://([^/\s]+)", star[1], re.M)
    return head[1], hosts[0] if hosts else "local"


INITRAMFS_LISTER = (
    "lsinitramfs",
    "lsinitramfs \"$img\" 2>/dev/null | grep -E '(^|/)etc/modprobe.d/[^/]+[.]conf$' | sed 's/^/contains /'",
)
"""Debian's initramfs lister (initramfs-tools' lsinitramfs(8), one path a line) and the shell that
lists the image ``$img``'s ``etc/modprobe.d`` files, each printed as ``contains PATH``."""


PACKAGES = FamilyProbe(
    id="dpkg-nvidia",
    argv=("dpkg-query", "-W", f"-f={DPKG_FORMAT}"),
    timeout=30.0,
    parse=parse_dpkg,
    doc="Installed packages whose names detection records: ``dpkg-query -W``.",
)

_APT_LOCKS_SCRIPT = (
    f"for f in {PREFERENCES_FILE} {LEGACY_PREFERENCES_FILE} {UNATTENDED_FILE}; do "
    'if [ -f "$f" ]; then echo "=== $f"; cat "$f"; fi; done; '
    # dpkg names its journal entries by number (0000, 0001, ...); tmp.i is its scratch file.
    "echo \"=== dpkg-journal $(ls -A /var/lib/dpkg/updates 2>/dev/null | grep -c '^[0-9]*$')\"; "
    # /run/reboot-required: the flag package scripts leave for a reboot (update-notifier's convention).
    "echo '=== reboot-required'; if [ -e /run/reboot-required ]; then "
    "head -c 4096 /run/reboot-required.pkgs 2>/dev/null; echo; else echo absent; fi; "
    f"echo '=== {KEYRING_FILE}'; "
    f"if [ -f {KEYRING_FILE} ]; then head -c {MAX_KEYRING_BYTES} {KEYRING_FILE} | base64; "
    "else echo absent; fi; "
    'echo "=== unattended-upgrades '
    "$(dpkg-query -W -f='${db:Status-Abbrev}' unattended-upgrades 2>/dev/null)\""
)

LOCKS = FamilyProbe(
    id="apt-locks",
    argv=("sh", "-c", _APT_LOCKS_SCRIPT),
    timeout=5.0,
    parse=parse_apt_locks,
    doc="provision's apt pins, unattended-upgrades guard and repository keyring, whether "
    "unattended-upgrades is installed, and whether a dpkg run was interrupted.",
)

# The driver's packages, by name pattern, and where apt says their installed version comes from.
_ORIGINS_SCRIPT = (
    "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' 'nvidia-*' 'libnvidia-*' 'cuda-drivers*' "
    "2>/dev/null | awk '$2 ~ /^.i/ {print $1}' | xargs -r apt-cache policy"
)

ORIGINS = FamilyProbe(
    id="apt-origins",
    argv=("sh", "-c", _ORIGINS_SCRIPT),
    timeout=20.0,
    requires="apt-cache",
    parse=parse_origins,
    doc="The repository each installed driver package's version comes from: ``apt-cache policy``.",
)
