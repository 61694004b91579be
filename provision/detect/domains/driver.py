"""The NVIDIA kernel driver: loaded module, module on disk, DKMS, nouveau, MOK, fabric manager.

Sources: the NVIDIA driver README, "Installing the NVIDIA Driver" (``/proc/driver/nvidia/version``
and the open kernel modules' "Open Kernel Module" banner); dkms(8); mokutil(1); the NVIDIA
Fabric Manager User Guide (``nv-fabricmanager --version``); DKMS's README, "Module signing", and
its ``dkms`` script (``read_framework_conf``, ``prepare_mok``) for the signing certificate
(https://github.com/dell/dkms/blob/master/README.md#module-signing).
"""

from __future__ import annotations

import re

from pydantic import Field

from provision.catalog.models import Flavor
from provision.detect.fact import Derive, Fact, Unknown, failure, first_line, if_probed, value_of
from provision.models import Frozen
from provision.versions import Driver, DriverVersion

NOUVEAU_BLACKLIST = "/etc/modprobe.d/provision-blacklist-nouveau.conf"
DKMS_MOK = "/var/lib/dkms/mok.pub"
"""DKMS's default signing certificate, when ``mok_certificate=`` is set in none of its framework files."""
UBUNTU_MOK = "/var/lib/shim-signed/mok/MOK.der"
"""Ubuntu's MOK from ``update-secureboot-policy``; DKMS signs with it on Ubuntu when no signing key is
configured (``dkms`` ``prepare_mok``), or when an admin points ``mok_certificate=`` at it."""
_NO_DRIVER = "NVIDIA kernel module not loaded (no /proc/driver/nvidia/version)"
_DRIVER = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)*)\s")
_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)+)")


class LoadedDriver(Frozen):
    """The NVIDIA kernel module currently loaded (``/proc/driver/nvidia/version``)."""

    version: Driver
    flavor: Flavor


class DkmsStatus(Frozen):
    """``dkms status`` lines for the nvidia module: (version, kernel, state)."""

    modules: tuple[tuple[str, str, str], ...] = ()

    def state_for(self, kernel: str) -> str | None:
        """``installed``/``built``/``added`` for ``kernel``, or None when nothing is registered."""
        return next((state for _, k, state in self.modules if k == kernel), None)


class NouveauState(Frozen):
    """Whether the in-kernel nouveau driver is loaded, which files blacklist it, and every module
    blacklist in the modprobe.d directories (module -> files; None in captures without them)."""

    loaded: bool
    blacklisted_by: tuple[str, ...] = ()
    module_blacklists: dict[str, tuple[str, ...]] | None = None

    def blacklisted(self, name: str) -> bool | None:
        """Whether module ``name`` is blacklisted anywhere; None when the capture does not say."""
        if self.module_blacklists is None:
            return True if name == "nouveau" and self.blacklisted_by else None
        return name in self.module_blacklists


class ModuleSigner(Frozen):
    """Who signed the nvidia module the next boot loads (``modinfo -F signer nvidia``); empty: unsigned."""

    signer: str


