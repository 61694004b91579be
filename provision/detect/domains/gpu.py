"""GPUs as nvidia-smi reports them: ``--query-gpu`` CSV, the ``topo -m`` matrix, ``nvidia-smi -q``.

Formats follow NVIDIA's nvidia-smi documentation ("nvidia-smi - NVIDIA System Management
Interface program", the man page shipped with the driver) and outputs captured on H200s
(tests/fixtures/raw). ``nvidia-smi -q`` is run and parsed once: the fabric state and the
per-GPU BAR1 and memory totals are both read from that one parse.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from typing import Any

from pydantic import Field

from provision.detect.domains.gpu_state import GpuState, parse_state, search_from
from provision.detect.domains.gpu_state import field as _field
from provision.detect.domains.gpu_state import section as _section
from provision.detect.domains.pci import normalize_bdf
from provision.detect.fact import Derive, Fact, Parsed, Unknown, failure, first_line, if_probed, value_of
from provision.models import Frozen
from provision.versions import Dotted, DottedVersion

QUERY_GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "vbios_version",
    "memory.total",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "temperature.gpu",
    "temperature.memory",
    "power.draw",
    "power.limit",
    "compute_cap",
    "mig.mode.current",
    "ecc.mode.current",
)
"""Fields of ``nvidia-smi --query-gpu``, the same as the captured H200 fixture."""

PATH_ORDER = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")
"""``nvidia-smi topo -m`` path classes, best first (any ``NV#`` counts as NV; an unknown code as SYS)."""

FAR_PATHS = ("NODE", "SYS")
"""Path classes that cross host bridges between NUMA nodes or sockets (docs/field-failures.md#ff-15)."""


class Gpu(Frozen):
    """One GPU as ``nvidia-smi --query-gpu`` reports it. Units in field names."""

    index: int = Field(ge=0)
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    memory_total_mib: int | None = Field(None, ge=0)
    compute_capability: Dotted | None = None
    pcie_gen_current: int | None = Field(None, ge=0)
    pcie_gen_max: int | None = Field(None, ge=0)
    pcie_width_current: int | None = Field(None, ge=0)
    pcie_width_max: int | None = Field(None, ge=0)
    persistence_mode: bool | None = None
    temperature_gpu_c: float | None = None
    temperature_memory_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    vbios_version: str | None = None
    mig_mode: bool | None = Field(
        None, description="MIG mode current: True when enabled, None when unsupported."
    )
    ecc_mode: bool | None = Field(
        None, description="ECC mode current: True when enabled, None when unsupported."
    )


def path_class(code: str) -> str:
    """A ``topo -m`` cell as its class in :data:`PATH_ORDER`: ``NV18`` -> ``NV``, unknown -> ``SYS``."""
    return "NV" if code.startswith("NV") else code if code in PATH_ORDER else "SYS"


def path_rank(code: str) -> int:
    """Position of ``code``'s class in :data:`PATH_ORDER` (0 best)."""
    return PATH_ORDER.index(path_class(code))


class Topology(Frozen):
    """``nvidia-smi topo -m``: path class between each pair of GPUs, and affinities.

    ``links[a][b]`` is the legend code for GPU a to GPU b: ``X``, ``NV#``, ``PIX``,
    ``PXB``, ``PHB``, ``NODE`` or ``SYS``.
    """

    gpus: tuple[str, ...]
    links: dict[str, dict[str, str]]
    cpu_affinity: dict[str, str] = Field(default_factory=dict)
    numa_affinity: dict[str, str] = Field(default_factory=dict)

    def pairs(self) -> dict[tuple[str, str], str]:
        """Each unordered GPU pair ``(a, b)`` with ``a < b`` and its raw code (``NV18``, ``SYS``)."""
        links = self.links
        return {(a, b): links[a][b] for a in self.gpus for b in self.gpus if a < b and b in links.get(a, {})}

    def worst_path(self) -> str | None:
        """The worst path class over all pairs (see :func:`path_class`), None with one GPU."""
        classes = [path_class(c) for c in self.pairs().values()]
        return max(classes, key=PATH_ORDER.index) if classes else None

    def pairs_worse_than(self, limit: str) -> list[str]:
        """``"GPU0-GPU1 SYS"`` for every pair whose class ranks after ``limit``."""
        bound = PATH_ORDER.index(path_class(limit))
        return [f"{a}-{b} {code}" for (a, b), code in self.pairs().items() if path_rank(code) > bound]

    def nvlinked(self, names: list[str]) -> bool:
        """Whether every two of the GPUs ``names`` (``GPU0``...) are joined by NVLink (an ``NV#`` cell)."""
        cell = [self.links.get(a, {}).get(b, "") for a in names for b in names if a != b]
        return all(c.startswith("NV") for c in cell)

    def far_pairs(self) -> list[str]:
        """``"GPU0-GPU1 SYS"`` for every pair on a :data:`FAR_PATHS` path, sorted."""
        return [f"{a}-{b} {c}" for (a, b), c in sorted(self.pairs().items()) if path_class(c) in FAR_PATHS]


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU = re.compile(r"^GPU\d+$")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_UNITS = re.compile(r"\s*(MiB|W|C|%|MHz)$")
_MISSING = {"", "N/A", "[N/A]", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]"}
_NO_DEVICES = "No devices were found"


def _number(text: str) -> float:
    value = float(_UNITS.sub("", text))
    if not math.isfinite(value):  # float() reads "inf" and "nan"; int(inf) raised OverflowError
        raise ValueError(f"not a finite number: {text!r}")
    return value


def _enabled(text: str) -> bool:
    if text not in ("Enabled", "Disabled"):
        raise ValueError(f"expected Enabled or Disabled, got {text!r}")
    return text == "Enabled"


def _state(text: str) -> bool | None:
    """``Enabled``/``Disabled`` as a bool; any other state (``N/A``, ``Pending``) as None."""
    return {"Enabled": True, "Disabled": False}.get(text)


# query-gpu column -> (Gpu field, converter); columns not listed are not in the model.
_COLUMNS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "index": ("index", int),
    "name": ("name", str),
    "uuid": ("uuid", str),
    "pci.bus_id": ("pci_bus_id", str),
    "driver_version": ("driver_version", str),
    "memory.total": ("memory_total_mib", lambda t: int(_number(t))),
    "compute_cap": ("compute_capability", DottedVersion),
    "pcie.link.gen.current": ("pcie_gen_current", int),
    "pcie.link.gen.max": ("pcie_gen_max", int),
    "pcie.link.width.current": ("pcie_width_current", int),
    "pcie.link.width.max": ("pcie_width_max", int),
    "persistence_mode": ("persistence_mode", _enabled),
    "temperature.gpu": ("temperature_gpu_c", _number),
    "temperature.memory": ("temperature_memory_c", _number),
    "power.draw": ("power_draw_w", _number),
    "power.limit": ("power_limit_w", _number),
    "vbios_version": ("vbios_version", str),
    "mig.mode.current": ("mig_mode", lambda t: _state(t)),
    "ecc.mode.current": ("ecc_mode", lambda t: _state(t)),
}


