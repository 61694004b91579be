"""RHEL-family detection: installed packages (``rpm -qa``) with their versionlock state, provision's
locks (its block of the versionlock list, the versionlock plugin's configuration, the repository key,
the enabled ``nvidia-driver`` module stream) and where the driver packages come from, each parsed into
the OS-neutral :mod:`provision.os.models` through the pure parsers of :mod:`.parse`.

Sources: rpm(8) ``--queryformat``; dnf(8) "Module Command"; dnf-versionlock(8)
(https://dnf-plugins-core.readthedocs.io/en/latest/versionlock.html); dnf-automatic(8) (it loads dnf's
plugins, so the versionlock list binds it too); needs-restarting(1) (dnf-utils: ``-r`` exits 1 when a
reboot is needed).
"""

from __future__ import annotations

import base64
import fnmatch
import functools
import re

from provision.openpgp import KeyringError, keyring_fingerprints
from provision.os.base import FamilyProbe
from provision.os.models import Package, PackageLocks, PackageOrigins
from provision.os.redhat.parse import (
    RPM_QA_QUERYFORMAT,
    duplicates,
    parse_module_list,
    parse_repo_files,
    parse_rpm_qa,
    parse_versionlock_list,
)
from provision.unknown import Unknown, failure

LOCKLIST_FILE = "/etc/dnf/plugins/versionlock.list"
"""The versionlock plugin's lock list (its ``locklist`` setting); provision's entries are one block."""
VERSIONLOCK_CONF = "/etc/dnf/plugins/versionlock.conf"
"""The versionlock plugin's configuration: provision's upgrade guard keeps it enabled."""
KEYRING_FILE = "/etc/pki/rpm-gpg/RPM-GPG-KEY-provision-nvidia-cuda"
REPO_FILE = "/etc/yum.repos.d/provision-nvidia-cuda.repo"
MAX_KEYRING_BYTES = 65536
BLOCK_BEGIN = "# BEGIN provision-nvidia pins"
BLOCK_END = "# END provision-nvidia pins"
"""The markers of provision's block in the lock list (the role writes it with ``blockinfile``)."""


@functools.cache
def _recorded() -> re.Pattern[str]:
    from provision.catalog import package_name_patterns  # the catalog only when output is parsed

    return re.compile("|".join(f"(?:{p})" for p in package_name_patterns("rpm")))


def _sections(output: str) -> dict[str, str]:
    return dict(re.findall(r"^=== (\S+)\n(.*?)(?=^=== |\Z)", output, re.M | re.S))


def parse_rpm(output: str, rc: int) -> tuple[Package, ...] | Unknown:
    """The ``rpm-nvidia`` probe (``rpm -qa --qf`` then the versionlock list) -> recorded packages.

    ``held``: an entry of the lock list matches the package's ``name-epoch:version-release.arch``;
    ``unfinished``: the name is installed at two versions of one arch (an interrupted rpm
    transaction; :func:`.parse.duplicates`), whatever its name.
    """
    if (bad := failure("rpm", output, rc)) is not None:
        return bad
    if "=== rpm-qa\n" not in output:
        return Unknown(unknown="rpm probe printed no package list")
    sections = _sections(output)
    try:
        rpms = parse_rpm_qa(sections.get("rpm-qa", ""))
    except ValueError as exc:  # a number rpm never prints (a non-ASCII digit): not a package list
        return Unknown(unknown=f"unreadable rpm -qa output ({exc})")
    locks = [e for e in parse_versionlock_list(sections.get("versionlock", "")) if not e.startswith("!")]
    twice = set(duplicates(rpms))
    found: list[Package] = []
    for p in rpms:
        unfinished = p.name in twice
        if not (_recorded().search(p.name) or unfinished):
            continue
        nevra = f"{p.name}-{p.epoch}:{p.version}-{p.release}.{p.arch}"
        held = any(fnmatch.fnmatchcase(nevra, e) or fnmatch.fnmatchcase(p.name, e) for e in locks)
        state = "installed twice (an interrupted transaction)" if unfinished else "installed"
        found.append(
            Package(name=p.name, version=p.evr, arch=p.arch, held=held, unfinished=unfinished, state=state)
        )
    return tuple(found)


def _block(locklist: str | None) -> str | None:
    """provision's block of the lock list (between its markers, markers excluded), None when absent."""
    if locklist is None:
        return None
    match = re.search(rf"^{re.escape(BLOCK_BEGIN)}\n(.*?)^{re.escape(BLOCK_END)}$", locklist, re.M | re.S)
    return match[1] if match else None


