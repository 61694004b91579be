"""Facts about the driver's surroundings: NVSwitch and fabric state, DKMS, nouveau, apt locks, MOK.

Each fact is one probe plus one pure parser returning the value or an Unknown with the
reason, like the rest of detection. They feed the field-failure rules of the planner
(shared/reference/field-failures.md FF-01 to FF-13).
"""

from __future__ import annotations

import re

from pydantic import Field

from provision.detect.failure import failure
from provision.detect.probes import Probe
from provision.detect.unknown import Unknown
from provision.models import Frozen

UNATTENDED_FILE = "/etc/apt/apt.conf.d/51provision-nvidia-unattended"
PREFERENCES_FILE = "/etc/apt/preferences.d/provision-nvidia"
NOUVEAU_BLACKLIST = "/etc/modprobe.d/provision-blacklist-nouveau.conf"
DKMS_MOK = "/var/lib/dkms/mok.pub"


class PciDevice(Frozen):
    """One NVIDIA PCI function from ``lspci -nn -D -d 10de:``."""

    bdf: str = Field(description="Domain:bus:device.function, e.g. 0000:41:00.0.")
    class_code: str = Field(description="PCI class, e.g. 0302 (3D controller) or 0680 (bridge: NVSwitch).")
    device_id: str = Field(description="PCI device id, lower-case hex without 0x, e.g. 2335.")
    description: str = ""

    @property
    def is_nvswitch(self) -> bool:
        """NVSwitch functions show as NVIDIA 'Bridge' class 0680 (FF-03; leptonai/gpud PR #906)."""
        return self.class_code == "0680"

    @property
    def is_gpu(self) -> bool:
        return self.class_code in ("0300", "0302")


class FabricState(Frozen):
    """Per-GPU fabric ``State``/``Status`` from ``nvidia-smi -q`` (``N/A`` without NVSwitch)."""

    states: tuple[tuple[str, str], ...] = Field(description="(State, Status) per GPU, in nvidia-smi order.")

    @property
    def nvswitch(self) -> bool:
        """True when any GPU reports a fabric state, i.e. it sits on an NVSwitch fabric (FF-03)."""
        return any(state != "N/A" for state, _ in self.states)

    @property
    def completed(self) -> bool:
        return all(s == ("Completed", "Success") for s in self.states)


class DkmsStatus(Frozen):
    """``dkms status`` lines for the nvidia module: (version, kernel, state)."""

    modules: tuple[tuple[str, str, str], ...] = ()

    def state_for(self, kernel: str) -> str | None:
        """``installed``/``built``/``added`` for ``kernel``, or None when nothing is registered."""
        return next((state for _, k, state in self.modules if k == kernel), None)


class NouveauState(Frozen):
    """Whether the in-kernel nouveau driver is loaded and which files blacklist it."""

    loaded: bool
    blacklisted_by: tuple[str, ...] = ()


class AptLocks(Frozen):
    """provision's apt preferences and unattended-upgrades guard as found on the machine."""

    preferences: str | None = Field(None, description=f"Content of {PREFERENCES_FILE}, None when absent.")
    unattended_guard: str | None = Field(None, description=f"Content of {UNATTENDED_FILE}, None when absent.")
    unattended_upgrades_installed: bool = False


class PackageOrigins(Frozen):
    """Where each installed NVIDIA driver package came from (``apt-cache policy``, FF-08).

    ``origins`` maps a package name to the host of the repository that serves its installed
    version (``developer.download.nvidia.com``, ``archive.ubuntu.com``), or ``local`` when only
    dpkg knows it (a runfile, a removed repository, a hand-installed .deb).
    """

    origins: dict[str, str] = Field(default_factory=dict)


class MokState(Frozen):
    """Whether DKMS's machine owner key is enrolled in shim (``mokutil --test-key``)."""

    key_present: bool
    enrolled: bool | None = None


def surroundings_probes() -> list[Probe]:
    """The probes of this module."""
    return [
        Probe(id="lspci-nn", argv=("lspci", "-nn", "-D", "-d", "10de:"), timeout=10.0),
        Probe(id="nvidia-smi-q", argv=("nvidia-smi", "-q"), timeout=20.0),
        Probe(id="dkms-status", argv=("dkms", "status", "nvidia"), timeout=20.0),
        Probe(id="nouveau", argv=("sh", "-c", _NOUVEAU_SCRIPT), timeout=5.0),
        Probe(id="apt-locks", argv=("sh", "-c", _APT_LOCKS_SCRIPT), timeout=5.0),
        Probe(id="mok-key", argv=("sh", "-c", _MOK_SCRIPT), timeout=10.0),
        Probe(id="apt-origins", argv=("sh", "-c", _ORIGINS_SCRIPT), timeout=20.0),
    ]


