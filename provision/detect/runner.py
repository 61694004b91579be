"""Run the probes (locally, from a raw directory, or on remote hosts) and build Facts.

All three paths end in :func:`~provision.detect.registry.facts_from_outputs`, so a captured directory, the
local machine and a fleet host are parsed by exactly the same code.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from provision.detect import collector
from provision.detect.fact import Probe, Unknown
from provision.detect.facts import Facts
from provision.detect.raw import ProbeOutput, read_raw, write_raw
from provision.detect.registry import all_probes, facts_from_outputs
from provision.errors import FactsError, Interrupted

__all__ = [
    "COLLECTOR_TASK",
    "collector_results",
    "detect_local",
    "detect_remote",
    "facts_from_outputs",
    "facts_from_raw",
    "facts_from_raw_hosts",
    "host_dir_name",
    "outputs_from_json",
    "raw_host",
    "run_probes",
    "unknown_facts",
]

COLLECTOR_TASK = "Run the detection collector."


def unknown_facts(host: str, reason: str) -> Facts:
    """Facts for a host nothing could be read from: every fact Unknown with ``reason``."""
    unknown = Unknown(unknown=reason)
    return Facts(
        host=host,
        os=unknown,
        kernel=unknown,
        driver=unknown,
        driver_on_disk=unknown,
        gpus=unknown,
        topology=unknown,
        packages=unknown,
        cuda=unknown,
        torch=unknown,
        venv=unknown,
    )


def outputs_from_json(results: Mapping[str, Mapping[str, Any]]) -> dict[str, ProbeOutput]:
    """The collector's JSON (``{id: {"command", "output", "rc"}}``) as ProbeOutputs."""
    return {probe_id: ProbeOutput.model_validate(dict(out)) for probe_id, out in results.items()}


def run_probes(probes: Iterable[Probe]) -> dict[str, ProbeOutput]:
    """Run probes concurrently in this process through the collector."""
    return outputs_from_json(collector.collect([p.to_json() for p in probes]))


def _run_local(probes: Iterable[Probe]) -> tuple[dict[str, ProbeOutput], datetime | None]:
    """Like :func:`run_probes`, taking over what :func:`provision.detect.early.start` already ran
    (and when it started), once."""
    from provision.detect import early

    results, started = early.collect([p.to_json() for p in probes])
    return outputs_from_json(results), started


def detect_local(venv: str | None = None, save_raw: Path | None = None) -> Facts:
    """Detect this machine.

    Args:
        venv: The spec's Python venv, where torch is read from; None skips torch.
        save_raw: If given, also write every probe's output there (raw format).

    Returns:
        Facts for ``localhost``, stamped with the collection time (UTC).
    """
    started = datetime.now(UTC)
    outputs, early_start = _run_local(all_probes(venv))
    started = early_start or started
    if save_raw is not None:
        write_raw(save_raw, outputs)
    return facts_from_outputs(outputs, collected_at=started)


def raw_host(directory: Path, named: str | None = None) -> str:
    """The host a single raw directory's facts are of: ``named`` when the user gave one (checklist
    ``--host``), else the directory's own name (``--save-raw DIR`` names it, and a capture is named
    after its machine), which every ``--from-raw DIR`` command prints (plan, detect, checklist, import)."""
    return named if named is not None else directory.resolve().name


def facts_from_raw(directory: Path, host: str = "localhost", venv: str | None = None) -> Facts:
    """Facts from a raw directory (``detect --save-raw`` output or a captured fixture).

    ``venv``: see :func:`facts_from_outputs` (the H200 capture does not record its venv).

    Raises:
        FactsError: If the directory is missing, holds no probe output, or a malformed file.
    """
    outputs = read_raw(directory)
    if not outputs:
        raise FactsError(f"{directory}: no probe outputs (<probe>.txt files) in this directory")
    return facts_from_outputs(outputs, host=host, venv=venv)


