"""Container runtimes, their NVIDIA configuration and the CDI specs they read (spec ``containers:``).

Probes: each runtime's ``--version`` (docker, containerd, podman); one read of the files
``nvidia-ctk runtime configure`` writes (``/etc/docker/daemon.json``, containerd's
``config.toml`` and its ``conf.d/99-nvidia.toml`` drop-in) and of the ``/dev/char`` udev rule;
every CDI spec in ``/etc/cdi`` and ``/var/run/cdi`` (the CDI spec's two standard directories);
the ``nvidia-cdi-refresh`` units' state from ``systemctl show``.

Sources: NVIDIA Container Toolkit install guide ("Configuring Docker", "Configuring containerd":
the runtime entry and the drop-in, https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html);
its CDI page (``/var/run/cdi/nvidia.yaml`` written by ``nvidia-cdi-refresh``,
https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html); the
CDI specification (``cdiVersion``, ``kind``, ``devices[].name``, ``containerEdits.mounts[].hostPath``,
spec directories ``/etc/cdi`` and ``/var/run/cdi``,
https://github.com/cncf-tags/container-device-interface/blob/main/SPEC.md); systemctl(1) ``show``.
Every parser returns a value or an Unknown with the reason; none raises.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from pydantic import Field

from provision.detect.fact import Derive, Fact, Parsed, Unknown, failure, first_line
from provision.models import Frozen
from provision.versions import Dotted, DottedVersion

RUNTIMES = ("docker", "containerd", "podman")
"""The runtimes ``containers.runtime`` names, each probed by ``<runtime> --version``."""
DOCKER_CONFIG = "/etc/docker/daemon.json"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
DEV_CHAR_RULE = "/lib/udev/rules.d/71-nvidia-dev-char.rules"
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
REFRESH_UNITS = ("nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service")
MAX_FILE_BYTES = 1 << 20
"""Bytes of one configuration file or CDI spec read (an NVIDIA spec for 8 GPUs is ~40 KiB)."""
_MARK = "=== "
_ABSENT = "=== absent "
_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)?)")
_DRIVER_LIB = re.compile(r"/lib(?:cuda|nvidia-ml)\.so\.(\d+\.\d+(?:\.\d+)?)$")


class RuntimeVersion(Frozen):
    """A runtime's ``--version`` line and the version in it."""

    version: Dotted
    line: str


def parse_runtime_version(tool: str, output: str, rc: int) -> RuntimeVersion | Unknown:
    """``Docker version 26.1.5+dfsg1, build a72d7cd`` / ``containerd github.com/containerd/containerd
    1.7.24~ds1 ...`` / ``podman version 5.4.2`` -> the first dotted version after the program's name."""
    if (bad := failure(tool, output, rc)) is not None:
        return bad
    line = first_line(output)
    found = _VERSION.search(line.split(" ", 1)[1] if " " in line else "")
    if found is None:
        return Unknown(unknown=f"{tool} --version: no version in {line!r}")
    return RuntimeVersion(version=DottedVersion(found.group(1)), line=line)


def _version_fact(tool: str) -> type[Fact[RuntimeVersion]]:
    """The ``<tool> --version`` fact (docker's is the client; Debian's docker.io ships both)."""

    def parse(output: str, rc: int) -> RuntimeVersion | Unknown:
        return parse_runtime_version(tool, output, rc)

    body = {"id": f"{tool}-version", "argv": (tool, "--version"), "parse": staticmethod(parse)}
    return type(f"{tool.capitalize()}VersionFact", (Fact,), {**body, "__doc__": f"``{tool} --version``."})


DockerVersionFact = _version_fact("docker")
ContainerdVersionFact = _version_fact("containerd")
PodmanVersionFact = _version_fact("podman")


class RuntimeConfig(Frozen):
    """What a runtime's configuration says about NVIDIA's runtime.

    Attributes:
        present: The configuration file exists.
        nvidia_runtime: It (or, for containerd, the drop-in it imports) names a runtime ``nvidia``.
        cdi_enabled: Docker's ``features.cdi`` / containerd's ``enable_cdi`` is true; None when unset.
        problem: Why the file could not be read as its format; None when it could.
    """

    present: bool
    nvidia_runtime: bool = False
    cdi_enabled: bool | None = None
    problem: str | None = None


class ContainerConfig(Frozen):
    """The runtimes' files as read, and the ``/dev/char`` udev rule's text (None: absent)."""

    docker: RuntimeConfig
    containerd: RuntimeConfig
    dev_char_rule: str | None = None


