"""One machine named twice: hosts of one command whose facts report the same machine ID.

An inventory can name one machine under two names (two ``ansible_connection=local`` entries, a
hostname and its IP). Run as two hosts, apply would start two package-manager transactions on one
box at once and verify would load its GPUs twice at once. The machine ID (machine-id(5),
:mod:`provision.detect.domains.identity`) tells: every host of a group that shares one is refused
before anything changes, each named with the others; the rest go on. An Unknown machine ID matches
nothing, but two hosts of ``ansible_connection=local`` are this machine whatever their IDs say
(Ansible's local connection runs on the controller:
https://docs.ansible.com/ansible/latest/collections/ansible/builtin/local_connection.html), which
covers images whose ``/etc/machine-id`` is empty.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from provision.detect.domains.identity import SOURCE, MachineId
from provision.detect.facts import Facts

RULE = "same-machine"
"""The blocker's rule id."""
RULE_SOURCE = SOURCE
"""Where the rule comes from: machine-id(5), one ID per machine."""


LOCAL_SOURCE = "https://docs.ansible.com/ansible/latest/collections/ansible/builtin/local_connection.html"
"""Ansible's local connection: it runs on the controller, so every host using it is this machine."""


def same_machines(ids: Mapping[str, object], local: Collection[str] = ()) -> dict[str, str]:
    """Host -> the line refusing it, for every host whose machine ID another host's equals (pure).

    Args:
        ids: Host -> its machine ID (:class:`MachineId`) or anything else (an Unknown, None), which
            never matches; in inventory order.

    Returns:
        ``{"gpu2": "the same machine as gpu1 (machine-id 4f1c9a0e…): name it once in the inventory"}``,
        an entry for each host of each group of two or more; empty when all IDs differ.
        local: The hosts of ``ids`` reached through ``ansible_connection=local``: two or more are
            one machine (this one) whatever their IDs; such a line names the connection instead.
    """
    groups: dict[str, list[str]] = {}
    for host, found in ids.items():
        if isinstance(found, MachineId):
            groups.setdefault(found.digest, []).append(host)
    refused = {
        host: _line([h for h in group if h != host], ids[host])
        for group in groups.values()
        if len(group) > 1
        for host in group
    }
    here = [h for h in ids if h in local]
    if len(here) > 1:
        for host in here:
            others = ", ".join(h for h in here if h != host)
            refused.setdefault(
                host,
                f"the same machine as {others} (ansible_connection=local: this machine): "
                "name it once in the inventory",
            )
    return refused


def same_machines_of(facts: Mapping[str, Facts], local: Collection[str] = ()) -> dict[str, str]:
    """:func:`same_machines` over each host's ``Facts.machine_id``."""
    return same_machines({host: f.machine_id for host, f in facts.items()}, local)


def _line(others: list[str], found: object) -> str:
    short = found.short if isinstance(found, MachineId) else "?"
    return f"the same machine as {', '.join(others)} (machine-id {short}): name it once in the inventory"
