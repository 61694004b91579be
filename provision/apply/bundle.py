"""The support bundle of a failed apply: one archive a person can send, with secrets redacted.

``support-bundle.tar.gz`` in the run directory, mode 0600 (it describes the hosts), holding:

* ``plans/plan-<host>.json``: what was planned;
* ``ansible/job_events/*.json`` and ``ansible/stdout``: what Ansible did, event by event;
* ``facts/<host>.json``: the facts detected after the run (dkms status, driver, packages, ...);
* ``hosts/<host>/dmesg-nvidia.txt``: the kernel's lines about NVIDIA, nouveau and Xid errors;
* ``hosts/<host>/dkms-status.txt`` and ``hosts/<host>/lock.json``: DKMS and provision's lock.

Every text member goes through :func:`redact` first: values of keys that name a password, secret,
token or key, and URL credentials, become ``<redacted>``.
"""

from __future__ import annotations

import base64
import io
import os
import re
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision import ansible
from provision.detect.facts import Facts
from provision.resources import data_dir

BUNDLE = "support-bundle.tar.gz"
_SECRET_VALUE = re.compile(
    r"""(?ix)
    ( (?:password|passwd|pass|secret|token|api[_-]?key|become_pass(?:word)?|private[_-]?key)
      ["']?\s*[:=]\s*["']? )
    ( [^"'\s,}]+ )"""
)
_URL_CREDENTIALS = re.compile(r"(\w+://)[^/\s:@]+:[^/\s@]+@")
_NVIDIA_KERNEL_LINE = re.compile(r"NVRM|nvidia|nouveau|Xid|NVLink|nv_", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with secret values and URL credentials replaced by ``<redacted>``."""
    text = _SECRET_VALUE.sub(lambda m: m.group(1) + "<redacted>", text)
    return _URL_CREDENTIALS.sub(lambda m: m.group(1) + "<redacted>@", text)


def nvidia_lines(dmesg: str) -> str:
    """The kernel log's lines about the NVIDIA driver, nouveau, Xid errors and NVLink."""
    return "".join(line + "\n" for line in dmesg.splitlines() if _NVIDIA_KERNEL_LINE.search(line))


def collect(inventory: Path, hosts: list[str], work: Path) -> dict[str, dict[str, str]]:
    """Per host: ``dmesg-nvidia.txt``, ``dkms-status.txt`` and ``lock.json`` as read there."""
    played = ansible.run_play(
        work, "support.yml", inventory, project_dir=data_dir("playbooks"), limit=",".join(hosts)
    )
    found: dict[str, dict[str, str]] = {h: {} for h in hosts}
    for event in played.events:
        data = event.get("event_data", {})
        host, res = data.get("host"), data.get("res") or {}
        if event.get("event") != "runner_on_ok" or host not in found:
            continue
        task = str(data.get("task", ""))
        if task.startswith("Read the kernel ring buffer"):
            found[host]["dmesg-nvidia.txt"] = nvidia_lines(str(res.get("stdout", "")))
        elif task.startswith("Read the DKMS"):
            found[host]["dkms-status.txt"] = _command_text("dkms status", res)
        elif task.startswith("Read provision's lock") and res.get("content"):
            found[host]["lock.json"] = base64.b64decode(res["content"]).decode("utf-8", "replace")
    return found


def _command_text(command: str, res: Mapping[str, Any]) -> str:
    """``$ command (rc N)`` then its stdout and stderr, or Ansible's message when it did not run."""
    said = "".join(str(res.get(k) or "") + "\n" for k in ("stdout", "stderr") if res.get(k))
    return f"$ {command} (rc {res.get('rc', '?')})\n{said or str(res.get('msg', '')) + chr(10)}"


def write_bundle(run_dir: Path, inventory: Path, hosts: list[str], facts: Mapping[str, Facts]) -> Path:
    """Write the bundle for the failed ``hosts`` into ``run_dir``; returns its path."""
    members: dict[str, str] = {}
    for plan in sorted(run_dir.glob("plan-*.json")):
        members[f"plans/{plan.name}"] = plan.read_text(encoding="utf-8", errors="replace")
    for path in sorted(run_dir.glob("artifacts/*/job_events/*.json")):
        members[f"ansible/job_events/{path.name}"] = path.read_text(encoding="utf-8", errors="replace")
    for path in sorted(run_dir.glob("artifacts/*/stdout")):
        members["ansible/stdout"] = path.read_text(encoding="utf-8", errors="replace")
    for host in hosts:
        if host in facts:
            members[f"facts/{host}.json"] = facts[host].model_dump_json(indent=2)
    with tempfile.TemporaryDirectory(prefix="provision-support-") as work:
        for host, files in collect(inventory, hosts, Path(work)).items():
            for name, text in files.items():
                members[f"hosts/{host}/{name}"] = text
    return _archive(run_dir / BUNDLE, members)


def _archive(path: Path, members: Mapping[str, str]) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, text in members.items():
            data = redact(text).encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    return path