def _sections(output: str) -> dict[str, str | None]:
    """``=== PATH`` sections of the probe's output: path -> text, None for ``=== absent PATH``."""
    found: dict[str, str | None] = {}
    current: str | None = None
    lines: list[str] = []
    for line in [*output.splitlines(), _MARK]:
        if not line.startswith(_MARK):
            lines.append(line)
            continue
        if current is not None:
            found[current] = "\n".join(lines)
        lines, current = [], None
        if line.startswith(_ABSENT):
            found[line.removeprefix(_ABSENT).strip()] = None
        elif line.strip() != _MARK.strip():
            current = line.removeprefix(_MARK).strip()
    return found


def _cat(paths: tuple[str, ...]) -> tuple[str, ...]:
    script = (
        f'for f in "$@"; do if [ -f "$f" ]; then echo "{_MARK}$f"; head -c {MAX_FILE_BYTES} "$f"; echo; '
        f'else echo "{_ABSENT}$f"; fi; done'
    )
    return ("sh", "-c", script, "sh", *paths)


def _docker(text: str | None) -> RuntimeConfig:
    if text is None:
        return RuntimeConfig(present=False)
    try:
        doc = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError) as exc:
        return RuntimeConfig(present=True, problem=f"{DOCKER_CONFIG} is not JSON: {str(exc)[:120]}")
    if not isinstance(doc, dict):
        return RuntimeConfig(present=True, problem=f"{DOCKER_CONFIG} is not a JSON object")
    runtimes = doc.get("runtimes")
    features = doc.get("features")
    cdi = features.get("cdi") if isinstance(features, dict) else None
    return RuntimeConfig(
        present=True,
        nvidia_runtime=isinstance(runtimes, dict) and "nvidia" in runtimes,
        cdi_enabled=cdi if isinstance(cdi, bool) else None,
    )


def _toml(text: str, path: str) -> dict[str, Any] | str:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        return f"{path} is not TOML: {str(exc)[:120]}"


def _walk(node: Any, depth: int = 0) -> tuple[bool, bool | None]:
    """(a ``runtimes.nvidia`` table exists, the ``enable_cdi`` value seen) anywhere in a TOML tree."""
    if not isinstance(node, dict) or depth > 32:
        return False, None
    runtimes = node.get("runtimes")
    nvidia = isinstance(runtimes, dict) and "nvidia" in runtimes
    cdi = node.get("enable_cdi") if isinstance(node.get("enable_cdi"), bool) else None
    for child in node.values():
        more, seen = _walk(child, depth + 1)
        nvidia, cdi = nvidia or more, cdi if cdi is not None else seen
    return nvidia, cdi


def _imported(config: dict[str, Any]) -> bool:
    imports = config.get("imports")
    listed = imports if isinstance(imports, list) else []
    return any(
        isinstance(i, str) and i in (CONTAINERD_DROP_IN, "/etc/containerd/conf.d/*.toml") for i in listed
    )


def _containerd(config: str | None, drop_in: str | None) -> RuntimeConfig:
    if config is None and drop_in is None:
        return RuntimeConfig(present=False)
    main = _toml(config or "", CONTAINERD_CONFIG)
    if isinstance(main, str):
        return RuntimeConfig(present=True, problem=main)
    nvidia, cdi = _walk(main)
    if drop_in is not None and _imported(main):
        extra = _toml(drop_in, CONTAINERD_DROP_IN)
        if isinstance(extra, str):
            return RuntimeConfig(present=True, problem=extra)
        more, seen = _walk(extra)
        nvidia, cdi = nvidia or more, seen if seen is not None else cdi
    return RuntimeConfig(present=config is not None, nvidia_runtime=nvidia, cdi_enabled=cdi)


def parse_container_config(output: str, rc: int) -> ContainerConfig | Unknown:
    """The probe's sections -> what docker's and containerd's files say, and the udev rule."""
    if (bad := failure("sh", output, rc)) is not None:
        return bad
    files = _sections(output)
    if DOCKER_CONFIG not in files:
        return Unknown(unknown=f"the configuration read printed no section for {DOCKER_CONFIG}")
    return ContainerConfig(
        docker=_docker(files.get(DOCKER_CONFIG)),
        containerd=_containerd(files.get(CONTAINERD_CONFIG), files.get(CONTAINERD_DROP_IN)),
        dev_char_rule=files.get(DEV_CHAR_RULE),
    )


