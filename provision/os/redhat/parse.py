"""Pure parsers of rpm and dnf output, rpm's version order, and the causes of dnf failures.

Every function here takes text and returns values: none raises on any input, none runs a
command, and each caps what it reads (:data:`MAX_INPUT` characters, :data:`MAX_LINE` per line),
so parsing time stays linear and bounded. The output formats are those of rpm 4.16-4.18 and
dnf 4 (RHEL/Rocky 9 ship dnf 4.14 and rpm 4.16; RHEL/Rocky 10 dnf 4.20 and rpm 4.19); the test
fixtures in ``tests/fixtures/redhat/`` were captured from real dnf 4.14 and rpm 4.18.

Sources:
    rpm's version comparison: ``rpmvercmp()`` in rpm's ``rpmio/rpmvercmp.c`` and the EVR split
    of ``rpmverParse()``/``rpmverCmp()`` in ``lib/rpmver.c`` (https://github.com/rpm-software-management/rpm),
    documented in "RPM package versioning" (tilde and caret:
    https://rpm-software-management.github.io/rpm/manual/dependencies.html#versioning).
    Query tags: rpm(8) ``--queryformat`` and ``rpm --querytags`` (``EPOCHNUM`` is the epoch with
    a missing one as 0).
    dnf: dnf(8) "Module Command" (``module list`` hints ``[d]efault, [e]nabled, [x]disabled,
    [i]nstalled``; ``module switch-to``), dnf-plugins-core ``dnf-versionlock(8)``
    (https://dnf-plugins-core.readthedocs.io/en/latest/versionlock.html), and "Modularity"
    (https://dnf.readthedocs.io/en/latest/modularity.html: packages of a module not enabled are
    hidden, "filtered out by modular filtering").
    NVIDIA: Driver Installation Guide, RHEL section (``dnf module enable
    nvidia-driver:<branch>-open`` on 8/9, ``dnf versionlock`` on 10, repository key D42D0685),
    https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision.unknown import because

MAX_INPUT = 4_000_000
"""Characters of one output read at most (an ``rpm -qa`` of 5,000 packages is ~300 kB)."""
MAX_LINE = 4096
"""Characters of one line read at most."""
MAX_CAUSE = 800
"""Characters of one :func:`failure_cause` line at most."""

RPM_QA_QUERYFORMAT = r"%{EPOCHNUM}\t%{NAME}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\t%{INSTALLTIME}\n"
"""The ``rpm -qa --qf`` format the detect probe uses: one tab-separated line per installed
package, ``epoch name version release arch installtime`` (epoch 0 when the package has none;
installtime in seconds since 1970). rpm has no per-package half-installed state like dpkg's;
an interrupted transaction shows instead as two versions of one package (:func:`duplicates`)."""

INSTALLONLY = frozenset(
    {"kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra", "kernel-devel"}
    | {"kernel-devel-matched", "kernel-headers", "installonlypkg(kernel)", "gpg-pubkey"}
)
"""Packages of which several versions are installed by design (dnf.conf(5) ``installonlypkgs``
default, plus ``gpg-pubkey``: one per imported key)."""


def _lines(text: object) -> list[str]:
    if not isinstance(text, str):
        return []
    return [line[:MAX_LINE] for line in text[:MAX_INPUT].splitlines()]


# --- rpm version order -------------------------------------------------------------------


def _isalnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def rpmvercmp(a: str, b: str) -> int:
    """Compare two version (or release) strings as rpm does: -1, 0 or 1.

    The string is read as alternating numeric and alphabetic segments (ASCII only; every other
    character separates). Numeric segments compare as integers and beat alphabetic ones; ``~``
    sorts before everything, even the end of the string (``1.0~rc1 < 1.0``); ``^`` sorts after
    the end but before any further segment (``1.0 < 1.0^git1 < 1.0.1``). Inputs longer than
    :data:`MAX_LINE` are compared on their first :data:`MAX_LINE` characters.
    """
    one, two = str(a)[:MAX_LINE], str(b)[:MAX_LINE]
    if one == two:
        return 0
    i = j = 0
    while i < len(one) or j < len(two):
        while i < len(one) and not _isalnum(one[i]) and one[i] not in "~^":
            i += 1
        while j < len(two) and not _isalnum(two[j]) and two[j] not in "~^":
            j += 1
        c1, c2 = one[i : i + 1], two[j : j + 1]
        if c1 == "~" or c2 == "~":
            if c1 != "~":
                return 1
            if c2 != "~":
                return -1
            i, j = i + 1, j + 1
            continue
        if c1 == "^" or c2 == "^":
            if not c1:
                return -1
            if not c2:
                return 1
            if c1 != "^":
                return 1
            if c2 != "^":
                return -1
            i, j = i + 1, j + 1
            continue
        if not (c1 and c2):
            break
        isnum = c1.isdigit()
        test = str.isdigit if isnum else str.isalpha
        e1, e2 = i, j
        while e1 < len(one) and one[e1].isascii() and test(one[e1]):
            e1 += 1
        while e2 < len(two) and two[e2].isascii() and test(two[e2]):
            e2 += 1
        if e2 == j:
            return 1 if isnum else -1
        seg1, seg2 = one[i:e1], two[j:e2]
        if isnum:
            seg1, seg2 = seg1.lstrip("0"), seg2.lstrip("0")
            if len(seg1) != len(seg2):
                return 1 if len(seg1) > len(seg2) else -1
        if seg1 != seg2:
            return 1 if seg1 > seg2 else -1
        i, j = e1, e2
    if i >= len(one) and j >= len(two):
        return 0
    return 1 if i < len(one) else -1


@dataclass(frozen=True)
class Evr:
    """An rpm ``[epoch:]version[-release]`` split as ``rpmverParse()`` splits it.

    Attributes:
        epoch: The digits before ``:`` (``"0"`` when there are none).
        version: Between the epoch and the last ``-``.
        release: After the last ``-``; ``None`` when there is no ``-`` (then it compares lower
            than any release, as rpm's ``rpmverCmp`` does).
    """

    epoch: str
    version: str
    release: str | None


def split_evr(evr: str) -> Evr:
    """``"3:580.95.05-1.el9"`` -> ``Evr("3", "580.95.05", "1.el9")``; never raises."""
    text = str(evr)[:MAX_LINE]
    digits = len(text) - len(text.lstrip("0123456789"))
    epoch = "0"
    if text[digits : digits + 1] == ":":
        epoch, text = text[:digits] or "0", text[digits + 1 :]
    version, dash, release = text.rpartition("-")
    if not dash:
        return Evr(epoch, text, None)
    return Evr(epoch, version, release)


def evr_compare(a: str, b: str) -> int:
    """Compare two ``[epoch:]version[-release]`` strings as ``rpm.vercmp`` does: -1, 0 or 1.

    Epoch (missing = 0), then version, then release, each by :func:`rpmvercmp`; a missing
    release is lower than any present one (``1.0 < 1.0-1``). Example:
    ``evr_compare("3:580.82.07-1.el9", "580.95.05-1.el9") == 1`` (the epoch wins).
    """
    x, y = split_evr(a), split_evr(b)
    for left, right in ((x.epoch, y.epoch), (x.version, y.version)):
        result = rpmvercmp(left, right)
        if result:
            return result
    if x.release is None or y.release is None:
        return (x.release is not None) - (y.release is not None)
    return rpmvercmp(x.release, y.release)


# --- rpm -qa ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RpmPackage:
    """One installed package, from one :data:`RPM_QA_QUERYFORMAT` line.

    Attributes:
        name: ``nvidia-driver``.
        epoch: ``3`` (0 when the package has none).
        version: ``580.95.05``.
        release: ``1.el9``.
        arch: ``x86_64``, ``noarch``, ``i686``, ``aarch64``.
        install_time: Seconds since 1970 (0 when not given).
    """

    name: str
    epoch: int
    version: str
    release: str
    arch: str
    install_time: int = 0

    @property
    def evr(self) -> str:
        """``3:580.95.05-1.el9``; the epoch is left out when it is 0 (``13.0.2-1``), as dnf prints."""
        prefix = f"{self.epoch}:" if self.epoch else ""
        return f"{prefix}{self.version}-{self.release}"

    @property
    def nevra(self) -> str:
        """``nvidia-driver-3:580.95.05-1.el9.x86_64``, the form dnf and versionlock print."""
        return f"{self.name}-{self.epoch}:{self.version}-{self.release}.{self.arch}"


_NAME = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9_.+()-]*$")
_FIELD = re.compile(r"^[A-Za-z0-9_.+~^]+$")


def _package(line: str) -> RpmPackage | None:
    fields = line.split("\t")
    if len(fields) not in (5, 6):
        return None
    epoch, name, version, release, arch = fields[:5]
    stamp = fields[5] if len(fields) == 6 else "0"
    if not (
        epoch.isdigit() and epoch.isascii() and len(epoch) <= 10 and stamp.isdigit() and len(stamp) <= 12
    ):
        return None
    if not (_NAME.match(name) and _FIELD.match(version) and _FIELD.match(release) and _FIELD.match(arch)):
        return None
    return RpmPackage(name, int(epoch), version, release, arch, int(stamp))


def parse_rpm_qa(text: str) -> tuple[RpmPackage, ...]:
    """Every well-formed line of ``rpm -qa --qf RPM_QA_QUERYFORMAT`` output, in input order.

    Lines of another shape (a warning such as ``warning: Generating 12 missing index(es)``, a
    truncated line) and ``gpg-pubkey`` entries (imported keys, arch ``(none)``, not packages)
    are left out. Five fields (without install time) are read too.
    """
    packages = (_package(line) for line in _lines(text))
    return tuple(p for p in packages if p is not None and p.name != "gpg-pubkey")


def duplicates(packages: tuple[RpmPackage, ...]) -> tuple[str, ...]:
    """Names installed at more than one version of one arch, outside :data:`INSTALLONLY`.

    This is how an interrupted rpm transaction shows (the new version was added, the old one
    not yet erased); ``dnf check --duplicates`` lists them and ``dnf remove --duplicates``
    repairs (dnf(8) "Check Command", "Remove Command").
    """
    seen: dict[tuple[str, str], set[str]] = {}
    for p in packages:
        if p.name not in INSTALLONLY:
            seen.setdefault((p.name, p.arch), set()).add(p.evr)
    return tuple(sorted({name for (name, _), evrs in seen.items() if len(evrs) > 1}))


# --- dnf module list ----------------------------------------------------------------------


@dataclass(frozen=True)
class ModuleStream:
    """One row of ``dnf module list``.

    Attributes:
        name: Module name, ``nvidia-driver``.
        stream: Stream name, ``580-open``.
        profiles: Every profile, ``("default", "fm", "ks")``.
        default_profiles: Profiles marked ``[d]``.
        installed_profiles: Profiles marked ``[i]``.
        default: The stream is the module's default (``[d]`` after the stream).
        enabled: ``[e]`` after the stream.
        disabled: ``[x]`` after the stream (the whole module is disabled).
        repo: The repository section the row was listed under (``""`` when none was seen).
        summary: The Summary column.
    """

    name: str
    stream: str
    profiles: tuple[str, ...]
    default_profiles: tuple[str, ...]
    installed_profiles: tuple[str, ...]
    default: bool
    enabled: bool
    disabled: bool
    repo: str
    summary: str

    @property
    def installed(self) -> bool:
        """Some profile of the stream is installed (``[i]``)."""
        return bool(self.installed_profiles)


_FLAGS = re.compile(r"^(?:\[[dexi]\])+,?$")
_TOKEN = re.compile(r"^[A-Za-z0-9_.+-]+$")
_HEADER = ("Name", "Stream", "Profiles", "Summary")


def _flags(tokens: list[str], k: int) -> tuple[set[str], int, bool]:
    """The ``[x]`` flags from ``tokens[k:]``, the index after them, and whether a comma ended them."""
    found: set[str] = set()
    comma = False
    while k < len(tokens) and _FLAGS.match(tokens[k]):
        comma = tokens[k].endswith(",")
        found |= set(re.findall(r"\[([dexi])\]", tokens[k]))
        k += 1
        if comma:
            break
    return found, k, comma


def _module_row(line: str, repo: str) -> ModuleStream | None:
    tokens = line.split()
    if len(tokens) < 3 or not (_TOKEN.match(tokens[0]) and _TOKEN.match(tokens[1])):
        return None
    stream_tokens = tokens[1]
    flags, k, _ = _flags(tokens, 2)
    for glued in re.findall(r"\[([dexi])\]", stream_tokens):
        flags.add(glued)
    stream = re.sub(r"(\[[dexi]\])+$", "", stream_tokens)
    profiles: list[str] = []
    defaults: list[str] = []
    installed: list[str] = []
    while k < len(tokens):
        token = tokens[k]
        bare = token.rstrip(",")
        head = re.sub(r"(\[[dexi]\])+$", "", bare)
        if not _TOKEN.match(head):
            break
        marks = set(re.findall(r"\[([dexi])\]", bare))
        more, k, comma = _flags(tokens, k + 1)
        marks |= more
        profiles.append(head)
        defaults += [head] if "d" in marks else []
        installed += [head] if "i" in marks else []
        if not (token.endswith(",") or comma):
            break
    return ModuleStream(
        name=tokens[0],
        stream=stream,
        profiles=tuple(profiles),
        default_profiles=tuple(defaults),
        installed_profiles=tuple(installed),
        default="d" in flags,
        enabled="e" in flags,
        disabled="x" in flags,
        repo=repo,
        summary=" ".join(tokens[k:]),
    )


def parse_module_list(text: str) -> tuple[ModuleStream, ...]:
    """Every stream row of ``dnf module list [name]`` output, repository by repository.

    The output is one table per repository: the repository's section name on its own line,
    the header ``Name Stream Profiles Summary``, one row per stream, a blank line; at the end
    ``Hint: [d]efault, [e]nabled, [x]disabled, [i]nstalled``. Lines outside a table (metadata
    progress, ``Last metadata expiration check``, ``Modular dependency problem`` blocks) are
    skipped. Flags may be glued (``latest-dkms [d][e]``) or spaced (``default [d] [i]``).
    A stream listed by two repositories gives two rows. A stream with no profile at all cannot
    be told from its summary and reads its summary's first word as a profile.
    """
    rows: list[ModuleStream] = []
    lines = _lines(text)
    repo, in_table, previous = "", False, ""
    for line in lines:
        if tuple(line.split()) == _HEADER:
            repo, in_table = previous.strip(), True
            continue
        if not line.strip() or line.startswith("Hint:"):
            in_table = False
        elif in_table:
            row = _module_row(line, repo)
            if row is not None:
                rows.append(row)
        previous = line
    return tuple(rows)


# --- dnf versionlock list -----------------------------------------------------------------

_LOCK = re.compile(r"^!?[A-Za-z0-9_+*?\[\]][A-Za-z0-9_.+*?:~^\[\]()-]*$")


def parse_versionlock_list(text: str) -> tuple[str, ...]:
    """The entries of ``dnf versionlock list`` (or of the lock list file itself), in order.

    An entry is one NEVRA pattern (``nvidia-driver-3:580.82.07-1.el10.*``); a leading ``!``
    marks an exclude entry (``dnf versionlock exclude``). Skipped: ``Last metadata expiration
    check`` and repository progress lines, ``#`` comments (the file's ``# Added lock on ...``),
    blank lines, and anything else that is not one pattern. Duplicates are kept once.
    """
    entries: dict[str, None] = {}
    for line in _lines(text):
        item = line.strip()
        if item and not item.startswith("#") and " " not in item and _LOCK.match(item):
            entries[item] = None
    return tuple(entries)


_SECTION = re.compile(r"^\[([^\]\s]+)\]\s*$")
_URL_KEYS = ("baseurl", "metalink", "mirrorlist")
"""The keys of a ``.repo`` section that say where dnf fetches from, in the order dnf prefers them
(``baseurl`` first; ``metalink``/``mirrorlist`` name the server that lists the mirrors)."""


def parse_repo_files(text: str) -> dict[str, str]:
    """``.repo`` files (dnf.conf(5) "[repository] OPTIONS", concatenated) -> repository id -> the
    host (``host[:port]``, lower case) packages are fetched from, or ``local`` for a ``file://``
    repository.

    The host is that of the first URL of ``baseurl`` (several URLs, separated by spaces, commas or
    continuation lines, are mirrors of one repository), else of ``metalink``, else of
    ``mirrorlist``. Left out: a repository without those keys, with a URL that is not
    ``http(s)``/``ftp``/``file``, or whose host holds a dnf variable (``$releasever``): dnf
    substitutes those at run time, so the host is not known from the file. The first section of an
    id wins (dnf refuses a duplicated id). Never raises; ``#``/``;`` comments and lines outside a
    section are skipped.
    """
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    key: str | None = None
    for line in _lines(text):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        if head := _SECTION.match(stripped):
            current = sections.setdefault(head[1], {}) if head[1] not in sections else None
            key = None
        elif current is None:
            continue
        elif line[0] in " \t" and key is not None:  # a continuation line (an INI multi-line value)
            current[key] = f"{current[key]} {stripped}"
        elif "=" in stripped:
            name, _, value = stripped.partition("=")
            key = name.strip().lower()
            current.setdefault(key, value.strip())
        else:
            key = None
    hosts: dict[str, str] = {}
    for repo, options in sections.items():
        if repo != "main" and (host := _repo_host(options)) is not None:
            hosts[repo] = host
    return hosts


def _repo_host(options: dict[str, str]) -> str | None:
    for key in _URL_KEYS:
        urls = options.get(key, "").replace(",", " ").split()
        if urls:
            return _url_host(urls[0])
    return None


def _url_host(url: str) -> str | None:
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)", url)
    if match is None:
        return None
    scheme, netloc = match[1].lower(), match[2].rsplit("@", 1)[-1].lower()
    if scheme == "file":
        return "local"
    if scheme not in ("http", "https", "ftp") or not netloc or "$" in netloc:
        return None
    return netloc


def split_lock(entry: str) -> tuple[str, str] | None:
    """``nvidia-driver-3:580.82.07-1.el10.*`` -> ``("nvidia-driver", "3:580.82.07-1.el10")``.

    The name is what precedes the ``-[epoch:]version-release`` tail; the arch glob is dropped.
    ``None`` for an exclude entry (``!``) or an entry without an ``epoch:`` (versionlock
    always writes one).
    """
    match = re.match(r"^(?P<name>.+)-(?P<evr>\d+:[^-]+-[^-]+?)(?:\.[A-Za-z0-9_*]+)?$", str(entry)[:MAX_LINE])
    if match is None or entry.startswith("!"):
        return None
    return match["name"], match["evr"]


# --- dnf failure causes -------------------------------------------------------------------

_PLATFORM = re.compile(
    r"nothing provides module\(platform:(?P<platform>[\w.-]+)\) needed by module "
    r"(?P<module>[\w.-]+):(?P<stream>[\w.-]+)"
)
_MODULAR_FILTERED = re.compile(
    r"filtered out by modular filtering for argument: (?P<arg>\S+)"
    r"|package (?P<pkg>\S+) is filtered out by modular filtering"
)
_EXCLUDE_FILTERED = re.compile(
    r"filtered out by exclude filtering for argument: (?P<arg>\S+)"
    r"|package (?P<pkg>\S+) is filtered out by exclude filtering"
)
_SWITCH = re.compile(
    r"switching of module '(?P<module>[^']+)' stream '(?P<old>[^']+)' to stream '(?P<new>[^']+)'"
)
_REQUIRES = re.compile(
    r"package (?P<pkg>\S+) requires (?P<need>.+?), but none of the providers can be installed"
)
_NOTHING = re.compile(r"nothing provides (?P<need>(?!module\()\S+(?: [<>=]+ \S+)?) needed by (?P<pkg>\S+)")
_CONFLICT = re.compile(r"package (?P<pkg>\S+) conflicts with (?P<what>\S+) provided by (?P<by>\S+)")
_NO_MATCH = re.compile(r"^No match for argument: (?P<arg>\S+)|No package (?P<pkg>\S+) available", re.M)
_FETCH = re.compile(r"(?:Status code: (?P<code>\d+)|Curl error \((?P<curl>\d+)\)[^\n]*?) for (?P<url>\S+)")
_NOT_SIGNED = re.compile(r"Package (?P<file>\S+) is not signed")
_NO_PUBKEY = re.compile(r"Public key for (?P<file>\S+) is not installed")
_REPO_SIGNATURE = re.compile(
    r"Failed to download metadata for repo '(?P<repo>[^']+)': repomd\.xml GPG signature verification error: "
    r"(?P<why>[^\n]+)"
)
"""librepo's words when ``repo_gpgcheck=1`` and ``repomd.xml.asc`` does not verify with the repository's
``gpgkey`` (captured: tests/fixtures/redhat/dnf-repo-bad-metadata-signature.txt)."""
_REPO_DOWN = re.compile(r"Failed to download metadata for repo '(?P<repo>[^']+)'|Cannot download repomd\.xml")
_NVIDIA_GUIDE = "NVIDIA Driver Installation Guide, RHEL section"


def _first(pattern: re.Pattern[str], text: str, *groups: str) -> str:
    match = pattern.search(text)
    if match is None:
        return ""
    return next((match[g] for g in groups if match[g]), "")


def _platform(text: str) -> str | None:
    match = _PLATFORM.search(text)
    if match is None:
        return None
    wanted = match["platform"]
    return (
        f"the repository's module {match['module']}:{match['stream']} is built for platform:{wanted}, "
        f'which this host is not, so dnf filters its packages out ("filtered out by modular filtering"): '
        f"configure NVIDIA's repository for this host's own major release instead of the "
        f"{wanted.replace('el', 'rhel')} one ({_NVIDIA_GUIDE})"
    )


def _modular(text: str) -> str | None:
    if "filtered out by modular filtering" not in text:
        return None
    what = _first(_MODULAR_FILTERED, text, "arg", "pkg")
    # ansible.builtin.dnf reports only this line: dnf's "nothing provides module(platform:elN)"
    # warning, which tells a repository of another EL major apart, is not in what it returns.
    return (
        f"{what} is in a module stream that is not enabled, or in a repository built for another EL "
        'major release, so dnf hides it ("filtered out by modular filtering"): enable the stream that '
        "carries it (`dnf module enable nvidia-driver:<branch>-open`, or `dnf module switch-to "
        "nvidia-driver:<stream> --allowerasing`); if `dnf module list` warns that nothing provides "
        "module(platform:elN), configure NVIDIA's repository for this host's own major release instead "
        f"({_NVIDIA_GUIDE})"
    )


def _switch(text: str) -> str | None:
    match = _SWITCH.search(text)
    if match is None:
        return None
    module, old, new = match["module"], match["old"], match["new"]
    return (
        f"module {module} is enabled at stream {old} and dnf will not enable {new} beside it: switch with "
        f"`dnf module switch-to {module}:{new} --allowerasing` (or `dnf module reset {module}` first) "
        f"({_NVIDIA_GUIDE})"
    )


def _excluded(text: str) -> str | None:
    if "filtered out by exclude filtering" not in text:
        return None
    what = _first(_EXCLUDE_FILTERED, text, "pkg", "arg")
    needed = _first(_REQUIRES, text, "pkg")
    via = f" (needed by {needed})" if needed else ""
    return (
        f'{what}{via} is excluded by a dnf version lock or an excludepkgs setting ("filtered out by exclude '
        "filtering\"): list the locks with `dnf versionlock list`, delete the old branch's locks and "
        "lock the new release as one unit (dnf-versionlock(8))"
    )


def _unresolvable(text: str) -> str | None:
    nothing = _NOTHING.search(text)
    if nothing is not None:
        need, pkg = nothing["need"], nothing["pkg"]
        return (
            f"no enabled repository provides {need}, needed by {pkg}: enable the repository that ships it "
            f"(dkms comes from EPEL on RHEL and Rocky; {_NVIDIA_GUIDE})"
        )
    conflict = _CONFLICT.search(text)
    if conflict is not None and "problem with installed package" in text:
        return (
            f"{conflict['pkg']} conflicts with {conflict['what']} ({conflict['by']}): the other driver "
            "flavour or branch is installed; replace it in the same transaction with --allowerasing (on "
            "EL 8/9 after `dnf module switch-to nvidia-driver:<stream> --allowerasing`) "
            f"({_NVIDIA_GUIDE}, Switching between Driver Module Flavors)"
        )
    requires = _REQUIRES.search(text)
    if requires is None:
        return None
    return (
        f"dependencies cannot be resolved: {requires['pkg']} requires {requires['need']}, but none of the "
        f"providers can be installed: install the whole release at one version, or allow dnf to replace the "
        f"conflicting packages with --allowerasing"
    )


def _gpg(text: str) -> str | None:
    signature = _REPO_SIGNATURE.search(text)
    if signature is not None:
        return (
            f"the metadata of {signature['repo']} does not verify with its gpgkey (repo_gpgcheck=1: "
            f"{signature['why'].strip()}): the repository is not the one that key signs; point the "
            "repository and its key (and the fingerprint the spec pins) at the same source"
        )
    fetch = _FETCH.search(text)
    if fetch is not None and "/repodata/" not in fetch["url"] and "Failed to download metadata" not in text:
        why = f"HTTP status {fetch['code']}" if fetch["code"] else f"curl error {fetch['curl']}"
        return (
            because(f"the repository's gpgkey {fetch['url']} cannot be fetched", why)
            + "; set gpgkey to the URL of "
            f"NVIDIA's D42D0685 key for this release's repository ({_NVIDIA_GUIDE})"
        )
    unsigned = _NOT_SIGNED.search(text)
    if unsigned is not None:
        return (
            f"{unsigned['file']} is not signed while the repository has gpgcheck=1: the repository is not "
            f"NVIDIA's signed one (key D42D0685); point it at NVIDIA's repository ({_NVIDIA_GUIDE})"
        )
    pubkey = _NO_PUBKEY.search(text)
    if pubkey is not None or "GPG check FAILED" in text or "not correct for this package" in text:
        what = pubkey["file"] if pubkey else "a package"
        return (
            f"the key that signed {what} is not the repository's configured gpgkey: set gpgkey to NVIDIA's "
            f"D42D0685 key for the repository and import it (`rpm --import`) ({_NVIDIA_GUIDE})"
        )
    if "You have enabled checking of packages via GPG keys" in text:
        return (
            "the repository has gpgcheck=1 but no GPG key is installed or configured: set gpgkey to NVIDIA's "
            f"D42D0685 key for the repository ({_NVIDIA_GUIDE})"
        )
    return None


def _other(text: str) -> str | None:
    no_match = _NO_MATCH.search(text)
    if no_match is not None:
        return (
            f"no enabled repository has a package matching {no_match['arg'] or no_match['pkg']}: check the "
            "package name and "
            "version, and that NVIDIA's repository for this release is configured and enabled"
        )
    if "Locklist not set" in text:
        return (
            "the versionlock plugin is enabled without a locklist: set locklist= in "
            "/etc/dnf/plugins/versionlock.conf (python3-dnf-plugin-versionlock; dnf-versionlock(8))"
        )
    down = _REPO_DOWN.search(text)
    if down is not None:
        repo = down["repo"] or "a repository"
        return f"dnf could not download the metadata of {repo}: check its baseurl and the network path to it"
    return None


_CLASSES = (_platform, _switch, _gpg, _excluded, _modular, _unresolvable, _other)


def ansible_dnf_text(result: object) -> str:
    """The text of an ``ansible.builtin.dnf`` task result to give :func:`failure_cause`.

    The module returns dnf's words in ``msg`` (``Depsolve Error occurred: ...``, ``Failed to
    validate GPG signature ...``), ``failures`` (one string per package, ``nvidia-open All
    matches were filtered out by modular filtering for argument: nvidia-open``) and
    ``results``; they are joined one per line. Anything not a mapping gives ``""``.
    """
    if not isinstance(result, dict):
        return ""
    parts: list[str] = []
    for key in ("msg", "failures", "results", "stderr"):
        value = result.get(key)
        items = value if isinstance(value, list) else [value]
        parts += [item for item in items if isinstance(item, str)]
    return "\n".join(parts)[:MAX_INPUT]


def failure_cause(output: str) -> str | None:
    """One line naming the cause of a failed dnf run and its fix; None when no class matches.

    Classes, most specific first: a module built for another EL major (the rhel9 repository on
    an el10 host: ``nothing provides module(platform:el9)``, its packages "filtered out by
    modular filtering"); a request to enable a second stream of an enabled module; GPG
    failures (unsigned package, wrong or missing key); packages hidden by versionlock ("filtered
    out by exclude filtering", also when only a dependency is locked); packages of a stream
    that is not enabled ("filtered out by modular filtering"); unresolvable dependencies
    ("nothing provides X needed by Y", "requires X, but none of the providers can be
    installed"), a package that conflicts with an installed one (the other flavour); no package
    of that name; the versionlock plugin without its locklist;
    repository metadata that cannot be downloaded. Each class is modelled on real dnf 4.14
    output (``tests/fixtures/redhat/``). The line is at most :data:`MAX_CAUSE` characters.
    """
    if not isinstance(output, str):
        return None
    text = "\n".join(_lines(output))
    for judge in _CLASSES:
        cause = judge(text)
        if cause is not None:
            return cause if len(cause) <= MAX_CAUSE else cause[: MAX_CAUSE - 3] + "..."
    return None