class MokState(Frozen):
    """Whether the certificate DKMS signs modules with is enrolled in shim (``mokutil --test-key``).

    Attributes:
        key_present: Whether the configured certificate's file exists.
        enrolled: Whether shim has it enrolled; None when mokutil could not say.
        certificate: The configured certificate tested: the last ``mok_certificate=`` of
            ``/etc/dkms/framework.conf`` then ``/etc/dkms/framework.conf.d/*.conf``, else
            :data:`DKMS_MOK` (also in facts saved before this field).
        configured_in: The framework file that set it; None for DKMS's default.
        ubuntu_present: Whether :data:`UBUNTU_MOK` exists (and differs from ``certificate``).
        ubuntu_enrolled: Whether shim has :data:`UBUNTU_MOK` enrolled; None when absent or unsaid.
    """

    key_present: bool
    enrolled: bool | None = None
    certificate: str = DKMS_MOK
    configured_in: str | None = None
    ubuntu_present: bool = False
    ubuntu_enrolled: bool | None = None

    @property
    def signing_certificate(self) -> str:
        """The certificate DKMS signs with: the configured one, except that with none configured and
        the default absent DKMS on Ubuntu signs with Ubuntu's key when it exists (``prepare_mok``)."""
        if self.key_present or self.configured_in is not None or not self.ubuntu_present:
            return self.certificate
        return UBUNTU_MOK

    @property
    def signing_enrolled(self) -> bool | None:
        """Whether :attr:`signing_certificate` is enrolled (None: mokutil could not say)."""
        return self.enrolled if self.signing_certificate == self.certificate else self.ubuntu_enrolled

    @property
    def trusted(self) -> str | None:
        """An enrolled key among those tested (the configured one first), or None."""
        if self.enrolled:
            return self.certificate
        return UBUNTU_MOK if self.ubuntu_enrolled else None


def parse_driver_version(output: str, rc: int) -> LoadedDriver | Unknown:
    """``cat /proc/driver/nvidia/version`` -> loaded module version and flavor.

    "Open Kernel Module" in the NVRM line means the open flavor; any other
    NVRM line is the proprietary module.
    """
    if rc != 0 and "No such file" in output:
        return Unknown(unknown=_NO_DRIVER)
    if (bad := failure("cat /proc/driver/nvidia/version", output, rc)) is not None:
        return bad
    match = _DRIVER.search(output + " ")
    if match is None:
        return Unknown(unknown=f"unexpected /proc/driver/nvidia/version: {first_line(output)}")
    flavor = "open" if "Open Kernel Module" in output else "proprietary"
    return LoadedDriver(version=DriverVersion(match.group(1)), flavor=flavor)


def parse_modinfo(output: str, rc: int) -> DriverVersion | Unknown:
    """``modinfo -F version nvidia`` (or full ``modinfo nvidia``) -> on-disk module version."""
    if (bad := failure("modinfo", output, rc)) is not None:
        return bad
    for line in output.splitlines():
        text = line.removeprefix("version:").strip()
        if re.fullmatch(r"\d+\.\d+(\.\d+)*", text):
            return DriverVersion(text)
    return Unknown(unknown=f"no nvidia module version in modinfo output: {first_line(output)}")


def parse_signer(output: str, rc: int) -> ModuleSigner | Unknown:
    """``modinfo -F signer nvidia`` -> the signer's name (``Canonical Ltd. Kernel Module Signing``),
    or an empty signer when modinfo prints nothing (an unsigned module)."""
    if (bad := failure("modinfo", output, rc)) is not None:
        return bad
    lines = [line.removeprefix("signer:").strip() for line in output.splitlines() if line.strip()]
    return ModuleSigner(signer=lines[0] if lines else "")


def parse_dkms(output: str, rc: int) -> DkmsStatus | Unknown:
    """``nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed`` (also the older ``nvidia, ver`` form).

    A module DKMS has only ``added`` (its build failed, or never ran) has no kernel:
    ``nvidia/580.95.05: added``; its kernel is ``""`` (dkms(8), "status";
    NVIDIA/open-gpu-kernel-modules#805).

    The module is ``nvidia`` in NVIDIA's and Ubuntu's packages and ``nvidia-current`` (open:
    ``nvidia-current-open``) in Debian's; other modules (``nvidia-fs``, anything else) are ignored.
    """
    if (bad := failure("dkms", output, rc)) is not None:
        return bad
    found = re.findall(
        r"^nvidia(?:-current)?(?:-open)?[/,]\s*([\w.]+)(?:,\s*([^,\s:]+),\s*[^:]+)?:\s*(\w+)", output, re.M
    )
    return DkmsStatus(modules=tuple((v, k, s) for v, k, s in found))


