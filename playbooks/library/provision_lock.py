#!/usr/bin/python3
"""Ansible module: provision's lock of what was applied, kept on the target.

Layout (root-owned, directories 0755, files 0644, every file replaced atomically):

    /var/lib/provision/lock.json          the current lock (a copy of the newest history entry)
    /var/lib/provision/locks/NNNN.json    every lock, numbered from 1

``state: write`` adds ``lock`` (a document from the controller: packages, spec, repository, ...)
as the next number, after reading the venv's wheels on this host: name and version from each
``*.dist-info`` directory name (PEP 427), the SHA-256 of its ``RECORD`` (which lists the SHA-256
of every installed file, PEP 376/627) and the archive hashes pip recorded in ``direct_url.json``
(PEP 610: only for wheels installed from a URL or file; pip records none for index installs).
Nothing in the venv is executed. A lock equal to the current one (ignoring its number, time,
run directory, tool version and verify result) is not added again: ``changed`` is false.

``state: verified`` records a verify result into the current lock (same number) when it was
made against the lock's spec.
``state: read`` returns ``{current, history}``; with ``served`` (package names) it also returns
the versions apt can install of each (``apt-cache madison``), for rollback's refusal.

This file is copied to the host by Ansible and run with its python3: standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

DOCUMENTATION = r"""
module: provision_lock
short_description: Keep provision's lock of applied versions on the host
description: See the module's docstring (write, verified, read).
options:
  state:
    description: write, verified or read.
    type: str
    choices: [write, verified, read]
    default: read
  lock:
    description: The lock document to add (state write).
    type: dict
  venv:
    description: The venv whose wheels are recorded (state write); none for no venv.
    type: str
  verify:
    description: The verify result to record in the current lock (state verified).
    type: dict
  served:
    description: Package names whose installable versions are returned (state read).
    type: list
    elements: str
    default: []
  directory:
    description: Where the lock lives.
    type: path
    default: /var/lib/provision
author: provision
"""

VOLATILE = ("number", "created_at", "run_dir", "provision_version", "verify")
"""Keys that do not make a lock different from the current one."""
PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
"""Debian policy 5.6.1 package names; anything else never reaches apt-cache."""
READ_LIMIT = 1 << 20


class LockError(Exception):
    """The lock directory cannot be trusted or written; the message says why."""


def check_directory(path: Path) -> None:
    """Raise LockError unless ``path`` is a real directory owned by the writer (root, under
    become) and writable by no one else: a lock another user could replace is not a lock."""
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise LockError(f"{path} is not a directory")
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise LockError(
            f"{path} must be owned by uid {os.geteuid()} and writable only by it "
            f"(found uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o})"
        )


def make_directory(path: Path) -> None:
    """Create ``path`` 0755 if missing, then check it (:func:`check_directory`)."""
    if not path.exists():
        path.mkdir(mode=0o755, parents=True)
        os.chmod(path, 0o755)
    check_directory(path)


def write_atomic(path: Path, document: dict[str, Any]) -> None:
    """Write ``document`` as JSON to ``path``, mode 0644: a temporary file renamed over it."""
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2, sort_keys=True)
            out.write("\n")
            out.flush()
            os.fchmod(out.fileno(), 0o644)
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> dict[str, Any] | None:
    """A lock file's document; None when absent, not a regular file, or not a JSON object."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > 16 * READ_LIMIT:
            return None
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # ValueError: also a number of 4300+ digits
        return None
    return value if isinstance(value, dict) else None


def history(directory: Path) -> list[dict[str, Any]]:
    """Every numbered lock under ``directory/locks``, oldest first."""
    locks = directory / "locks"
    if not locks.is_dir():
        return []
    found = [read_json(p) for p in sorted(locks.glob("[0-9][0-9][0-9][0-9].json"))]
    return [doc for doc in found if doc is not None and isinstance(doc.get("number"), int)]