def parse_query_gpu(output: str, rc: int) -> tuple[Gpu, ...] | Unknown:
    """``nvidia-smi --query-gpu=... --format=csv`` (with header) -> one :class:`Gpu` per row.

    Units are stripped (``143771 MiB`` -> 143771, ``79.45 W`` -> 79.45) and
    ``[N/A]``/``[Not Supported]`` become None. "No devices were found" is zero GPUs.
    """
    if _NO_DEVICES in output:
        return ()
    if (bad := failure("nvidia-smi", output, rc)) is not None:
        return bad
    rows = list(csv.reader(output.strip().splitlines(), skipinitialspace=True))
    if not rows or not rows[0] or rows[0][0].strip() != "index":
        return Unknown(unknown=f"unexpected nvidia-smi --query-gpu output: {first_line(output)}")
    header = [_UNITS_HEADER.sub("", h).strip() for h in rows[0]]
    try:
        return tuple(_gpu(header, row) for row in rows[1:] if row)
    except ValueError as err:
        return Unknown(unknown=f"unexpected nvidia-smi --query-gpu output: {err}")


_UNITS_HEADER = re.compile(r"\s*\[[^\]]*\]$")


def _gpu(header: list[str], row: list[str]) -> Gpu:
    if len(row) != len(header):
        raise ValueError(f"{len(row)} columns for a {len(header)}-column header: {', '.join(row)[:120]}")
    fields: dict[str, Any] = {}
    for column, text in zip(header, row, strict=True):
        if column in _COLUMNS and text.strip() not in _MISSING:
            name, convert = _COLUMNS[column]
            fields[name] = convert(text.strip())
    if "index" not in fields or "name" not in fields:
        raise ValueError("a row without index or name")
    return Gpu(**fields)