def parse_nouveau(output: str, rc: int) -> NouveauState | Unknown:
    """The nouveau probe's ``loaded yes|no`` and ``module-blacklist MODULE FILE`` lines.

    Captures made before the module-blacklist listing carry ``blacklisted-by FILE`` lines for
    nouveau alone; from the listing, nouveau's files are read off it (one grep, not two).
    """
    if rc != 0 or "loaded " not in output:
        return Unknown(unknown=f"nouveau state unreadable (exit {rc})")
    if "module-blacklists listed" not in output:
        files = tuple(
            line.split(" ", 1)[1] for line in output.splitlines() if line.startswith("blacklisted-by ")
        )
        return NouveauState(loaded="loaded yes" in output, blacklisted_by=files)
    blacklists: dict[str, tuple[str, ...]] = {}
    for name, path in re.findall(r"^module-blacklist (\S+) (\S+)$", output, re.MULTILINE):
        module = name.replace("-", "_")
        blacklists[module] = tuple(dict.fromkeys((*blacklists.get(module, ()), path)))
    return NouveauState(
        loaded="loaded yes" in output,
        blacklisted_by=blacklists.get("nouveau", ()),
        module_blacklists=blacklists,
    )


def parse_mok(output: str, rc: int) -> MokState | Unknown:
    """The ``mok-key`` probe's output -> the configured certificate's state, and Ubuntu's key's.

    Each tested certificate is a block: ``cert PATH``, ``cert-source FILE|default``, then ``key
    absent`` or ``key present`` and mokutil's verdict (``SKIP: PATH is already enrolled`` /
    ``PATH is not enrolled``). Output of the older probe, a single block without the ``cert``
    lines, stands for :data:`DKMS_MOK`. Never raises.
    """
    blocks = [b for b in re.split(r"^(?=cert )", output, flags=re.MULTILINE) if "key " in b]
    if not blocks or not any(k in blocks[0] for k in ("key absent", "key present")):
        return Unknown(unknown=f"MOK state unreadable (exit {rc})")
    first = _mok_block(blocks[0])
    ubuntu = next((k for k in map(_mok_block, blocks[1:]) if k[1] == "ubuntu"), None)
    return MokState(
        key_present=first[2],
        enrolled=first[3],
        certificate=first[0],
        configured_in=first[1],
        ubuntu_present=ubuntu is not None and ubuntu[2],
        ubuntu_enrolled=ubuntu[3] if ubuntu is not None else None,
    )


def _mok_block(block: str) -> tuple[str, str | None, bool, bool | None]:
    """One tested certificate: (path, ``cert-source`` or None for ``default``, present, enrolled)."""
    path = re.search(r"^cert (.+?)\s*$", block, re.MULTILINE)
    source = re.search(r"^cert-source (.+?)\s*$", block, re.MULTILINE)
    configured = source.group(1) if source and source.group(1) != "default" else None
    if "key present" not in block:
        return (path.group(1) if path else DKMS_MOK, configured, False, None)
    verdict = block.split("key present", 1)[1]
    if "not found" in verdict[:80] or not re.search(r"(already|not) enrolled", verdict):
        return (path.group(1) if path else DKMS_MOK, configured, True, None)
    return (path.group(1) if path else DKMS_MOK, configured, True, "is already enrolled" in verdict)


def parse_fm_version(output: str, rc: int) -> str | Unknown:
    """``nv-fabricmanager --version`` ("Fabric Manager version is : 535.183.01") -> ``535.183.01``."""
    if (bad := failure("nv-fabricmanager", output, rc)) is not None:
        return bad
    match = _VERSION.search(output)
    return match.group(1) if match else Unknown(unknown=f"no version in: {first_line(output)}")


class LoadedDriverFact(Fact[LoadedDriver]):
    """The loaded kernel module's version and flavour."""

    id = "driver-version"
    argv = ("cat", "/proc/driver/nvidia/version")
    parse = staticmethod(parse_driver_version)


