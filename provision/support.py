"""Support bundles: after a failed apply or verify, one archive per failed host that a person can send.

``support-<host>.tar.gz`` in the command's run directory, mode 0600 (it describes the host), holding:

* what the controller already has for the host (:class:`Evidence`): ``plan.json`` (apply: the
  plan that ran, and ``plan-after.json``, what a fresh plan still shows; verify: the spec planned
  against the facts verify read), ``facts.json``, and for verify ``verify.json`` (every check);
* ``raw/<probe>.txt``: the collector's raw output of every probe, in ``detect --save-raw``'s format
  (``provision detect --from-raw DIR`` and ``plan --from-raw`` read an extracted ``raw/`` back);
* ``ansible/job_events/*.json`` and ``ansible/stdout``: the host's own events of the run (apply's
  site.yml, verify's play on inventory hosts), and the text Ansible printed for them;
* ``host/dmesg-nvidia.txt``, ``host/dkms-status.txt``, ``host/lock.json``: read on the host by
  ``playbooks/support.yml`` (the kernel's lines about NVIDIA, nouveau, Xid and NVLink; ``dkms
  status`` with its exit code; provision's lock, when one was recorded).

Every member goes through :func:`redact` first: values of keys that name a password, secret, token
or key, and URL credentials, become ``<redacted>``; the machine ID keeps only its first 8 hex
characters.
"""

from __future__ import annotations

import base64
import io
import json
import re
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision import ansible
from provision.detect.fact import Probe
from provision.detect.raw import format_raw, read_raw
from provision.detect.runner import host_dir_name
from provision.errors import FactsError
from provision.resources import data_dir
from provision.spec.urls import redact_urls

_SECRET_VALUE = re.compile(
    r"""(?ix)
    ( (?:password|passwd|pass|secret|token|api[_-]?key|become_pass(?:word)?|private[_-]?key)
      ["']?\s*[:=]\s*["']? )
    ( [^"'\s,}]+ )"""
)
_MACHINE_ID = re.compile(r"(machine-id: [0-9a-f]{8})[0-9a-f]{24}\b")
"""The machine-id probe's lines (``/etc/machine-id: <32 hex>``): machine-id(5) asks that the ID stay
confidential; a bundle keeps the first 8 hex characters, as provision's messages print them."""
_NVIDIA_KERNEL_LINE = re.compile(r"NVRM|nvidia|nouveau|Xid|NVLink|nv_", re.IGNORECASE)
PREFIX = "support-"
"""Bundles are ``support-<host>.tar.gz`` (the host as :func:`host_dir_name` writes it)."""


@dataclass(frozen=True)
class Evidence:
    """What the controller already holds about one failed host.

    Attributes:
        documents: Member name -> text (``plan.json``, ``facts.json``, ``verify.json``, ...).
        raw: The host's raw probe directory (``detect --save-raw`` format); None when none was kept.
    """

    documents: Mapping[str, str] = field(default_factory=dict)
    raw: Path | None = None


def bundle_path(directory: Path, host: str) -> Path:
    """Where ``host``'s bundle goes in ``directory``."""
    return directory / f"{PREFIX}{host_dir_name(host)}.tar.gz"


def redact(text: str) -> str:
    """``text`` with secret values (``password: x``, ``token=x``) and every URL's userinfo, query,
    fragment and token-like path segments (:func:`provision.spec.urls.redact_urls`) replaced by
    ``<redacted>``; machine IDs cut to their first 8 hex characters."""
    text = _MACHINE_ID.sub(lambda m: m.group(1) + "…", text)
    return redact_urls(_SECRET_VALUE.sub(lambda m: m.group(1) + "<redacted>", text))


def nvidia_lines(dmesg: str) -> str:
    """The kernel log's lines about the NVIDIA driver, nouveau, Xid errors and NVLink."""
    return "".join(line + "\n" for line in dmesg.splitlines() if _NVIDIA_KERNEL_LINE.search(line))


SUPPORT_PROBES = (
    Probe(id="dmesg", argv=("dmesg",), timeout=30.0),
    Probe(id="dkms-status", argv=("dkms", "status"), timeout=60.0),
    Probe(id="lock", argv=("cat", "--", "/var/lib/provision/lock.json"), timeout=10.0),
)
"""What ``support.yml`` reads, as collector probes for the direct transport (the same commands)."""


