"""Pure parsers for the system probes: OS, kernel, driver, packages, CUDA, torch.

Each ``parse_*(output, rc)`` takes one probe's text and exit status and returns
typed data or an :class:`Unknown` with a human reason; none of them raises.
GPU and topology parsers (nvidia-smi) live in :mod:`provision.detect.parsers_gpu`.
"""

from __future__ import annotations

import ast
import re
import shlex

from provision.detect.collector import NOT_FOUND_RC
from provision.detect.facts import (
    CudaToolkits,
    Kernel,
    LoadedDriver,
    OsRelease,
    Package,
    Torch,
    Unknown,
    Venv,
)
from provision.detect.failure import failure, first_line
from provision.versions import DottedVersion, DriverVersion

_NO_DRIVER = "NVIDIA kernel module not loaded (no /proc/driver/nvidia/version)"
_PACKAGE_NAME = re.compile(
    r"nvidia|cuda|cudnn|nccl|libnv|fabricmanager|dkms|linux-headers|linux-image|^gcc-\d+$|^g\+\+-\d+$|^nvlsm$"
)
_DRIVER = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)*)\s")
_COMPILER = re.compile(r"\b(gcc|clang)\b.*?(\d+\.\d+(?:\.\d+)*)")
_CUDA_DIR = re.compile(r"^cuda-(\d+\.\d+)$")
_NVCC = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)+)")
_LEADING_VERSION = re.compile(r"^\d+(\.\d+)*")
_DIST_INFO = re.compile(r"([^/]+?)-([^-/]+)\.dist-info$")
NOT_RECORDED = "(not recorded)"
NO_VENV = "no venv given (torch is read from the spec's python.venv)"


def parse_os_release(output: str, rc: int) -> OsRelease | Unknown:
    """``cat /etc/os-release`` -> :class:`OsRelease` (needs ``ID`` and ``VERSION_ID``)."""
    if (bad := failure("cat /etc/os-release", output, rc)) is not None:
        return bad
    fields = dict(_os_release_pairs(output))
    if "ID" not in fields or "VERSION_ID" not in fields:
        return Unknown(unknown="/etc/os-release has no ID or VERSION_ID")
    return OsRelease(
        id=fields["ID"],
        version_id=fields["VERSION_ID"],
        codename=fields.get("VERSION_CODENAME"),
        pretty_name=fields.get("PRETTY_NAME"),
        id_like=tuple(fields.get("ID_LIKE", "").split()),
    )


def _os_release_pairs(output: str) -> list[tuple[str, str]]:
    pairs = []
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            try:
                pairs.append((key.strip(), " ".join(shlex.split(value))))
            except ValueError:
                continue
    return pairs


def parse_uname(output: str, rc: int) -> Kernel | Unknown:
    """``uname -a`` -> :class:`Kernel` with release and machine (no compiler)."""
    if (bad := failure("uname", output, rc)) is not None:
        return bad
    words = output.split()
    if len(words) < 4 or words[0] != "Linux":
        return Unknown(unknown=f"unexpected uname -a output: {first_line(output)}")
    machine = words[-2] if words[-1] == "GNU/Linux" else words[-1]
    return Kernel(release=words[2], machine=machine)


def parse_proc_version(output: str, rc: int) -> Kernel | Unknown:
    """``cat /proc/version`` -> :class:`Kernel` with release and compiler (FF-13)."""
    if (bad := failure("cat /proc/version", output, rc)) is not None:
        return bad
    match = re.match(r"Linux version (\S+)", output.strip())
    if match is None:
        return Unknown(unknown=f"unexpected /proc/version: {first_line(output)}")
    compiler = _COMPILER.search(output[match.end() :])
    return Kernel(release=match.group(1), compiler=" ".join(compiler.groups()) if compiler else None)


def merge_kernel(uname: Kernel | Unknown, proc: Kernel | Unknown) -> Kernel | Unknown:
    """Combine uname's release and machine with /proc/version's compiler."""
    if isinstance(uname, Unknown):
        return proc
    if isinstance(proc, Unknown):
        return uname
    return uname.model_copy(update={"compiler": proc.compiler})


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
    """``modinfo -F version nvidia`` (or full ``modinfo nvidia``) -> on-disk module version (FF-01)."""
    if (bad := failure("modinfo", output, rc)) is not None:
        return bad
    for line in output.splitlines():
        text = line.removeprefix("version:").strip()
        if re.fullmatch(r"\d+\.\d+(\.\d+)*", text):
            return DriverVersion(text)
    return Unknown(unknown=f"no nvidia module version in modinfo output: {first_line(output)}")