def parse_topology(output: str, rc: int) -> Topology | Unknown:
    """``nvidia-smi topo -m`` -> GPU-to-GPU path classes and CPU/NUMA affinity.

    The header row names the device columns (``GPU0``..., ``NIC0`` or ``mlx5_0``...) then
    ``CPU Affinity``, ``NUMA Affinity`` and (newer drivers) ``GPU NUMA ID``. NIC
    rows and columns are skipped. Cells after the device columns are matched to
    those names ignoring empty cells, because nvidia-smi prints a doubled tab
    before ``GPU NUMA ID``.
    """
    if (bad := failure("nvidia-smi", output, rc)) is not None:
        return bad
    table = _matrix_lines(output)
    if not table:
        return Unknown(unknown=f"no GPU matrix in nvidia-smi topo -m output: {first_line(output)}")
    header, rows = table[0], table[1:]
    # Older drivers name NIC columns after the device (mlx5_0), so split at the first affinity column.
    split = next((i for i, cell in enumerate(header) if cell in _AFFINITY_COLUMNS), len(header))
    devices, extras = header[:split], header[split:]
    gpus = [d for d in devices if _GPU.match(d)]
    parsed = {row[0]: row[1:] for row in rows if row and row[0] in gpus}
    if not gpus or set(parsed) != set(gpus):
        return Unknown(unknown="nvidia-smi topo -m: the GPU rows do not match the header")
    return _topology(gpus, devices, extras, parsed)


def _matrix_lines(output: str) -> list[list[str]]:
    """Tab-split, ANSI-free lines from the header down to the first blank line."""
    lines = [_ANSI.sub("", line) for line in output.splitlines()]
    start = next((i for i, line in enumerate(lines) if re.search(r"\bGPU0\b", line)), None)
    if start is None:
        return []
    table = []
    for line in lines[start:]:
        if not line.strip():
            break
        table.append([cell.strip() for cell in line.split("\t")])
    table[0] = [cell for cell in table[0] if cell]
    return table


def _topology(
    gpus: list[str], devices: list[str], extras: list[str], rows: dict[str, list[str]]
) -> Topology | Unknown:
    links: dict[str, dict[str, str]] = {}
    cpu: dict[str, str] = {}
    numa: dict[str, str] = {}
    for gpu in gpus:
        cells = rows[gpu]
        if len(cells) < len(devices):
            return Unknown(unknown=f"nvidia-smi topo -m: short row for {gpu}")
        links[gpu] = {d: c for d, c in zip(devices, cells, strict=False) if _GPU.match(d)}
        named = dict(zip(extras, [c for c in cells[len(devices) :] if c], strict=False))
        if "CPU Affinity" in named:
            cpu[gpu] = named["CPU Affinity"]
        if "NUMA Affinity" in named:
            numa[gpu] = named["NUMA Affinity"]
    return Topology(gpus=tuple(gpus), links=links, cpu_affinity=cpu, numa_affinity=numa)


# --- nvidia-smi -q: one parse for the fabric state and the BAR1 / memory totals -------------------


class GpuHealth(Frozen):
    """What ``nvidia-smi -q`` says about one GPU's memory health and clocks, per GPU.

    None where the section or field is absent or ``N/A`` (older drivers, GPUs without row
    remapping). Source: nvidia-smi(1), sections "Remapped Rows", "ECC Errors", "Clocks Event
    Reasons" (named "Clocks Throttle Reasons" before driver 535).
    """

    bdf: str
    remapped_rows_pending: bool | None = Field(None, description="A row remap waits for a GPU reset.")
    remapping_failed: bool | None = Field(
        None, description="Remapping Failure Occurred: the GPU needs service."
    )
    dram_uncorrectable_volatile: int | None = Field(
        None, description="Uncorrectable DRAM ECC errors since load."
    )
    clock_events: tuple[str, ...] = Field(
        (), description="Clocks event reasons shown Active, e.g. HW Slowdown."
    )
    gsp_firmware: str | None = Field(
        None,
        description="GSP Firmware Version: the GSP firmware the driver loaded on this GPU (its own "
        "release, e.g. 580.159.04); None where N/A (no GSP firmware in use) or not shown.",
    )


class SmiGpu(Frozen):
    """One GPU's section of ``nvidia-smi -q``: what detection reads from it."""

    bdf: str = Field(description="Domain:bus:device.function, lower case, e.g. 0000:41:00.0.")
    product_brand: str | None = Field(None, description="Product Brand: NVIDIA, GeForce, Quadro, ...")
    product_architecture: str | None = Field(
        None, description="Product Architecture: Hopper, Ada Lovelace, ..."
    )
    memory_total_mib: int | None = Field(None, description="FB Memory Usage / Total, MiB.")
    bar1_total_mib: int | None = Field(None, description="BAR1 Memory Usage / Total, MiB.")
    fabric: tuple[str, str] | None = Field(None, description="Fabric (State, Status); None: no section.")
    health: GpuHealth | None = None
    state: GpuState | None = Field(None, description="Runtime settings and the card's limits.")


