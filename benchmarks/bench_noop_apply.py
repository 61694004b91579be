"""No-op ``provision apply -i INV`` on a converged host, against ``ansible-playbook --check``.

The check runs the same playbooks with the same variables and tags as the apply that converged.

One fresh overlay target of the integration harness's golden root with its own sshd on loopback
(as in ``bench_fleet.py``), the test stack (stand-in NVIDIA repository, 12 packages, holds, venv
and torch wheel) applied once to converge it. Then, each ``--runs`` times (default 5), median wall
seconds of:

- ``provision apply SPEC -i INV --yes``: nothing to do (detect over one ssh command, plan, stop);
- the same with ``PROVISION_REMOTE_DETECT=ansible`` (detection through the Ansible play, as before);
- ``ansible-playbook --check -i INV site.yml`` with the extravars and tags of the converging plan:
  what Ansible alone needs to find that nothing would change.

Target (issue 13, item 7): the no-op apply at least 5x faster than the check. Needs root, like
the integration tests::

    python3 -m benchmarks.bench_noop_apply [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console

from benchmarks.bench_fleet import host_line, served, start
from provision.apply import runner
from provision.fleet import load_fleet
from provision.fleet.apply import FleetOptions, apply_fleet
from provision.plan.models import Plan
from provision.resources import data_dir
from tests.integration.harness import golden
from tests.integration.helpers import write_spec

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    """Wall seconds and exit code of one run; output discarded."""
    started = time.perf_counter()
    done = subprocess.run(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - started, done.returncode


def median_of(runs: int, argv: list[str], env: dict[str, str] | None = None) -> tuple[float, set[int]]:
    """Median wall seconds over ``runs`` and the exit codes seen."""
    results = [timed(argv, env) for _ in range(runs)]
    return statistics.median(r[0] for r in results), {r[1] for r in results}


def check_command(plan: Plan, inventory: Path, work: Path) -> list[str]:
    """``ansible-playbook --check`` of site.yml with ``plan``'s extravars and tags (as apply runs it)."""
    extravars = runner.site_extravars({"gpu1": plan}, work)
    (work / "extravars.json").write_text(json.dumps(extravars), encoding="utf-8")
    playbook = data_dir("playbooks") / "site.yml"
    tags = ",".join(sorted(plan.tags))
    ansible = str(Path(sys.executable).parent / "ansible-playbook")
    return [
        ansible,
        "--check",
        "-i",
        str(inventory),
        str(playbook),
        "-e",
        f"@{work / 'extravars.json'}",
        "--tags",
        tags,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    root = golden.ensure_golden_root()
    with tempfile.TemporaryDirectory(prefix="bench-noop-") as tmp, served(Path(tmp)) as (repo, wheels):
        work = Path(tmp) / "work"
        work.mkdir()
        with ExitStack() as stack:
            box = start(stack, root, work / "gpu1")
            spec = write_spec(work / "spec.yaml", repo.url, repo, wheels)
            inventory = work / "hosts.ini"
            inventory.write_text("[gpu]\n" + host_line("gpu1", box) + "\n", encoding="utf-8")
            provision = [sys.executable, "-m", "provision"]
            plan_file = work / "plan.json"
            subprocess.run(
                [*provision, "plan", str(spec), "-i", str(inventory), "--out", str(plan_file)],
                cwd=ROOT,
                check=False,
                capture_output=True,
            )
            plan = Plan.model_validate_json(plan_file.read_text(encoding="utf-8"))
            options = FleetOptions(dry_run=False, yes=True, runs_dir=work / "runs", forks=1)
            converged = apply_fleet(load_fleet(inventory, spec=spec), options, Console(quiet=True))
            changes, tags = len(plan.changes), sorted(plan.tags)
            print(f"converging apply: exit {converged}; {changes} planned changes, tags {tags}")
            noop = [
                *provision,
                "apply",
                str(spec),
                "-i",
                str(inventory),
                "--yes",
                "--runs-dir",
                str(work / "runs"),
            ]
            via_play = os.environ | {"PROVISION_REMOTE_DETECT": "ansible"}
            rows = [
                ("provision apply -i (no-op, one ssh command)", *median_of(runs, noop)),
                ("provision apply -i (no-op, detection play)", *median_of(runs, noop, via_play)),
                ("ansible-playbook --check site.yml", *median_of(runs, check_command(plan, inventory, work))),
            ]
    check_s = rows[-1][1]
    print(f"{runs} runs each, median wall seconds, {os.cpu_count()} CPUs")
    for name, seconds, codes in rows:
        print(f"{name:46} {seconds:6.2f} s  {check_s / seconds:5.1f}x  exit {sorted(codes)}")


if __name__ == "__main__":
    main()