def detect_remote(
    inventory: str,
    limit: str | None = None,
    venv: str | None = None,
    *,
    forks: int | None = None,
    save_raw: Path | None = None,
    probes: list[Probe] | None = None,
) -> dict[str, Facts]:
    """Detect every inventory host in one ansible-runner playbook run.

    Each host Ansible's ssh (or local) connection reaches plainly runs the collector through one
    ssh command (:mod:`provision.detect.direct`); the others (or all, with
    ``PROVISION_REMOTE_DETECT=ansible``) through one ansible-runner play, which copies the
    collector and the probe list to a temporary directory on each host and runs them there with
    the host's python3. Results are parsed as they arrive (each host's output is held once, as
    its Facts, not also as a kept event). An unreachable or failing host gets every fact Unknown
    with the reason (ssh's or Ansible's message).

    Args:
        inventory: An inventory file path, or INI inventory text.
        limit: An Ansible host pattern restricting the run, or None for all hosts.
        venv: The venv torch is read from on each host; None skips torch.
        forks: Hosts Ansible detects at once; None keeps Ansible's default (5).
        save_raw: Also write each reached host's raw probe outputs to ``save_raw/<host>/``
            (what ``plan -i INV --from-raw DIR`` reads back).
        probes: Run only these (e.g. verify's machine-ID pass); None runs every probe of the
            registry. The facts of probes not run keep their "not probed" value.

    Returns:
        ``{inventory hostname: Facts}`` for every host the play reached or tried.

    Raises:
        FactsError: If ansible-playbook failed before any host reported, or ``save_raw`` cannot
            be written.
        Interrupted: Ctrl-C stopped the detection play (ansible-runner's status ``canceled``).
    """
    started = datetime.now(UTC)
    found: dict[str, Facts] = {}

    def keep(host: str, result: str | dict[str, Any]) -> None:
        if host not in found:
            found[host] = _host_facts(host, result, started, save_raw)

    def take(event: Mapping[str, Any]) -> None:
        for host, result in collector_results([event]).items():
            keep(host, result)

    probes = all_probes(venv) if probes is None else probes
    order: list[str] = []  # inventory order, where known: hosts finish in any order
    play_hosts = _detect_direct(inventory, limit, probes, forks, keep, order)
    if play_hosts != []:
        with tempfile.TemporaryDirectory(prefix="provision-detect-") as tmp:
            play_limit = limit if play_hosts is None else ",".join(play_hosts)
            rc, tail, left = _run_play(Path(tmp), inventory, play_limit, probes, forks, take)
        if left is not None:  # Ctrl-C; ``left``: processes of the play it could not end (normally none)
            raise Interrupted(left_running=left)
        if not found and rc != 0:
            raise FactsError(f"ansible-playbook failed (rc {rc}) before any host reported: {tail}")
    return {h: found[h] for h in order if h in found} | found


def _detect_direct(
    inventory: str,
    limit: str | None,
    probes: list[Probe],
    forks: int | None,
    keep: Callable[[str, str | dict[str, Any]], None],
    order: list[str],
) -> list[str] | None:
    """Detect the hosts reachable by one ssh command (:mod:`provision.detect.direct`); returns the
    hosts left for the play, or None when the play should run on ``limit`` as given. ``order``
    gets every targeted host in inventory order."""
    from provision.detect import direct

    if not direct.enabled():
        return None
    commands = direct.connections(inventory, limit)
    if not commands:
        return None  # unreadable, or no host matched: the play says why, as before
    order.extend(commands)
    ready = {h: argv for h, argv in commands.items() if argv is not None}
    timeout = max((p.timeout for p in probes), default=10.0) + 60.0
    direct.collect(ready, direct.payload(collector_source(), probes), timeout, forks, keep)
    return [h for h, argv in commands.items() if argv is None]


def _host_facts(host: str, result: str | dict[str, Any], started: datetime, save_raw: Path | None) -> Facts:
    if isinstance(result, str):
        return unknown_facts(host, result)
    outputs = outputs_from_json(result)
    if save_raw is not None:
        write_raw(save_raw / host_dir_name(host), outputs)
    return facts_from_outputs(outputs, host=host, collected_at=started)


def host_dir_name(host: str) -> str:
    """The directory of ``host`` under ``--save-raw``/``--from-raw``: the inventory hostname, with
    ``/`` and a leading ``.`` replaced so that a name never leaves the directory."""
    name = host.replace("/", "_").replace("\\", "_")
    return "_" + name[1:] if name.startswith(".") else name or "_"


def facts_from_raw_hosts(
    directory: Path, hosts: Iterable[str], venvs: Mapping[str, str | None]
) -> dict[str, Facts]:
    """Facts of each of ``hosts`` from ``directory/<host>/`` (written by ``detect -i INV --save-raw``).

    A host without its directory gets every fact Unknown with the reason (it counts as
    unreachable, as it would live); a malformed directory raises.

    Raises:
        FactsError: ``directory`` is missing, or a host's directory holds a malformed file.
    """
    if not directory.is_dir():
        raise FactsError(
            f"{directory}: no such directory (write one with detect -i INVENTORY --save-raw DIR)"
        )
    found: dict[str, Facts] = {}
    for host in hosts:
        path = directory / host_dir_name(host)
        if not path.is_dir():
            found[host] = unknown_facts(host, f"host unreachable: no saved outputs in {path}")
            continue
        found[host] = facts_from_raw(path, host=host, venv=venvs.get(host))
    return found