class SmiQuery(Frozen):
    """``nvidia-smi -q`` per GPU, in nvidia-smi's order; ``note`` is its first line."""

    gpus: tuple[SmiGpu, ...]
    note: str = ""


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


def parse_nvidia_smi_q(output: str, rc: int) -> SmiQuery | Unknown:
    """``nvidia-smi -q`` -> each GPU's BDF, product brand and architecture, memory and BAR1 totals,
    and fabric state.

    "No devices were found" (or any output without ``GPU <bdf>`` sections) is zero GPUs.
    """
    if (bad := failure("nvidia-smi", output, rc)) is not None:
        return bad
    gpus = []
    blocks = re.split(r"^GPU (?=[0-9A-Fa-f]+:)", output, flags=re.MULTILINE)[1:]
    for index, block in enumerate(blocks):
        bdf = normalize_bdf(block.split("\n", 1)[0])
        gpus.append(
            SmiGpu(
                bdf=bdf,
                product_brand=_field(block, "Product Brand"),
                product_architecture=_field(block, "Product Architecture"),
                memory_total_mib=_section_total(block, "FB Memory Usage"),
                bar1_total_mib=_section_total(block, "BAR1 Memory Usage"),
                fabric=_fabric(block),
                health=_health(bdf, block),
                state=parse_state(bdf, index, block),
            )
        )
    return SmiQuery(gpus=tuple(gpus), note=first_line(output))


def _yes(text: str | None) -> bool | None:
    return {"Yes": True, "No": False}.get(text or "")


def _health(bdf: str, block: str) -> GpuHealth:
    rows = _section(block, "Remapped Rows")
    volatile = _section(_section(block, "ECC Errors"), "Volatile")
    dram = _field(volatile, "DRAM Uncorrectable") or _field(volatile, "Double Bit ECC")
    events = _section(block, "Clocks Event Reasons") or _section(block, "Clocks Throttle Reasons")
    active = re.findall(r"^\s*(\S.*?)\s*:\s*Active\s*$", events, re.MULTILINE)
    return GpuHealth(
        bdf=bdf,
        remapped_rows_pending=_yes(_field(rows, "Pending")),
        remapping_failed=_yes(_field(rows, "Remapping Failure Occurred")),
        dram_uncorrectable_volatile=int(dram) if dram and dram.isascii() and dram.isdigit() else None,
        clock_events=tuple(active),
        gsp_firmware=_known(_field(block, "GSP Firmware Version")),
    )


def _known(text: str | None) -> str | None:
    """A field's value, None for ``N/A`` and friends."""
    return None if not text or text.startswith(("N/A", "[N/A]", "Not Supported", "[Not Supported]")) else text


def _section_total(block: str, section: str) -> int | None:
    match = search_from(block, section, rf"^\s*{re.escape(section)}\s*\n\s*Total\s*:\s*(\d+) MiB")
    return int(match.group(1)) if match else None


def _fabric(block: str) -> tuple[str, str] | None:
    match = search_from(block, "Fabric", r"^\s+Fabric\s*\n\s+State\s*:\s*(.+?)\s*\n\s+Status\s*:\s*(.+?)\s*$")
    return (match.group(1), match.group(2)) if match else None


def fabric_state(query: SmiQuery | Unknown) -> FabricState | Unknown:
    """The fabric state of every GPU, or why it cannot be read."""
    if isinstance(query, Unknown):
        return query
    if any(g.fabric is None for g in query.gpus):
        return Unknown(unknown="nvidia-smi -q shows no Fabric section (driver older than R470?)")
    return FabricState(states=tuple(g.fabric for g in query.gpus if g.fabric is not None))


# --- lspci -nn: NVIDIA PCI functions, NVSwitch among them -------------------------------------------


