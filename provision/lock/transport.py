"""The lock module (``playbooks/library/provision_lock.py``) run on hosts over the direct transport.

A host that :func:`provision.detect.direct.route` reaches by one command (``local``, or ``ssh``,
as root: ``sudo -H -n`` unless the connection's user is root, as the lock play's ``become:
true``) gets the module's own text on the stdin of ``PYTHON -c BOOT``, followed by a call of one
of its functions; it prints the module's result as one JSON object. The play's check of what a
read relies on, the trust rule (``provision_trust``), runs first there as well, from the same
file the play runs (``playbooks/library/provision_trust.py``). The arguments travel as a JSON
literal on stdin: no value reaches the remote shell string, which is the fixed
:func:`provision.detect.direct.remote_command`.

The play costs ~2 s of ``ansible-playbook`` start-up around reading two files (issue 13's
figure for detection; issue 31: one front door, one transport).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision.resources import data_dir

TIMEOUT_S = 120.0
"""Seconds a host has to answer: an ssh connection, an interpreter's start and, for rollback,
``apt-cache madison`` of a lock's packages (well under a second on a warm cache); a host past it
is that host's failure, as a play's unreachable host is."""
TRUST_REFUSAL = "only root or the invoking user may own it or write it: docs/security.md#the-trust-rule"
"""What the play's ``provision_trust`` task adds to its refusal (its ``fail_json``), said the same here."""

_VERIFIED_CALL = """
def _provision_lock_direct(args):
    try:
        changed, found = verified(Path(args["directory"]), args["verify"])
    except (LockError, OSError) as exc:
        return {"failed": True, "msg": "provision lock: " + str(exc)}
    return {"changed": changed, "lock": found}
"""
"""``state: verified`` as the module's ``main`` does it: its result, or its failure."""

_READ_CALL = """
def _provision_lock_direct(args):
    trust = {"__name__": "provision_trust"}
    exec(compile(args["trust"], "provision_trust.py", "exec"), trust)
    directory = Path(args["directory"])
    for check, path in (("file", directory / "lock.json"), ("tree", directory / "locks")):
        why = trust["problem"](check, str(path), missing_ok=True)
        if why is not None:
            return {"failed": True, "msg": "not trusted: " + why + " (" + args["refusal"] + ")"}
    try:
        found = {"current": read_json(directory / "lock.json"), "history": history(directory)}
        return dict(found, changed=False, served=served(args["served"]))
    except (LockError, OSError) as exc:
        return {"failed": True, "msg": "provision lock: " + str(exc)}
"""
"""The play's trust task (``missing_ok``: no lock yet is no lock), then ``state: read`` as the
module's ``main`` does it: ``{current, history, served}``, or the failure."""


def _library(name: str) -> str:
    return (data_dir("playbooks") / "library" / name).read_text(encoding="utf-8")


def _program(call: str, args: Mapping[str, Any]) -> bytes:
    """The module's text, ``call`` (which defines ``_provision_lock_direct``), then its result
    on stdout as JSON; ``args`` inside a JSON string literal."""
    literal = repr(json.dumps(dict(args)))
    run = f"\nimport sys as _sys\njson.dump(_provision_lock_direct(json.loads({literal})), _sys.stdout)\n"
    return (_library("provision_lock.py") + call + run).encode("utf-8")


def read_program(served: list[str], directory: Path) -> bytes:
    """The program that reads a host's locks under ``directory`` (and the versions its package
    manager serves of ``served``), after the trust rule passed them."""
    args = {
        "directory": str(directory),
        "served": list(served),
        "trust": _library("provision_trust.py"),
        "refusal": TRUST_REFUSAL,
    }
    return _program(_READ_CALL, args)


def verified_program(result: Mapping[str, Any], directory: Path) -> bytes:
    """The program that records verify's ``result`` in the current lock under ``directory``."""
    return _program(_VERIFIED_CALL, {"verify": dict(result), "directory": str(directory)})


def run(
    commands: Mapping[str, list[str]], programs: Mapping[str, bytes], task: str
) -> dict[str, dict[str, Any] | str]:
    """Each host's program over its command (``commands``: :func:`provision.detect.direct.route`'s
    argv, as root), Ansible's default forks at a time; host -> the module's result, or why it
    failed in the lock play's words (``failed: <msg>``, ``host unreachable: ...``)."""
    from provision.detect import direct

    found: dict[str, dict[str, Any] | str] = {}

    def keep(host: str, answer: str | dict[str, Any]) -> None:
        failed = isinstance(answer, dict) and answer.get("failed")
        found[host] = f"failed: {answer.get('msg')}" if isinstance(answer, dict) and failed else answer

    jobs = {h: (argv, programs[h], TIMEOUT_S) for h, argv in commands.items()}
    direct.run_each(jobs, None, keep, task)
    return found