_NOUVEAU_SCRIPT = (
    'if [ -d /sys/module/nouveau ]; then echo "loaded yes"; else echo "loaded no"; fi; '
    "grep -lsE '^[[:space:]]*blacklist[[:space:]]+nouveau' /etc/modprobe.d/*.conf /lib/modprobe.d/*.conf "
    "/usr/lib/modprobe.d/*.conf | sed 's/^/blacklisted-by /'; exit 0"
)
_APT_LOCKS_SCRIPT = (
    f"for f in {PREFERENCES_FILE} {UNATTENDED_FILE}; do "
    'if [ -f "$f" ]; then echo "=== $f"; cat "$f"; fi; done; '
    'echo "=== unattended-upgrades '
    "$(dpkg-query -W -f='${db:Status-Abbrev}' unattended-upgrades 2>/dev/null)\""
)
# The driver's packages, by name pattern, and where apt says their installed version comes from.
_ORIGINS_SCRIPT = (
    "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' 'nvidia-*' 'libnvidia-*' 'cuda-drivers*' "
    "2>/dev/null | awk '$2 ~ /^.i/ {print $1}' | xargs -r apt-cache policy"
)
_MOK_SCRIPT = (
    f'if [ ! -f {DKMS_MOK} ]; then echo "key absent"; exit 0; fi; echo "key present"; '
    f"mokutil --test-key {DKMS_MOK} 2>&1; exit 0"
)


def parse_lspci(output: str, rc: int) -> tuple[PciDevice, ...] | Unknown:
    """Lines like ``0000:41:00.0 3D controller [0302]: NVIDIA Corporation GH100 [10de:2335] (rev a1)``."""
    if (bad := failure("lspci", output, rc)) is not None:
        return bad
    devices = []
    for line in output.splitlines():
        m = re.match(r"^(\S+)\s+(.*?)\s*\[([0-9a-f]{4})\]:\s*(.*?)\s*\[10de:([0-9a-f]{4})\]", line.strip())
        if m:
            devices.append(
                PciDevice(bdf=m[1], class_code=m[3], description=f"{m[2]}: {m[4]}", device_id=m[5])
            )
    return tuple(devices)


def parse_fabric(output: str, rc: int) -> FabricState | Unknown:
    """Fabric State/Status of every GPU in ``nvidia-smi -q`` output."""
    if (bad := failure("nvidia-smi", output, rc)) is not None:
        return bad
    blocks = re.findall(r"^\s+Fabric\s*\n\s+State\s*:\s*(.+?)\s*\n\s+Status\s*:\s*(.+?)\s*$", output, re.M)
    if not blocks and "GPU " in output:
        return Unknown(unknown="nvidia-smi -q shows no Fabric section (driver older than R470?)")
    return FabricState(states=tuple((state, status) for state, status in blocks))


def parse_dkms(output: str, rc: int) -> DkmsStatus | Unknown:
    """``nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed`` (also the older ``nvidia, ver`` form)."""
    if (bad := failure("dkms", output, rc)) is not None:
        return bad
    found = re.findall(r"^nvidia[/,]\s*([\w.]+),\s*([^,\s]+),\s*[^:]+:\s*(\w+)", output, re.M)
    return DkmsStatus(modules=tuple((v, k, s) for v, k, s in found))


def parse_nouveau(output: str, rc: int) -> NouveauState | Unknown:
    """The nouveau probe's ``loaded yes|no`` and ``blacklisted-by FILE`` lines."""
    if rc != 0 or "loaded " not in output:
        return Unknown(unknown=f"nouveau state unreadable (exit {rc})")
    files = tuple(line.split(" ", 1)[1] for line in output.splitlines() if line.startswith("blacklisted-by "))
    return NouveauState(loaded="loaded yes" in output, blacklisted_by=files)


def parse_apt_locks(output: str, rc: int) -> AptLocks | Unknown:
    """Sections ``=== FILE`` of the apt-locks probe, and the unattended-upgrades package state."""
    if rc not in (0, 1) or "=== unattended-upgrades" not in output:
        return Unknown(unknown=f"apt configuration unreadable (exit {rc})")
    sections = dict(re.findall(r"^=== (\S+)\n(.*?)(?=^=== )", output, re.M | re.S))
    status = re.search(r"^=== unattended-upgrades (\S*)", output, re.M)
    return AptLocks(
        preferences=sections.get(PREFERENCES_FILE),
        unattended_guard=sections.get(UNATTENDED_FILE),
        unattended_upgrades_installed=bool(status and status[1].endswith("i")),
    )


def parse_mok(output: str, rc: int) -> MokState | Unknown:
    """``key absent`` / ``key present`` followed by mokutil's verdict."""
    if "key absent" in output:
        return MokState(key_present=False)
    if "key present" not in output:
        return Unknown(unknown=f"MOK state unreadable (exit {rc})")
    if "mokutil: not found" in output or "not found" in output.split("key present", 1)[1][:80]:
        return MokState(key_present=True, enrolled=None)
    return MokState(key_present=True, enrolled="is already enrolled" in output)


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