def collect(inventory: Path, hosts: list[str], work: Path) -> dict[str, dict[str, str]]:
    """Per host: ``dmesg-nvidia.txt``, ``dkms-status.txt``, ``lock.json``, read as root there: over
    the direct transport (:func:`provision.detect.direct.route`, ``as_root``) where the host has
    a command, by ``support.yml`` otherwise.

    A host that could not be reached or run on gets what it did read (possibly nothing).
    """
    from provision.detect import direct
    from provision.detect.runner import collector_source

    commands = direct.root_commands(str(inventory), hosts)
    found: dict[str, dict[str, str]] = {h: {} for h in hosts}

    def keep(host: str, result: str | dict[str, Any]) -> None:
        if isinstance(result, dict):
            found[host] = support_texts(result)

    timeout = sum(p.timeout for p in SUPPORT_PROBES) + 30.0
    direct.collect(commands, direct.payload(collector_source(), list(SUPPORT_PROBES)), timeout, None, keep)
    rest = [h for h in hosts if h not in commands]
    return found | (_collect_play(inventory, rest, work) if rest else {})


def support_texts(outputs: Mapping[str, Any]) -> dict[str, str]:
    """The bundle's ``host/`` members from the collector's outputs of :data:`SUPPORT_PROBES`."""
    texts: dict[str, str] = {}
    dmesg, dkms, lock = (outputs.get(p.id) or {} for p in SUPPORT_PROBES)
    if "output" in dmesg:
        texts["dmesg-nvidia.txt"] = nvidia_lines(str(dmesg["output"]))
    if "output" in dkms:
        texts["dkms-status.txt"] = f"$ dkms status (rc {dkms.get('rc', '?')})\n{dkms['output']}"
    if lock.get("rc") == 0:
        texts["lock.json"] = str(lock.get("output", ""))
    return texts


def _collect_play(inventory: Path, hosts: list[str], work: Path) -> dict[str, dict[str, str]]:
    """:func:`collect` by ``support.yml``."""
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


def host_events(runner_dir: Path | None, hosts: list[str]) -> dict[str, dict[str, str]]:
    """Per host, its events of the ansible-runner run kept in ``runner_dir`` (``artifacts/*/job_events``):
    ``ansible/job_events/<file>.json`` each, and ``ansible/stdout``, the text Ansible printed for them
    in order. Events of no host (play start, stats) and unreadable files are left out."""
    found: dict[str, dict[str, str]] = {h: {} for h in hosts}
    if runner_dir is None:
        return found
    printed: dict[str, list[tuple[int, str]]] = {h: [] for h in hosts}
    for path in sorted(runner_dir.glob("artifacts/*/job_events/*.json")):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            event = json.loads(text)
        except (ValueError, RecursionError):
            continue
        host = (event.get("event_data") or {}).get("host") if isinstance(event, dict) else None
        if host in found:
            found[host][f"ansible/job_events/{path.name}"] = text
            counter = event.get("counter")
            printed[host].append((counter if isinstance(counter, int) else 0, str(event.get("stdout") or "")))
    for host, lines in printed.items():
        if lines:
            found[host]["ansible/stdout"] = "".join(s + "\n" for _, s in sorted(lines) if s)
    return found


def raw_members(raw: Path | None) -> dict[str, str]:
    """``raw/<probe>.txt`` for each probe output in the raw directory ``raw`` (none when it is
    missing or unreadable: the bundle is written with what there is)."""
    if raw is None or not raw.is_dir():
        return {}
    try:
        outputs = read_raw(raw)
    except FactsError:
        return {}
    return {f"raw/{probe}.txt": format_raw(out) for probe, out in outputs.items()}


def write_bundles(
    directory: Path, inventory: Path, evidence: Mapping[str, Evidence], runner_dir: Path | None = None
) -> dict[str, Path]:
    """Write one bundle per host of ``evidence`` into ``directory``; returns host -> its path.

    Args:
        directory: The command's run directory.
        inventory: The inventory the hosts are reached through (this machine's local one for
            ``localhost``); ``support.yml`` runs once over all the hosts.
        evidence: Per failed host, what the controller holds about it.
        runner_dir: An ansible-runner private data directory whose events go in (apply's run
            directory, verify's play); None when no Ansible run touched the hosts.
    """
    hosts = list(evidence)
    if not hosts:
        return {}
    events = host_events(runner_dir, hosts)
    with tempfile.TemporaryDirectory(prefix="provision-support-") as work:
        read = collect(inventory, hosts, Path(work))
    written: dict[str, Path] = {}
    for host in hosts:
        members = dict(evidence[host].documents) | raw_members(evidence[host].raw) | events[host]
        members |= {f"host/{name}": text for name, text in read[host].items()}
        written[host] = _archive(bundle_path(directory, host), members)
    return written


def _archive(path: Path, members: Mapping[str, str]) -> Path:
    """The bundle, built in memory and written atomically, mode 0600 (:func:`provision.output.write_output`:
    never through a link planted at ``path``)."""
    from provision.output import PRIVATE, write_output

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in members.items():
            data = redact(text).encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    write_output(path, buffer.getvalue(), mode=PRIVATE)
    return path