class PciDevice(Frozen):
    """One NVIDIA PCI function from ``lspci -nn -D -d 10de:``."""

    bdf: str = Field(description="Domain:bus:device.function, e.g. 0000:41:00.0.")
    class_code: str = Field(description="PCI class, e.g. 0302 (3D controller) or 0680 (bridge: NVSwitch).")
    device_id: str = Field(description="PCI device id, lower-case hex without 0x, e.g. 2335.")
    description: str = ""
    revision: str | None = Field(
        default=None, description="lspci's '(rev xx)', lower-case hex; ff: config space reads all ones."
    )

    @property
    def reads_all_ones(self) -> bool:
        """Config space read back as all ones (lspci ``rev ff``): the function no longer answers on
        the bus, so the host fabricates ~0 data (Linux ``PCI_ERROR_RESPONSE``,
        https://github.com/torvalds/linux/commit/57bdeef4716689d9b0e3571034d65cf420f6efcd)."""
        return self.revision == "ff"

    @property
    def is_nvswitch(self) -> bool:
        """NVSwitch functions show as NVIDIA 'Bridge' class 0680 (FF-03; leptonai/gpud PR #906)."""
        return self.class_code == "0680"

    @property
    def is_gpu(self) -> bool:
        return self.class_code in ("0300", "0302")


def parse_lspci(output: str, rc: int) -> tuple[PciDevice, ...] | Unknown:
    """Lines like ``0000:41:00.0 3D controller [0302]: NVIDIA Corporation GH100 [10de:2335] (rev a1)``."""
    if (bad := failure("lspci", output, rc)) is not None:
        return bad
    devices = []
    for line in output.splitlines():
        m = re.match(r"^(\S+)\s+(.*?)\s*\[([0-9a-f]{4})\]:\s*(.*?)\s*\[10de:([0-9a-f]{4})\]", line.strip())
        if m:
            rev = re.search(r"\(rev ([0-9a-fA-F]{2})\)", line)
            devices.append(
                PciDevice(
                    bdf=m[1],
                    class_code=m[3],
                    description=f"{m[2]}: {m[4]}",
                    device_id=m[5],
                    revision=rev[1].lower() if rev else None,
                )
            )
    return tuple(devices)


# --- The facts ---------------------------------------------------------------------------------------


class QueryGpuFact(Fact[tuple[Gpu, ...]]):
    """Every GPU's identity, link, memory, thermals and power: ``nvidia-smi --query-gpu``."""

    id = "query-gpu"
    argv = ("nvidia-smi", "--query-gpu=" + ",".join(QUERY_GPU_FIELDS), "--format=csv")
    # A GPU that has fallen off the bus can stall nvidia-smi for seconds before it fails.
    timeout = 20.0
    parse = staticmethod(parse_query_gpu)


class TopologyFact(Fact[Topology]):
    """GPU-to-GPU paths and CPU/NUMA affinity: ``nvidia-smi topo -m``."""

    id = "topo-m"
    argv = ("nvidia-smi", "topo", "-m")
    timeout = 20.0
    parse = staticmethod(parse_topology)


class SmiQueryFact(Fact[SmiQuery]):
    """``nvidia-smi -q``, parsed once for the fabric state and the BAR1 and memory totals."""

    id = "nvidia-smi-q"
    argv = ("nvidia-smi", "-q")
    timeout = 20.0
    parse = staticmethod(parse_nvidia_smi_q)


class NvidiaPciFact(Fact[tuple[PciDevice, ...]]):
    """NVIDIA PCI functions (GPUs, NVSwitches): ``lspci -nn -D -d 10de:``."""

    id = "lspci-nn"
    argv = ("lspci", "-nn", "-D", "-d", "10de:")
    parse = staticmethod(parse_lspci)


FACTS = (QueryGpuFact, TopologyFact, SmiQueryFact, NvidiaPciFact)


def _fabric_field(p: Parsed) -> FabricState | Unknown | None:
    if not p.has(SmiQueryFact):
        return None
    query = p.of(SmiQueryFact)
    return fabric_state(query)


def _health_field(p: Parsed) -> tuple[GpuHealth, ...] | Unknown | None:
    if not p.has(SmiQueryFact):
        return None
    query = p.of(SmiQueryFact)
    if isinstance(query, Unknown):
        return query
    return tuple(g.health for g in query.gpus if g.health is not None)


def _state_field(p: Parsed) -> tuple[GpuState, ...] | Unknown | None:
    if not p.has(SmiQueryFact):
        return None
    query = p.of(SmiQueryFact)
    if isinstance(query, Unknown):
        return query
    return tuple(g.state for g in query.gpus if g.state is not None)


FIELDS: dict[str, Derive] = {
    "gpu_health": _health_field,
    "gpu_state": _state_field,
    "gpus": value_of(QueryGpuFact),
    "topology": value_of(TopologyFact),
    "nvidia_pci": if_probed(NvidiaPciFact),
    "fabric": _fabric_field,
}
