"""Where a checklist's observed state comes from: a facts file, a raw directory, or this machine.

``checklist_facts`` returns one :class:`~provision.detect.facts.Facts` per host (one document
per host), or an empty mapping for the blank paper checklist.
"""

from __future__ import annotations

import socket
from pathlib import Path

from provision.detect.facts import Facts
from provision.errors import FactsError, did_you_mean, name_list

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def checklist_facts(
    facts_file: Path | None, from_raw: Path | None, host: str | None
) -> tuple[dict[str, Facts], str | None]:
    """Facts per host name and a description of their origin for the document header.

    Args:
        facts_file: ``provision detect --json`` output: one host's object or a list of hosts.
        from_raw: A raw probe directory (``detect --save-raw`` or a capture).
        host: The host the document is for. It selects one host of a facts file, names the
            host a raw directory was captured on (else the directory's name, as ``plan
            --from-raw``), and without either must name this machine (``localhost`` or its host
            name), which is probed.

    Returns:
        ``({host: facts}, origin)``; ``({}, None)`` for the blank checklist.

    Raises:
        FactsError: Unreadable facts file or raw directory, ``host`` not in the file, or without a
            file or directory ``host`` not this machine (one line naming this machine's names: a
            document for a host nobody read would be the blank checklist under its name).
    """
    if facts_file is not None:
        return _select(read_facts_documents(facts_file), host), str(facts_file)
    if from_raw is not None:
        from provision.detect.runner import facts_from_raw, raw_host

        facts = facts_from_raw(from_raw, host=raw_host(from_raw, host))
        return {facts.host: facts}, f"raw probe outputs in {from_raw}"
    if host is not None:
        refuse_other_host(host)
        facts = detect_for_checklist(host)
        return {facts.host: facts}, f"probed on {host} when generated"
    return {}, None


def refuse_other_host(host: str) -> None:
    """Refuse ``--host`` naming another machine when nothing read it (see :func:`checklist_facts`).

    Raises:
        FactsError: One line: this machine's names, where another host's facts come from, and the
            closest of this machine's names when ``host`` looks like a typo of one.
    """
    if not is_this_machine(host):
        names = this_machine_names()
        raise FactsError(
            f"--host {host}: not this machine ({name_list(names)}); another host's checklist reads its "
            "facts: --facts FILE (`provision detect --json` there), --from-raw DIR, or "
            f"-i INVENTORY -l {host}{did_you_mean(host, names)}"
        )


def this_machine_names() -> list[str]:
    """The names :func:`is_this_machine` accepts: ``localhost`` and the host name, and the FQDN when
    it differs."""
    return list(dict.fromkeys((LOCAL_NAMES[0], socket.gethostname(), socket.getfqdn())))


def is_this_machine(host: str) -> bool:
    """``host`` names the machine provision runs on (``localhost``, or its host name / FQDN)."""
    names = {*LOCAL_NAMES, socket.gethostname(), socket.getfqdn()}
    return host in names or host.split(".")[0] == socket.gethostname().split(".")[0]


def detect_for_checklist(host: str) -> Facts:
    """Run the GPU and hardware probes here (not the package or venv probes) and parse them."""
    from provision.detect.registry import CHECKLIST_FACTS, facts_from_outputs, probes_of
    from provision.detect.runner import run_probes

    return facts_from_outputs(run_probes(probes_of(CHECKLIST_FACTS)), host=host)


def read_facts_documents(path: Path) -> list[Facts]:
    """Facts saved by ``provision detect --json``, every shape it has written
    (:func:`provision.app.read_facts_documents`).

    Raises:
        FactsError: Missing file, invalid JSON, or not facts.
    """
    from provision.app import read_facts_documents as read

    return read(path)


def _select(documents: list[Facts], host: str | None) -> dict[str, Facts]:
    by_host = {f.host: f for f in documents}
    if host is None:
        return by_host
    if host not in by_host:
        known = list(by_host)
        raise FactsError(
            f"host {host!r} is not in the facts file; it has: {name_list(known)}{did_you_mean(host, known)}"
        )
    return {host: by_host[host]}