class ModuleOnDiskFact(Fact[DriverVersion]):
    """The module the next boot loads (modinfo(8)); differs from the loaded one after an upgrade."""

    id = "modinfo"
    argv = ("modinfo", "-F", "version", "nvidia")
    parse = staticmethod(parse_modinfo)


class ModuleSignerFact(Fact[ModuleSigner]):
    """The on-disk nvidia module's signer; under Secure Boot it must be a key the firmware or shim
    trusts (a distribution's, or the enrolled DKMS MOK), else the module does not load (FF-11)."""

    id = "module-signer"
    argv = ("modinfo", "-F", "signer", "nvidia")
    parse = staticmethod(parse_signer)


class DkmsFact(Fact[DkmsStatus]):
    """DKMS's nvidia module per kernel: ``dkms status`` (every module; the parser keeps NVIDIA's
    kernel module under its names in NVIDIA's, Ubuntu's and Debian's packages)."""

    id = "dkms-status"
    argv = ("dkms", "status")
    timeout = 20.0
    parse = staticmethod(parse_dkms)


_NOUVEAU_SCRIPT = (
    'if [ -d /sys/module/nouveau ]; then echo "loaded yes"; else echo "loaded no"; fi; '
    "echo 'module-blacklists listed'; "
    "grep -HsE '^[[:space:]]*blacklist[[:space:]]+[A-Za-z0-9_-]+' /etc/modprobe.d/*.conf "
    "/lib/modprobe.d/*.conf /usr/lib/modprobe.d/*.conf | "
    "sed -E 's/^([^:]+):[[:space:]]*blacklist[[:space:]]+([A-Za-z0-9_-]+).*/module-blacklist \\2 \\1/'; "
    "exit 0"
)


class NouveauFact(Fact[NouveauState]):
    """nouveau loaded (``/sys/module/nouveau``) and the modprobe.d files that blacklist it."""

    id = "nouveau"
    argv = ("sh", "-c", _NOUVEAU_SCRIPT)
    timeout = 5.0
    parse = staticmethod(parse_nouveau)


# The configured certificate is the last mok_certificate= of framework.conf, then of each
# framework.conf.d/*.conf in glob order, as dkms's read_framework_conf sources them; quotes and a
# trailing comment are dropped and ${kernelver} is the running kernel (README, "Module signing").
# The path comes from a file on the target: it is only ever expanded quoted.
_MOK_SCRIPT = (
    f"cert={DKMS_MOK}; from=default; "
    "for f in /etc/dkms/framework.conf /etc/dkms/framework.conf.d/*.conf; do "
    '[ -f "$f" ] || continue; '
    'v=$(sed -n "s/^[[:space:]]*mok_certificate=[\\"\']\\{0,1\\}\\([^\\"\'#]*[^\\"\'#[:space:]]\\)'
    '[\\"\']\\{0,1\\}[[:space:]]*\\(#.*\\)\\{0,1\\}$/\\1/p" "$f" | tail -n 1); '
    'if [ -n "$v" ]; then cert=$v; from=$f; fi; done; '
    'case "$cert" in *kernelver*) k=$(uname -r); '
    'cert=$(printf \'%s\\n\' "$cert" | sed "s|\\${kernelver}|$k|g; s|\\$kernelver|$k|g");; esac; '
    'probe() { echo "cert $1"; echo "cert-source $2"; '
    'if [ ! -f "$1" ]; then echo "key absent"; return 0; fi; echo "key present"; '
    'mokutil --test-key "$1" 2>&1; }; '
    'probe "$cert" "$from"; '
    f'if [ "$cert" != {UBUNTU_MOK} ] && [ -f {UBUNTU_MOK} ]; then probe {UBUNTU_MOK} ubuntu; fi; '
    "exit 0"
)


class MokFact(Fact[MokState]):
    """DKMS's configured signing certificate, and Ubuntu's MOK, and whether shim has each enrolled."""

    id = "mok-key"
    argv = ("sh", "-c", _MOK_SCRIPT)
    requires = "mokutil"
    parse = staticmethod(parse_mok)