class ContainerConfigFact(Fact[ContainerConfig]):
    """The runtimes' NVIDIA configuration and the ``/dev/char`` udev rule."""

    id = "container-config"
    argv = _cat((DOCKER_CONFIG, CONTAINERD_CONFIG, CONTAINERD_DROP_IN, DEV_CHAR_RULE))
    parse = staticmethod(parse_container_config)


class CdiSpec(Frozen):
    """One CDI spec file.

    Attributes:
        path: Where it is.
        cdi_version: Its ``cdiVersion`` (``0.5.0``); None when unreadable.
        kind: Its ``kind`` (``nvidia.com/gpu``).
        devices: Its device names (``0``, ``GPU-<uuid>``, ``all``).
        driver: The driver version of the ``libcuda.so.<v>`` / ``libnvidia-ml.so.<v>`` it mounts.
        problem: Why it could not be read as a CDI spec; None when it could.
    """

    path: str
    cdi_version: str | None = None
    kind: str | None = None
    devices: tuple[str, ...] = ()
    driver: str | None = None
    problem: str | None = None


class CdiSpecs(Frozen):
    """Every spec file in the CDI directories."""

    specs: tuple[CdiSpec, ...] = ()

    def of_kind(self, kind: str) -> tuple[CdiSpec, ...]:
        """The specs defining devices of ``kind`` (``nvidia.com/gpu``)."""
        return tuple(s for s in self.specs if s.kind == kind)


_TOP = re.compile(r'^(cdiVersion|kind):[ \t]*["\']?([^"\'\s#]+)', re.MULTILINE)
_HOST_PATH = re.compile(r'hostPath:[ \t]*["\']?([^"\'\s]+)')
_NAME = re.compile(r'^  name:[ \t]*["\']?([^"\'\n]*?)["\']?[ \t]*$')


def _json_spec(path: str, text: str) -> CdiSpec:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return CdiSpec(path=path, problem=f"not JSON: {str(exc)[:120]}")
    if not isinstance(doc, dict):
        return CdiSpec(path=path, problem="not a CDI spec (the document is not an object)")
    devices = doc.get("devices")
    listed = devices if isinstance(devices, list) else []
    names = tuple(str(d["name"]) for d in listed if isinstance(d, dict) and "name" in d)
    paths = [m.group(1) for m in _HOST_PATH.finditer(text.replace('"hostPath":', "hostPath:"))]
    return _spec(path, doc.get("cdiVersion"), doc.get("kind"), names, paths)


def _yaml_names(text: str) -> tuple[str, ...]:
    """Device names of the top-level ``devices:`` list: the ``name:`` key of each item, at the
    items' own indent (``- name: "0"``, or ``name: all`` two columns right of the item's dash),
    not the keys of the edits nested in them."""
    names: list[str] = []
    inside, dash = False, -1
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("-"):
            inside, dash = line.startswith("devices:"), -1
            continue
        stripped = line.lstrip(" ")
        if not inside or not stripped:
            continue
        indent = len(line) - len(stripped)
        if dash < 0 and stripped.startswith("- "):
            dash = indent
        key = stripped[2:] if indent == dash and stripped.startswith("- ") else stripped
        if indent in (dash, dash + 2) and (m := _NAME.match("  " + key)):
            names.append(m.group(1))
    return tuple(names)


def _spec(path: str, version: Any, kind: Any, names: tuple[str, ...], paths: list[str]) -> CdiSpec:
    drivers = sorted({m.group(1) for p in paths if (m := _DRIVER_LIB.search(p))})
    found = version is not None and kind is not None
    return CdiSpec(
        path=path,
        cdi_version=str(version) if version is not None else None,
        kind=str(kind) if kind is not None else None,
        devices=names,
        driver=", ".join(drivers) or None,
        problem=None if found else "not a CDI spec (no cdiVersion or kind)",
    )


def parse_cdi_spec(path: str, text: str) -> CdiSpec:
    """One spec's version, kind, device names and the driver version its libraries carry.

    JSON specs are parsed; YAML specs are scanned line by line in the layout ``nvidia-ctk cdi
    generate`` writes (top-level ``cdiVersion:``/``kind:``, the ``devices:`` items' ``name:``,
    every ``hostPath:``), in time linear in the text: a spec the scan cannot read is reported by
    the runtime itself when it loads it (``nvidia-ctk --debug cdi list``).
    """
    if text.lstrip().startswith("{"):
        return _json_spec(path, text)
    top: dict[str, str] = {m.group(1): m.group(2) for m in _TOP.finditer(text)}
    paths = [m.group(1) for m in _HOST_PATH.finditer(text)]
    return _spec(path, top.get("cdiVersion"), top.get("kind"), _yaml_names(text), paths)