def parse_dnf_locks(output: str, rc: int) -> PackageLocks | Unknown:
    """Sections ``=== NAME`` of the dnf-locks probe -> provision's pins block, the versionlock
    plugin's configuration (the guard), dnf-automatic's package, the key, the enabled stream."""
    if rc not in (0, 1) or "=== dnf-automatic" not in output:
        return Unknown(unknown=f"dnf configuration unreadable (exit {rc})")
    sections = _sections(output)
    streams = parse_module_list(sections.get("modules", ""))
    enabled = tuple(f"{s.name}:{s.stream}" for s in streams if s.enabled and s.name == "nvidia-driver")
    reboot = sections.get("needs-restarting", "").strip()
    automatic = sections.get("dnf-automatic", "").strip()
    return PackageLocks(
        pins=_block(sections.get(LOCKLIST_FILE)),
        upgrade_guard=sections.get(VERSIONLOCK_CONF),
        upgrade_service_installed=bool(automatic) and not automatic.startswith("package "),
        keyring_fingerprints=_fingerprints(sections.get(KEYRING_FILE)),
        unfinished_transactions=None,
        reboot_required=() if reboot == "1" else None,
        streams=enabled if "=== modules" in output and streams else None,
    )


def _fingerprints(section: str | None) -> tuple[str, ...] | None:
    if section is None:
        return None
    try:
        return keyring_fingerprints(_dearmor(base64.b64decode("".join(section.split()), validate=True)))
    except (ValueError, KeyringError):
        return ()


def _dearmor(data: bytes) -> bytes:
    """An ASCII-armored key file (``-----BEGIN PGP PUBLIC KEY BLOCK-----``, as rpm keeps them) as
    its binary packets; binary input unchanged."""
    text = data.decode("ascii", "replace")
    if "-----BEGIN PGP PUBLIC KEY BLOCK-----" not in text:
        return data
    body = text.split("-----BEGIN PGP PUBLIC KEY BLOCK-----", 1)[1].split("-----END", 1)[0]
    lines = [ln.strip() for ln in body.strip().splitlines()]
    blank = lines.index("") if "" in lines else -1
    payload = [ln for ln in lines[blank + 1 :] if ln and not ln.startswith("=")]
    return base64.b64decode("".join(payload))


DRIVER_GLOBS = ("nvidia-*", "kmod-nvidia*", "libnvidia-*", "cuda-drivers*")
"""The driver's package names the origins probe asks dnf about."""
REPO_DIRS = ("/etc/yum.repos.d", "/etc/distro.repos.d")
"""dnf's default ``reposdir`` (dnf.conf(5); ``/etc/yum/repos.d`` links to the first on EL 9)."""
MAX_REPO_BYTES = 65536
"""Bytes read of one ``.repo`` file at most."""
LOCAL_REPOS = frozenset({"", "(none)", "None", "System", "@System", "commandline", "@commandline"})
"""``from_repo`` values that name no repository: an rpm installed outside dnf or of unknown origin
(``@System``) or a local file (``@commandline``): only the rpm database knows the package."""


def parse_origins(output: str, rc: int) -> PackageOrigins | Unknown:
    """The dnf-origins probe -> each installed driver package's origin: the host of the repository
    dnf installed it from (dnf's history: ``repoquery --installed --qf '%{name} %{from_repo}'``),
    read from that repository's ``baseurl``/``metalink``/``mirrorlist`` in the ``.repo`` files
    (:func:`.parse.parse_repo_files`), so a mirror or a stand-in reports its own host, not
    NVIDIA's. ``local``: no repository (an rpm installed by hand, ``@System``, ``@commandline``) or
    a ``file://`` repository. A package whose repository id has no readable definition (the
    ``.repo`` file removed, a variable in the host) is left out: its origin is not known, and an
    unknown origin is never reported as another origin than the spec's.

    Sections ``=== installed`` (one ``name repo-id`` line per package) and ``=== repos`` (the
    ``.repo`` files); a line whose name is not one of :data:`DRIVER_GLOBS` is not dnf's (a warning).
    Sources: dnf(8) "Repoquery Command" (``from_repo``: the repository a package was installed
    from), dnf.conf(5) "[repository] OPTIONS".
    """
    if (bad := failure("dnf", output, rc)) is not None:
        return bad
    if "=== installed\n" not in output:
        return Unknown(unknown="dnf origins probe printed no package list")
    sections = _sections(output)
    hosts = parse_repo_files(sections.get("repos", ""))
    origins: dict[str, str] = {}
    for line in sections.get("installed", "").splitlines():
        fields = line.split()
        if not 1 <= len(fields) <= 2 or not any(fnmatch.fnmatchcase(fields[0], g) for g in DRIVER_GLOBS):
            continue
        repo = fields[1] if len(fields) == 2 else ""
        origin = "local" if repo in LOCAL_REPOS else hosts.get(repo.removeprefix("@"))
        if origin is not None:
            origins[fields[0]] = origin
    return PackageOrigins(origins=origins)