class Initramfs(Frozen):
    """The initramfs the running kernel boots with, and the modprobe.d files it was built with.

    Module blacklists and options in ``/etc/modprobe.d`` reach early boot only through the
    initramfs (initramfs-tools copies them in; ``update-initramfs -u`` after a change: Ubuntu's
    and NVIDIA's "Disabling Nouveau" steps), so a blacklist newer than the image is not in effect.
    """

    image: str | None = Field(None, description="The running kernel's initramfs, None when there is none.")
    image_mtime: int | None = Field(None, description="Its modification time, seconds since the epoch.")
    contents: tuple[str, ...] | None = Field(
        None,
        description="The modprobe.d files inside it (lsinitramfs, or dracut's lsinitrd); None: no lister.",
    )
    confs: dict[str, int] = Field(default_factory=dict, description="/etc/modprobe.d/*.conf -> mtime.")

    def in_effect(self, path: str) -> bool | None:
        """Whether the modprobe.d file ``path`` is in the image as it is now; None when unknowable."""
        if self.image is None or self.image_mtime is None or path not in self.confs:
            return None
        if self.contents is not None and path.lstrip("/") not in {c.lstrip("/") for c in self.contents}:
            return False
        return self.confs[path] <= self.image_mtime


def _listed_path(row: str) -> str | None:
    """The path of one ``ls -l`` style row of lsinitrd (``MODE LINKS USER GROUP SIZE MON DAY TIME|YEAR
    PATH[ -> TARGET]``), None when the row has fewer fields."""
    fields = row.split(None, 8)
    if len(fields) != 9:
        return None
    path = fields[8].split(" -> ", 1)[0].strip().removeprefix("./").lstrip("/")
    return path or None


def parse_initramfs(output: str, rc: int) -> Initramfs | Unknown:
    """Our initramfs probe's ``image PATH MTIME``, ``lister NAME`` (``lsinitramfs``, ``lsinitrd`` or
    ``none``; older captures: ``lsinitramfs yes|no``), ``contains FILE`` (lsinitramfs),
    ``listed ROW`` (lsinitrd's ``ls -l`` rows) and ``conf FILE MTIME`` lines."""
    if (bad := failure("initramfs probe", output, rc)) is not None:
        return bad
    image = re.search(r"^image (\S+) (\d+)$", output, re.MULTILINE)
    if image is None and not re.search(r"^image none$", output, re.MULTILINE):
        return Unknown(unknown=f"unexpected initramfs probe output: {first_line(output)}")
    contents = re.findall(r"^contains (\S+)$", output, re.MULTILINE)
    contents += [p for row in re.findall(r"^listed (.+)$", output, re.MULTILINE) if (p := _listed_path(row))]
    listed = re.search(r"^(?:lsinitramfs (yes)|lister (lsinitramfs|lsinitrd))$", output, re.MULTILINE)
    return Initramfs(
        image=image.group(1) if image else None,
        image_mtime=int(image.group(2)) if image else None,
        contents=tuple(contents) if listed else None,
        confs={m.group(1): int(m.group(2)) for m in re.finditer(r"^conf (\S+) (\d+)$", output, re.MULTILINE)},
    )


def _lister_script() -> str:
    """The image's modprobe.d files through the first lister the host has: each OS family's own
    (``INITRAMFS_LISTER`` of :mod:`provision.os.debian.probes` and :mod:`provision.os.redhat.probes`)."""
    from provision.os.debian.probes import INITRAMFS_LISTER as DEBIAN
    from provision.os.redhat.probes import INITRAMFS_LISTER as REDHAT

    branches = "".join(
        f"{'if' if i == 0 else 'elif'} command -v {tool} >/dev/null; then echo 'lister {tool}'; {listing}; "
        for i, (tool, listing) in enumerate((DEBIAN, REDHAT))
    )
    return f"{branches}else echo 'lister none'; fi; "


