"""The GPUs a ``gpu:`` group names, resolved against the GPUs nvidia-smi shows. Pure.

A group names ``all`` or GPUs by nvidia-smi index, UUID (``GPU-...``) or PCI bus id
(``0000:41:00.0``; nvidia-smi's eight-digit domain is accepted too). Commands address a GPU by
its UUID where detection read one (an index can change when a GPU is added or falls off the bus;
``nvidia-smi -i`` takes a UUID, a bus id or an index: nvidia-smi(1)), else by the spec's own word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from provision.detect.unknown import Unknown

if TYPE_CHECKING:
    from collections.abc import Sequence

    from provision.detect.domains.gpu_state import GpuState
    from provision.detect.facts import Facts


@dataclass(frozen=True)
class Target:
    """One GPU a group names.

    Attributes:
        ident: What ``nvidia-smi -i`` gets: the UUID, else the bus id, else the index or the spec's word.
        label: How plan and verify name it (``GPU 0 (NVIDIA H200, 0000:00:06.0)``).
        state: What detection read of it; None where nvidia-smi could not be read.
    """

    ident: str
    label: str
    state: GpuState | None


def gpu_states(facts: Facts) -> tuple[GpuState, ...] | Unknown:
    """Every GPU's state from ``nvidia-smi -q``, or why it is unknown."""
    return facts.gpu_state


def resolve(selectors: str | Sequence[int | str], facts: Facts, count: int) -> tuple[list[Target], list[str]]:
    """The GPUs ``selectors`` name, and the selectors that name no GPU nvidia-smi shows.

    Args:
        selectors: ``"all"`` or indices, UUIDs and bus ids.
        facts: The machine's facts (``gpu_state``).
        count: The spec's ``gpus.count``: what ``all`` means while nvidia-smi cannot be read.
    """
    states = gpu_states(facts)
    if isinstance(states, Unknown):
        words = [str(i) for i in range(count)] if selectors == "all" else [str(s) for s in selectors]
        return [Target(ident=w, label=f"GPU {w}", state=None) for w in words], []
    if selectors == "all":
        return [_target(s) for s in states], []
    found: list[Target] = []
    missing: list[str] = []
    for sel in selectors:
        match = next((s for s in states if _names(sel, s)), None)
        if match is None:
            missing.append(str(sel))
        elif all(t.state is not match for t in found):
            found.append(_target(match))
    return found, missing


def past_count(selector: str, count: int) -> bool:
    """An index at or past ``gpus.count``: the spec rule already refused it (no second refusal)."""
    return selector.isdigit() and int(selector) >= count


def _target(state: GpuState) -> Target:
    return Target(ident=state.uuid or state.bdf, label=state.name, state=state)


def _names(selector: int | str, state: GpuState) -> bool:
    if isinstance(selector, int):
        return state.index == selector
    if selector.upper().startswith("GPU-"):
        return (state.uuid or "").lower() == selector.lower()
    from provision.detect.domains.pci import normalize_bdf  # only for a plan: validate never gets here

    return normalize_bdf(selector) == state.bdf
