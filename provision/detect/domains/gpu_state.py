"""A GPU's runtime settings as ``nvidia-smi -q`` shows them: persistence, power limits, clocks,
compute mode, ECC and MIG mode (current and pending), and the card's own limits.

Read from the same one parse of ``nvidia-smi -q`` as the fabric state and health
(:func:`provision.detect.domains.gpu.parse_nvidia_smi_q`). Section and field names follow
nvidia-smi(1) ("GPU Power Readings" from R535, "Power Readings" with ``Enforced Power Limit``
before; "Applications Clocks", "Default Applications Clocks", "Max Clocks", "Compute Mode",
"ECC Mode", "MIG Mode", "GPU Virtualization Mode") and the H200 capture in tests/fixtures/raw.
The limits are the card's own NVML values (``nvmlDeviceGetPowerManagementLimitConstraints``,
``nvmlDeviceGetMaxClockInfo``), which the planner checks the spec's settings against.
"""

from __future__ import annotations

import functools
import re

from pydantic import Field

from provision.models import Frozen

_NUMBER = re.compile(r"^(\d{1,6}(?:\.\d{1,3})?)\s*(W|MHz)$")


def section(block: str, title: str) -> str:
    """The indented body under the line ``title`` (its deeper-indented lines), or ''."""
    lines, depths, first = _indexed(block)
    start = first.get(title)
    if start is None:
        return ""
    depth, body = depths[start] or 0, []  # a title line is never blank
    for nxt, nxt_depth in zip(lines[start + 1 :], depths[start + 1 :], strict=True):
        if nxt_depth is not None and nxt_depth <= depth:
            break
        body.append(nxt)
    return "\n".join(body)


@functools.lru_cache(maxsize=64)
def _indexed(block: str) -> tuple[list[str], list[int | None], dict[str, int]]:
    """``block``'s lines, each one's indent (None for a blank line), and the first line of each
    stripped text: read once per block, since one GPU block is searched for a dozen sections."""
    lines = block.splitlines()
    depths = [len(line) - len(line.lstrip()) if line.strip() else None for line in lines]
    first: dict[str, int] = {}
    for i, line in enumerate(lines):
        first.setdefault(line.strip(), i)
    return lines, depths, first


def field(body: str, name: str) -> str | None:
    """The value of the first ``name : value`` line of ``body`` at any depth, stripped; None if absent."""
    match = search_from(body, name, _field_pattern(name))
    return match.group(1) if match else None


@functools.lru_cache(maxsize=512)
def _field_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"^\s*{re.escape(name)}\s*:\s*(.*?)\s*$", re.MULTILINE)


def search_from(text: str, literal: str, pattern: str | re.Pattern[str]) -> re.Match[str] | None:
    """The first match of the multi-line ``pattern`` (text, or compiled with ``re.MULTILINE``),
    which opens with ``^`` and whitespace before ``literal``: searched from the line of the last
    non-blank text before ``literal`` first appears, where any match has to start, not from the top
    of a block of hundreds of lines."""
    at = text.find(literal)
    if at < 0:
        return None
    start = text.rfind("\n", 0, len(text[:at].rstrip())) + 1
    compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, re.MULTILINE)
    return compiled.search(text, start)


def _top(body: str, name: str) -> str | None:
    """Like :func:`field`, only among a GPU block's own fields (the shallowest indented lines; the
    block's first line is its bus id)."""
    own = _own_fields(body)
    return None if own is None else field(own, name)


@functools.lru_cache(maxsize=64)
def _own_fields(body: str) -> str | None:
    """The shallowest indented lines of a GPU block (after its bus id line), None when it has none."""
    lines = [line for line in body.splitlines()[1:] if line.strip() and line[:1].isspace()]
    if not lines:
        return None
    depth = min(len(line) - len(line.lstrip()) for line in lines)
    return "\n".join(line for line in lines if len(line) - len(line.lstrip()) == depth)


def _amount(text: str | None, unit: str) -> float | None:
    """``700.00 W`` -> 700.0, ``1980 MHz`` -> 1980.0; None for N/A or another unit."""
    match = _NUMBER.match(text or "")
    return float(match.group(1)) if match and match.group(2) == unit else None


def _mode(text: str | None) -> bool | None:
    return {"Enabled": True, "Disabled": False}.get(text or "")


class PowerLimits(Frozen):
    """One GPU's power limits in W; None where nvidia-smi shows N/A.

    Attributes:
        enforced_w: The limit in force (``Current Power Limit``, ``Enforced Power Limit`` before R535).
        requested_w: The limit last set (``Requested Power Limit``, ``Power Limit`` before R535).
        default_w: ``Default Power Limit``, the board's own.
        min_w: ``Min Power Limit``: the lowest ``nvidia-smi -pl`` accepts.
        max_w: ``Max Power Limit``: the highest ``nvidia-smi -pl`` accepts.
    """

    enforced_w: float | None = None
    requested_w: float | None = None
    default_w: float | None = None
    min_w: float | None = None
    max_w: float | None = None


