"""What provision's own boot unit on disk tells an import that nvidia-smi does not: the locked
clocks it sets, and the order it lists the GPUs in.

The unit (:mod:`provision.components.gpu_unit`) is read only when it is provision's (its first
line is the unit's header): its ``ExecStart=`` lines are argv lists provision rendered from a spec,
settings per GPU by UUID (``nvidia-smi -i <uuid> -pl 450``), MIG per GPU by index
(``nvidia-smi mig -i 0 -cgi ...``). The plan compares the unit's whole text, so an imported spec
whose groups list the GPUs in another order than the unit plans rewriting it; the groups are put in
the unit's order where one of their orders gives it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any

from provision.components.gpu_unit import HEADER
from provision.detect.domains.gpu_runtime import GpuRuntime
from provision.detect.domains.gpu_state import GpuState
from provision.detect.facts import Unknown

_SETTING = re.compile(r"^ExecStart=nvidia-smi -i (\S+) -(pl|ac|lgc|lmc|c) (\S+)$", re.MULTILINE)
_MIG = re.compile(r"^ExecStart=-?nvidia-smi mig -i (\d{1,2}) ", re.MULTILINE)
_CLOCKS = re.compile(r"^(\d{1,5}),(\d{1,5})$")
_LOCKED = {"lgc": "locked_gpu_clocks", "lmc": "locked_memory_clocks"}
MAX_GROUPS = 6
"""Groups whose orders are tried (720 orders at most; more keep the index order)."""


@dataclass(frozen=True)
class BootUnit:
    """provision's boot unit as read back.

    Attributes:
        locked: GPU index -> its locked clocks (``locked_gpu_clocks`` / ``locked_memory_clocks`` ->
            ``{min_mhz, max_mhz}``).
        settings_order: The GPU indices in the order the unit sets their settings.
        mig_order: The GPU indices in the order the unit makes their MIG instances.
    """

    locked: dict[int, dict[str, Any]] = field(default_factory=dict)
    settings_order: tuple[int, ...] = ()
    mig_order: tuple[int, ...] = ()


def read_boot_unit(runtime: GpuRuntime | None, states: Sequence[GpuState]) -> BootUnit:
    """The unit on disk read back; empty when it is absent, unread or not provision's."""
    unit = None if runtime is None else runtime.boot_unit
    if unit is None or isinstance(unit, Unknown) or not unit.text.startswith(HEADER):
        return BootUnit()
    index = {s.uuid: s.index for s in states if s.uuid}
    locked: dict[int, dict[str, Any]] = {}
    order: list[int] = []
    for ident, flag, value in _SETTING.findall(unit.text):
        if ident not in index:
            continue
        _seen(order, index[ident])
        clocks = _CLOCKS.match(value)
        if flag in _LOCKED and clocks:
            low, high = int(clocks[1]), int(clocks[2])
            locked.setdefault(index[ident], {})[_LOCKED[flag]] = {"min_mhz": low, "max_mhz": high}
    mig: list[int] = []
    for gpu in _MIG.findall(unit.text):
        _seen(mig, int(gpu))
    return BootUnit(locked=locked, settings_order=tuple(order), mig_order=tuple(mig))


def _seen(order: list[int], index: int) -> None:
    if index not in order:
        order.append(index)


Group = dict[str, Any]


def in_unit_order(
    groups: list[Group], order: Sequence[int], everyone: Sequence[int], listed: Callable[[Group], bool]
) -> list[Group]:
    """``groups`` reordered so that the GPUs they name first, among those of the groups ``listed``
    says the unit has lines of, come in the unit's ``order``; unchanged when none does."""
    if not order or len(groups) > MAX_GROUPS:
        return groups
    for candidate in permutations(groups):
        if _first_seen(candidate, everyone, listed) == tuple(order):
            return list(candidate)
    return groups


def _first_seen(
    groups: Sequence[Group], everyone: Sequence[int], listed: Callable[[Group], bool]
) -> tuple[int, ...]:
    """The GPUs in the order the planner meets them (each group in turn, ``all`` in index order),
    keeping those some ``listed`` group names."""
    named = {i for g in groups if listed(g) for i in _gpus(g, everyone)}
    order: list[int] = []
    for group in groups:
        for index in _gpus(group, everyone):
            if index in named:
                _seen(order, index)
    return tuple(order)


def _gpus(group: Mapping[str, Any], everyone: Sequence[int]) -> Sequence[int]:
    gpus = group["gpus"]
    return everyone if gpus == "all" else [int(i) for i in gpus]