def _run_play(
    data_dir: Path,
    inventory: str,
    limit: str | None,
    probes: list[Probe],
    forks: int | None,
    on_event: Callable[[dict[str, Any]], None],
) -> tuple[int, str, tuple[str, ...] | None]:
    """Run the detection play through the one ansible-runner call site; (rc, last stdout line,
    None, or when Ctrl-C stopped it the processes of it still running: normally none).

    Events go to ``on_event`` as they arrive and are not kept. Host keys are checked
    (:func:`provision.ansible.ansible_env`): detection must not silently trust a new machine.
    """
    from provision import ansible  # ansible-runner is slow to import; only the inventory path needs it

    _write_project(data_dir / "project", probes)
    run = ansible.run_play(
        data_dir,
        "detect.yml",
        inventory,
        limit=limit,
        forks=forks,
        on_event=on_event,
        keep=False,
        pipelining=True,
    )
    return run.rc, run.stdout_tail, run.left_running if run.interrupted else None


def _write_project(project: Path, probes: list[Probe]) -> None:
    # Files, not inline strings: Ansible would template '{{' or '{#' in the script text.
    project.mkdir(parents=True, exist_ok=True)
    (project / "collector.py").write_text(collector_source(), encoding="utf-8")
    (project / "probes.json").write_text(probes_json(probes), encoding="utf-8")
    (project / "detect.yml").write_text(json.dumps(detect_play(), indent=1), encoding="utf-8")


def detect_play() -> list[dict[str, Any]]:
    """The detection playbook as data (JSON is YAML): copy, run, read, clean up."""
    workdir = "{{ provision_detect_dir.path }}"
    python = (
        "{{ ansible_facts.discovered_interpreter_python"
        " | default(ansible_python_interpreter | default('python3')) }}"
    )
    copy = [
        {
            "name": f"Copy the {name} to the host.",
            "ansible.builtin.copy": {
                "src": f"{{{{ playbook_dir }}}}/{name}",
                "dest": f"{workdir}/{name}",
                "mode": "0600",
            },
        }
        for name in ("collector.py", "probes.json")
    ]
    run = {
        "name": COLLECTOR_TASK,
        "changed_when": False,
        "ansible.builtin.command": {"argv": [python, f"{workdir}/collector.py", f"{workdir}/probes.json"]},
    }
    clean = {
        "name": "Remove the collector's temporary directory.",
        "ansible.builtin.file": {"path": workdir, "state": "absent"},
    }
    mkdir = {
        "name": "Create a temporary directory for the collector.",
        "ansible.builtin.tempfile": {"state": "directory", "prefix": "provision-detect-"},
        "register": "provision_detect_dir",
    }
    return [
        {
            "name": "Detect GPU machine facts.",
            "hosts": "all",
            "gather_facts": False,
            "strategy": "free",  # hosts are independent: none waits for the slowest at each task
            "tasks": [
                mkdir,
                {
                    "name": "Collect the probe outputs, then clean up.",
                    "block": [*copy, run],
                    "always": [clean],
                },
            ],
        }
    ]


def collector_results(events: Iterable[Mapping[str, Any]]) -> dict[str, str | dict[str, Any]]:
    """Per host: the collector's parsed JSON, or the reason it did not run (a string).

    Reads ``runner_on_ok`` of the collector task; the first ``runner_on_failed`` or
    ``runner_on_unreachable`` of any task gives a host's reason.
    """
    hosts: dict[str, str | dict[str, Any]] = {}
    for event in events:
        data = event.get("event_data", {})
        host, res = data.get("host"), data.get("res") or {}
        if not isinstance(host, str):
            continue
        if event.get("event") == "runner_on_ok" and data.get("task") == COLLECTOR_TASK:
            hosts[host] = _collector_json(res)
        elif event.get("event") in ("runner_on_failed", "runner_on_unreachable") and host not in hosts:
            hosts[host] = _failure_reason(event["event"], data.get("task", "?"), res)
    return hosts


def _collector_json(res: Mapping[str, Any]) -> str | dict[str, Any]:
    try:
        parsed = json.loads(res.get("stdout", ""))
    except (ValueError, RecursionError):  # malformed, 5000-digit numbers, nesting
        return f"collector printed no JSON: {str(res.get('stdout', ''))[:200]}"
    return parsed if isinstance(parsed, dict) else "collector printed JSON that is not an object"


def _failure_reason(event: str, task: str, res: Mapping[str, Any]) -> str:
    what = "unreachable" if event == "runner_on_unreachable" else f"failed at '{task}'"
    from provision.ansible import failure_message

    return f"host {what}: {failure_message(res)}"


def collector_source() -> str:
    """The collector script's text, as copied to remote hosts."""
    return Path(collector.__file__).read_text(encoding="utf-8")


def probes_json(probes: Iterable[Probe]) -> str:
    """The collector's input for ``probes``."""
    return json.dumps([p.to_json() for p in probes])