def parse_cdi_specs(output: str, rc: int) -> CdiSpecs | Unknown:
    """Every ``=== PATH`` section as a :class:`CdiSpec`; no section: no spec in either directory."""
    if (bad := failure("sh", output, rc)) is not None:
        return bad
    found = _sections(output)
    return CdiSpecs(specs=tuple(parse_cdi_spec(p, t) for p, t in found.items() if t is not None))


class CdiSpecsFact(Fact[CdiSpecs]):
    """Every CDI spec in ``/etc/cdi`` and ``/var/run/cdi`` (``*.yaml``, ``*.json``)."""

    id = "cdi-specs"
    argv = (
        "sh",
        "-c",
        "for f in /etc/cdi/*.yaml /etc/cdi/*.json /var/run/cdi/*.yaml /var/run/cdi/*.json; do "
        f'[ -f "$f" ] && {{ echo "{_MARK}$f"; head -c {MAX_FILE_BYTES} "$f"; echo; }}; done; true',
    )
    parse = staticmethod(parse_cdi_specs)


class UnitState(Frozen):
    """One unit's ``LoadState``, ``ActiveState``, ``UnitFileState`` and ``Result`` as ``systemctl
    show`` prints them (``LoadState=not-found``: no such unit file)."""

    load: str = ""
    active: str = ""
    enabled: str = ""
    result: str = ""

    @property
    def exists(self) -> bool:
        return self.load not in ("", "not-found")

    @property
    def failed(self) -> bool:
        return self.active == "failed" or self.result not in ("", "success")


class RefreshUnits(Frozen):
    """The ``nvidia-cdi-refresh`` units (``nvidia-cdi-refresh.path`` first)."""

    units: dict[str, UnitState] = Field(default_factory=dict)


def parse_refresh_units(output: str, rc: int) -> RefreshUnits | Unknown:
    """``systemctl show -p Id,LoadState,ActiveState,UnitFileState,Result UNIT...``: one block per
    unit, blocks separated by a blank line."""
    if (bad := failure("systemctl", output, rc)) is not None:
        return bad
    units: dict[str, UnitState] = {}
    for block in output.strip().split("\n\n"):
        keys = dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
        unit = keys.get("Id", "")
        if unit:
            units[unit] = UnitState(
                load=keys.get("LoadState", ""),
                active=keys.get("ActiveState", ""),
                enabled=keys.get("UnitFileState", ""),
                result=keys.get("Result", ""),
            )
    if not units:
        return Unknown(unknown=f"systemctl show: {first_line(output)}")
    return RefreshUnits(units=units)


class RefreshUnitsFact(Fact[RefreshUnits]):
    """The CDI refresh units' state (toolkit 1.18.0 and later ship them)."""

    id = "cdi-refresh"
    argv = ("systemctl", "show", "-p", "Id,LoadState,ActiveState,UnitFileState,Result", *REFRESH_UNITS)
    parse = staticmethod(parse_refresh_units)


class ContainerFacts(Frozen):
    """Everything the ``containers:`` component reads about runtimes and CDI.

    Attributes:
        runtimes: Runtime -> its ``--version``, or why it is unknown (``podman: not found``).
        config: The runtimes' files and the udev rule, or why they could not be read.
        cdi: The CDI specs, or why they could not be read.
        refresh: The refresh units' state, or why it is unknown (no systemd).
    """

    runtimes: dict[str, RuntimeVersion | Unknown]
    config: ContainerConfig | Unknown
    cdi: CdiSpecs | Unknown
    refresh: RefreshUnits | Unknown

    def runtime(self, name: str) -> RuntimeVersion | Unknown:
        return self.runtimes.get(name) or Unknown(unknown=f"{name}: not probed")


_VERSION_FACTS = (DockerVersionFact, ContainerdVersionFact, PodmanVersionFact)
FACTS: tuple[type[Fact[Any]], ...] = (*_VERSION_FACTS, ContainerConfigFact, CdiSpecsFact, RefreshUnitsFact)


def _containers(parsed: Parsed) -> ContainerFacts | None:
    if not parsed.any_ran(FACTS):
        return None  # a capture older than these probes: "not probed"
    return ContainerFacts(
        runtimes={name: parsed.of(fact) for name, fact in zip(RUNTIMES, _VERSION_FACTS, strict=True)},
        config=parsed.of(ContainerConfigFact),
        cdi=parsed.of(CdiSpecsFact),
        refresh=parsed.of(RefreshUnitsFact),
    )


FIELDS: dict[str, Derive] = {"containers": _containers}