_INITRAMFS_SCRIPT = (
    'k=$(uname -r); img=""; for f in /boot/initrd.img-$k /boot/initramfs-$k.img; do '
    '[ -f "$f" ] && img=$f && break; done; '
    'if [ -n "$img" ]; then echo "image $img $(stat -c %Y "$img")"; '
    + _lister_script()
    + "else echo 'image none'; fi; "
    'for f in /etc/modprobe.d/*.conf; do [ -f "$f" ] && echo "conf $f $(stat -c %Y "$f")"; done; exit 0'
)


class InitramfsFact(Fact[Initramfs]):
    """The running kernel's initramfs: its age and its modprobe.d files (lsinitramfs(8), lsinitrd(1))."""

    id = "initramfs"
    argv = ("sh", "-c", _INITRAMFS_SCRIPT)
    timeout = 30.0
    parse = staticmethod(parse_initramfs)


class GspFirmware(Frozen):
    """The GSP firmware files installed under ``/lib/firmware/nvidia/<version>/`` (``gsp_*.bin``).

    The open kernel modules load the GSP firmware of their own release from there; the .run
    installer and the distributions' packages put it there (open-gpu-kernel-modules CHANGELOG,
    530.30.02: ``gsp_tu10x.bin`` and ``gsp_ga10x.bin``; README: the modules "must be used with GSP
    firmware ... from a corresponding driver release").

    Attributes:
        versions: Driver release -> the GSP firmware file names installed for it.
    """

    versions: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    def has(self, version: str) -> bool:
        """Whether GSP firmware for driver release ``version`` is installed."""
        return bool(self.versions.get(version))


def parse_gsp_firmware(output: str, rc: int) -> GspFirmware | Unknown:
    """One ``/lib/firmware/nvidia/<version>/gsp_<chip>.bin[.xz|.zst]`` path per line -> files by release."""
    if (bad := failure("gsp firmware probe", output, rc)) is not None:
        return bad
    found: dict[str, tuple[str, ...]] = {}
    for match in re.finditer(r"^/(?:usr/)?lib/firmware/nvidia/([\d.]+)/(gsp_[\w.-]+)$", output, re.MULTILINE):
        found[match.group(1)] = (*found.get(match.group(1), ()), match.group(2))
    return GspFirmware(versions=found)


class GspFirmwareFact(Fact[GspFirmware]):
    """The GSP firmware files per driver release under /lib/firmware/nvidia."""

    id = "gsp-firmware"
    argv = ("sh", "-c", 'for f in /lib/firmware/nvidia/*/gsp_*; do [ -e "$f" ] && echo "$f"; done; exit 0')
    parse = staticmethod(parse_gsp_firmware)


class FabricManagerVersionFact(Fact[str]):
    """The installed fabric manager's version; read by verify, not part of :class:`Facts`."""

    id = "fm-version"
    argv = ("nv-fabricmanager", "--version")
    timeout = 20.0
    parse = staticmethod(parse_fm_version)


FACTS = (
    LoadedDriverFact,
    ModuleOnDiskFact,
    DkmsFact,
    NouveauFact,
    MokFact,
    InitramfsFact,
    ModuleSignerFact,
    GspFirmwareFact,
)


FIELDS: dict[str, Derive] = {
    "driver": value_of(LoadedDriverFact),
    "driver_on_disk": if_probed(ModuleOnDiskFact),  # None: captures older than modinfo
    "dkms": if_probed(DkmsFact),
    "nouveau": if_probed(NouveauFact),
    "mok": if_probed(MokFact),
    "initramfs": if_probed(InitramfsFact),
    "module_signer": if_probed(ModuleSignerFact),
    "gsp_firmware": if_probed(GspFirmwareFact),
}
"""Facts fields of this domain; None means "not probed" (the field keeps its default)."""
