"""Pure parsers for nvidia-smi: ``--query-gpu`` CSV and the ``topo -m`` matrix.

Formats follow NVIDIA's nvidia-smi documentation and the outputs captured on an
H200 (``shared/fixtures/h200-ubuntu2404/query-gpu.txt``, ``topo-m.txt``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from typing import Any

from provision.detect.facts import Gpu, Topology, Unknown
from provision.detect.failure import failure, first_line
from provision.versions import DottedVersion

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU = re.compile(r"^GPU\d+$")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_UNITS = re.compile(r"\s*(MiB|W|C|%|MHz)$")
_MISSING = {"", "N/A", "[N/A]", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]"}
_NO_DEVICES = "No devices were found"


def _number(text: str) -> float:
    return float(_UNITS.sub("", text))


def _enabled(text: str) -> bool:
    if text not in ("Enabled", "Disabled"):
        raise ValueError(f"expected Enabled or Disabled, got {text!r}")
    return text == "Enabled"


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