class Clocks(Frozen):
    """A (graphics, memory) clock pair in MHz; either None where N/A."""

    graphics_mhz: float | None = None
    memory_mhz: float | None = None


class GpuState(Frozen):
    """One GPU's runtime settings and the limits they are checked against (``nvidia-smi -q``).

    Attributes:
        bdf: Domain:bus:device.function, lower case (``0000:00:06.0``).
        index: nvidia-smi's index (its order in ``-q``, the same as ``--query-gpu``'s).
        uuid: ``GPU UUID``.
        product_name: ``Product Name`` (``NVIDIA H200``).
        device_id: PCI device id, lower-case hex without the vendor (``2335`` from ``0x233510DE``).
        virtualization: ``GPU Virtualization Mode / Virtualization Mode`` (``Pass-Through``, ``None``).
        persistence: ``Persistence Mode`` Enabled.
        power: The power limits.
        applications_clocks: ``Applications Clocks`` (what ``-ac`` set).
        default_applications_clocks: ``Default Applications Clocks``.
        max_clocks: ``Max Clocks``: the highest graphics and memory clocks the card runs.
        compute_mode: ``Compute Mode`` (``Default``, ``Exclusive_Process``, ``Prohibited``).
        ecc_current, ecc_pending: ``ECC Mode`` Current and Pending; None: the card has no ECC mode.
        mig_current, mig_pending: ``MIG Mode`` Current and Pending; None: the card has no MIG mode.
    """

    bdf: str
    index: int = Field(ge=0)
    uuid: str | None = None
    product_name: str | None = None
    device_id: str | None = None
    virtualization: str | None = None
    persistence: bool | None = None
    power: PowerLimits = PowerLimits()
    applications_clocks: Clocks = Clocks()
    default_applications_clocks: Clocks = Clocks()
    max_clocks: Clocks = Clocks()
    compute_mode: str | None = None
    ecc_current: bool | None = None
    ecc_pending: bool | None = None
    mig_current: bool | None = None
    mig_pending: bool | None = None

    @property
    def name(self) -> str:
        """``GPU 0 (NVIDIA H200, 0000:00:06.0)``: how plan and verify name it."""
        return f"GPU {self.index} ({self.product_name or 'unnamed'}, {self.bdf})"

    @property
    def passthrough(self) -> bool:
        """The GPU is passed through to this virtual machine: a GPU reset is not offered here, a
        MIG mode change needs the VM rebooted (NVML ``nvmlDeviceSetMigMode``)."""
        return self.virtualization == "Pass-Through"


def _power(block: str) -> PowerLimits:
    body = section(block, "GPU Power Readings") or section(block, "Power Readings")
    return PowerLimits(
        enforced_w=_amount(field(body, "Current Power Limit") or field(body, "Enforced Power Limit"), "W"),
        requested_w=_amount(field(body, "Requested Power Limit") or field(body, "Power Limit"), "W"),
        default_w=_amount(field(body, "Default Power Limit"), "W"),
        min_w=_amount(field(body, "Min Power Limit"), "W"),
        max_w=_amount(field(body, "Max Power Limit"), "W"),
    )


def _clocks(block: str, title: str) -> Clocks:
    body = section(block, title)
    return Clocks(
        graphics_mhz=_amount(field(body, "Graphics"), "MHz"), memory_mhz=_amount(field(body, "Memory"), "MHz")
    )


def _device_id(block: str) -> str | None:
    match = re.fullmatch(r"0x([0-9A-Fa-f]{4})10DE", field(section(block, "PCI"), "Device Id") or "")
    return match.group(1).lower() if match else None


def parse_state(bdf: str, index: int, block: str) -> GpuState:
    """One ``GPU <bdf>`` block of ``nvidia-smi -q`` -> its :class:`GpuState` (never raises)."""
    mig, ecc = section(block, "MIG Mode"), section(block, "ECC Mode")
    virtualization = section(block, "GPU Virtualization Mode")
    mode = _top(block, "Compute Mode")
    return GpuState(
        bdf=bdf,
        index=index,
        uuid=_top(block, "GPU UUID"),
        product_name=_top(block, "Product Name"),
        device_id=_device_id(block),
        virtualization=field(virtualization, "Virtualization Mode"),
        persistence=_mode(_top(block, "Persistence Mode")),
        power=_power(block),
        applications_clocks=_clocks(block, "Applications Clocks"),
        default_applications_clocks=_clocks(block, "Default Applications Clocks"),
        max_clocks=_clocks(block, "Max Clocks"),
        compute_mode=mode
        if mode in ("Default", "Exclusive_Process", "Prohibited", "Exclusive_Thread")
        else None,
        ecc_current=_mode(field(ecc, "Current")),
        ecc_pending=_mode(field(ecc, "Pending")),
        mig_current=_mode(field(mig, "Current")),
        mig_pending=_mode(field(mig, "Pending")),
    )
