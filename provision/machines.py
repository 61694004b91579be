"""One machine named twice: hosts of one command whose facts report the same machine ID.

An inventory can name one machine under two names (two ``ansible_connection=local`` entries, a
hostname and its IP). Run as two hosts, apply would start two package-manager transactions on one
box at once and verify would load its GPUs twice at once. The machine ID (machine-id(5),
:mod:`provision.detect.domains.identity`) tells: every host of a group that shares one is refused
before anything changes, each named with the others; the rest go on. An Unknown machine ID matches
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from provision.detect.domains.identity import SOURCE, MachineId
from provision.detect.facts import Facts

RULE = "same-machine"
"""The blocker's rule id."""
RULE_SOURCE = SOURCE
"""Where the rule comes from: machine-id(5), one ID per machine."""


def same_machines(ids: Mapping[str, object]) -> dict[str, str]:
    """Host -> the line refusing it, for every host whose machine ID another host's equals (pure).

    Args:
        ids: Host -> its machine ID (:class:`MachineId`) or anything else (an Unknown, None), which
            never matches; in inventory order.

    Returns:
        ``{"gpu2": "the same machine as gpu1 (machine-id 4f1c9a0e…): name it once in the inventory"}``,
        an entry for each host of each group of two or more; empty when all IDs differ.
    """
    groups: dict[str, list[str]] = {}
    for host, found in ids.items():
        if isinstance(found, MachineId):
            groups.setdefault(found.digest, []).append(host)
    return {
        host: _line([h for h in group if h != host], ids[host])
        for group in groups.values()
        if len(group) > 1
        for host in group
    }


def same_machines_of(facts: Mapping[str, Facts]) -> dict[str, str]:
    """:func:`same_machines` over each host's ``Facts.machine_id``."""
    return same_machines({host: f.machine_id for host, f in facts.items()})


def _line(others: list[str], found: object) -> str:
    short = found.short if isinstance(found, MachineId) else "?"
    return f"the same machine as {', '.join(others)} (machine-id {short}): name it once in the inventory"