def _sha256(path: Path) -> str | None:
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            return None
        digest = hashlib.sha256()
        with path.open("rb") as data:
            for chunk in iter(lambda: data.read(1 << 16), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _archive_hashes(dist_info: Path) -> dict[str, str]:
    """PEP 610 ``archive_info.hashes`` (or the older single ``hash``) from ``direct_url.json``."""
    document = read_json(dist_info / "direct_url.json") or {}
    archive = document.get("archive_info")
    if not isinstance(archive, dict):
        return {}
    hashes = archive.get("hashes")
    if isinstance(hashes, dict):
        return {str(k): str(v) for k, v in hashes.items()}
    if isinstance(archive.get("hash"), str) and "=" in archive["hash"]:
        name, _, value = archive["hash"].partition("=")
        return {name: value}
    return {}


def wheels(venv: str | None) -> list[dict[str, Any]]:
    """The venv's distributions: ``{name, version, record_sha256, hashes}``, sorted by name."""
    if not venv:
        return []
    found = []
    for dist_info in sorted(Path(venv).glob("lib*/python3*/site-packages/*.dist-info")):
        name, _, version = dist_info.name.removesuffix(".dist-info").rpartition("-")
        if not name or not version:
            continue
        found.append(
            {
                "name": re.sub(r"[-_.]+", "-", name).lower(),
                "version": version,
                "record_sha256": _sha256(dist_info / "RECORD"),
                "hashes": _archive_hashes(dist_info),
            }
        )
    return sorted(found, key=lambda w: w["name"])


def same(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Whether two locks record the same state (:data:`VOLATILE` keys ignored)."""
    if a is None:
        return False
    return _stable(a) == _stable(b)


def _stable(lock: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in lock.items() if k not in VOLATILE}


def write(directory: Path, lock: dict[str, Any], venv: str | None) -> tuple[bool, dict[str, Any]]:
    """Add ``lock`` (with this host's wheels) as the next number; (changed, the current lock)."""
    make_directory(directory)
    make_directory(directory / "locks")
    document = dict(lock)
    document["venv"] = {"path": venv, "wheels": wheels(venv)} if venv else None
    current = read_json(directory / "lock.json")
    if same(current, document):
        assert current is not None
        return False, current
    previous = history(directory)
    document["number"] = max((d["number"] for d in previous), default=0) + 1
    write_atomic(directory / "locks" / f"{document['number']:04d}.json", document)
    write_atomic(directory / "lock.json", document)
    return True, document


def verified(directory: Path, result: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    """Record ``result`` as the current lock's verify result (lock and its history entry).

    Only when the result is for the lock's own spec (``spec_digest`` equal): a verify against
    another spec says nothing about this lock. Returns (changed, the lock or None when none fits).
    """
    current = read_json(directory / "lock.json")
    if current is None or not isinstance(current.get("number"), int):
        return False, None
    if current.get("spec_digest") != result.get("spec_digest"):
        return False, None
    check_directory(directory)
    if current.get("verify") == result:
        return False, current
    current["verify"] = result
    write_atomic(directory / "locks" / f"{current['number']:04d}.json", current)
    write_atomic(directory / "lock.json", current)
    return True, current


def served(names: list[str]) -> dict[str, list[str]]:
    """Versions the package manager can install of each package; unknown names map to [].

    Debian and Ubuntu: ``apt-cache madison`` (``name | version | source``). RHEL family (no apt-cache,
    dnf present): ``dnf repoquery`` with the EVR (``3:580.95.05-1.el9``, the form the lock records).
    """
    wanted = [n for n in names if PACKAGE_NAME.match(n)]
    found: dict[str, list[str]] = {n: [] for n in wanted}
    if not wanted:
        return found
    if shutil.which("apt-cache") is None and shutil.which("dnf") is not None:
        query = ["dnf", "-q", "repoquery", "--queryformat", "%{name}|%{evr}", *wanted]
        run = subprocess.run(query, capture_output=True, text=True, check=False)
    else:
        run = subprocess.run(["apt-cache", "madison", *wanted], capture_output=True, text=True, check=False)
    for line in run.stdout.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) >= 2 and fields[0] in found and fields[1] and fields[1] not in found[fields[0]]:
            found[fields[0]].append(fields[1])
    return found


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["write", "verified", "read"], "default": "read"},
            "lock": {"type": "dict"},
            "venv": {"type": "str"},
            "verify": {"type": "dict"},
            "served": {"type": "list", "elements": "str", "default": []},
            "directory": {"type": "path", "default": "/var/lib/provision"},
        },
        required_if=[("state", "write", ("lock",)), ("state", "verified", ("verify",))],
        supports_check_mode=False,
    )
    directory, state = Path(module.params["directory"]), module.params["state"]
    try:
        if state == "write":
            changed, current = write(directory, module.params["lock"], module.params["venv"])
            module.exit_json(changed=changed, lock=current)
        if state == "verified":
            changed, found = verified(directory, module.params["verify"])
            module.exit_json(changed=changed, lock=found)
        module.exit_json(
            changed=False,
            current=read_json(directory / "lock.json"),
            history=history(directory),
            served=served(module.params["served"]),
        )
    except (LockError, OSError) as exc:
        module.fail_json(msg=f"provision lock: {exc}")


if __name__ == "__main__":
    main()