def parse_dpkg(output: str, rc: int) -> tuple[Package, ...] | Unknown:
    """``dpkg-query -W -f='${Package}\\t${Version}\\t${Status}\\n'`` -> NVIDIA-stack packages.

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
        if _PACKAGE_NAME.search(fields[0]) and not fields[2].endswith("not-installed"):
            packages.append(Package(name=fields[0], version=fields[1], status=fields[2]))
    return tuple(packages)


def parse_cuda_dirs(output: str, rc: int) -> CudaToolkits | Unknown:
    """``ls -la /usr/local/`` (plus our ``resolved cuda -> X`` line) -> installed toolkits."""
    if (bad := failure("ls /usr/local", output, rc)) is not None:
        return bad
    versions: set[DottedVersion] = set()
    target: str | None = None
    for line in output.splitlines():
        words = line.split()
        if line.startswith("resolved cuda -> "):
            target = line.removeprefix("resolved cuda -> ").strip()
        elif len(words) >= 9 and _CUDA_DIR.match(words[8]) and line[0] in "dl":
            versions.add(DottedVersion(words[8].removeprefix("cuda-")))
        elif len(words) >= 11 and words[8] == "cuda" and words[9] == "->" and target is None:
            target = words[10]
    return CudaToolkits(installed=tuple(sorted(versions)), default_target=target)


def parse_nvcc(output: str, rc: int) -> tuple[DottedVersion, DottedVersion] | Unknown:
    """``nvcc --version`` -> (release ``13.0``, full version ``13.0.88``)."""
    if (bad := failure("nvcc", output, rc)) is not None:
        return bad
    match = _NVCC.search(output)
    if match is None:
        return Unknown(unknown=f"no 'release X.Y, VX.Y.Z' in nvcc output: {first_line(output)}")
    return DottedVersion(match.group(1)), DottedVersion(match.group(2))


def merge_cuda(
    dirs: CudaToolkits | Unknown, nvcc: tuple[DottedVersion, DottedVersion] | Unknown
) -> CudaToolkits | Unknown:
    """Add nvcc's versions to the toolkit directories; no nvcc is not an unknown."""
    if isinstance(dirs, Unknown) or isinstance(nvcc, Unknown):
        return dirs
    return dirs.model_copy(update={"nvcc_release": nvcc[0], "nvcc_version": nvcc[1]})


def parse_torch(output: str, rc: int, venv: str | None = None) -> Torch | Unknown:
    """Torch probe (or the fixture's real import) ``key value`` lines -> :class:`Torch`.

    Reads ``venv``, ``python``, ``torch``, ``cuda`` and, when torch was imported,
    ``arch_list`` and ``count``. Without a ``venv`` line (a capture made by importing
    torch) the venv is the ``venv`` argument, else ``"(not recorded)"``.
    """
    if rc == NOT_FOUND_RC:
        return Unknown(unknown=f"no python in the venv ({first_line(output)})")
    said = [line.strip() for line in output.splitlines() if line.startswith("torch: ")]
    if rc != 0 and said:
        return Unknown(unknown=said[0])
    if (bad := failure("torch probe", output, rc)) is not None:
        return bad
    values = dict(_key_values(output))
    if "torch" not in values:
        return Unknown(unknown=f"no torch version in probe output: {first_line(output)}")
    return Torch(
        venv=values.get("venv", venv or NOT_RECORDED),
        version=values["torch"],
        cuda=None if values.get("cuda", "None") == "None" else values["cuda"],
        python=values["python"].split()[0] if values.get("python") else None,
        arch_list=_literal_tuple(values.get("arch_list")),
        device_count=int(values["count"]) if values.get("count", "").isdigit() else None,
    )


def _key_values(output: str) -> list[tuple[str, str]]:
    return [(k, v.strip()) for k, _, v in (line.partition(" ") for line in output.splitlines()) if k]


def _literal_tuple(text: str | None) -> tuple[str, ...] | None:
    try:
        value = ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError):
        return None
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else None


def parse_venv(output: str, rc: int) -> Venv | Unknown:
    """Venv probe (``path X``, pyvenv.cfg, dist-info paths) -> :class:`Venv`.

    The interpreter comes from pyvenv.cfg ``version`` (venv, uv) or ``version_info``
    (virtualenv writes ``3.12.3.final.0``); names are normalised as PEP 503 says.
    """
    path = next((line[5:].strip() for line in output.splitlines() if line.startswith("path ")), "")
    if rc != 0 and "pyvenv.cfg" in output:
        return Unknown(unknown=f"no virtual environment at {path} (no pyvenv.cfg)")
    if (bad := failure("venv probe", output, rc)) is not None:
        return bad
    config = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in output.splitlines())}
    version = config.get("version") or config.get("version_info") or ""
    python = _LEADING_VERSION.match(version)
    found = (_DIST_INFO.search(line) for line in output.splitlines())
    return Venv(
        path=path,
        python=DottedVersion(python.group(0)) if python else None,
        distributions=dict(_distribution(m) for m in found if m),
    )


def _distribution(match: re.Match[str]) -> tuple[str, str]:
    return re.sub(r"[-_.]+", "-", match.group(1)).lower(), match.group(2)