INITRAMFS_LISTER = (
    "lsinitrd",
    "lsinitrd \"$img\" 2>/dev/null | grep -E '[ /]etc/modprobe[.]d/[^/ ]+[.]conf( -> .*)?$' "
    "| sed 's/^/listed /'",
)
"""The RHEL family's initramfs lister (dracut's lsinitrd(1)) and the shell that lists the image
``$img``'s ``etc/modprobe.d`` files: lsinitrd prints ``cpio --extract --verbose --list`` rows, ``ls -l``
style (``-rw-r--r--   1 root root   26 Nov 30 09:14 etc/modprobe.d/x.conf``, the path the 9th field;
https://github.com/dracutdevs/dracut/blob/master/lsinitrd.sh ``list_files``), each printed as
``listed ROW``; :func:`provision.detect.domains.driver.parse_initramfs` takes the path."""


PACKAGES = FamilyProbe(
    id="rpm-nvidia",
    argv=(
        "sh",
        "-c",
        f"echo '=== rpm-qa'; rpm -qa --qf '{RPM_QA_QUERYFORMAT}' || exit $?; echo '=== versionlock'; "
        f"cat {LOCKLIST_FILE} 2>/dev/null; exit 0",
    ),
    timeout=30.0,
    requires="rpm",
    parse=parse_rpm,
    doc="Installed packages whose names detection records, and the versionlock list: ``rpm -qa``.",
)

_LOCKS_SCRIPT = (
    f"for f in {LOCKLIST_FILE} {VERSIONLOCK_CONF}; do "
    'if [ -f "$f" ]; then echo "=== $f"; cat "$f"; fi; done; '
    f"echo '=== {KEYRING_FILE}'; "
    f"if [ -f {KEYRING_FILE} ]; then head -c {MAX_KEYRING_BYTES} {KEYRING_FILE} | base64; "
    "else echo absent; fi; "
    "echo '=== needs-restarting'; if command -v needs-restarting >/dev/null 2>&1; then "
    "needs-restarting -r >/dev/null 2>&1; echo $?; fi; "
    "echo '=== modules'; dnf -q -C module list nvidia-driver 2>/dev/null; "
    "echo '=== dnf-automatic'; rpm -q dnf-automatic 2>&1; exit 0"
)

LOCKS = FamilyProbe(
    id="dnf-locks",
    argv=("sh", "-c", _LOCKS_SCRIPT),
    timeout=20.0,
    requires="dnf",
    parse=parse_dnf_locks,
    doc="provision's versionlock block and plugin configuration, the repository key, the enabled "
    "nvidia-driver module stream, whether dnf-automatic is installed and a reboot is needed.",
)

_ORIGINS_SCRIPT = (
    "echo '=== installed'; "
    # --disablerepo: from_repo comes from dnf's history database; no repository is loaded.
    "dnf -q -C --disablerepo='*' repoquery --installed --qf '%{name} %{from_repo}' "
    + " ".join(f"'{g}'" for g in DRIVER_GLOBS)
    + " 2>&1 || exit $?; echo '=== repos'; "
    f"for f in {' '.join(f'{d}/*.repo' for d in REPO_DIRS)}; do "
    f'if [ -f "$f" ]; then head -c {MAX_REPO_BYTES} "$f"; echo; fi; done; exit 0'
)

ORIGINS = FamilyProbe(
    id="dnf-origins",
    argv=("sh", "-c", _ORIGINS_SCRIPT),
    timeout=30.0,
    requires="dnf",
    parse=parse_origins,
    doc="The repository host each installed driver package came from: dnf's ``from_repo`` and the "
    "repository's ``baseurl`` in ``/etc/yum.repos.d``.",
)
