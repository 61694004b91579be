"""``provision verify -i`` wall time on a local host and on an ssh host: the direct transport vs the plays.

Two one-host inventories, each held to ``specs/dual-a100x.yaml``: this machine through
``ansible_connection=local``, and a fresh overlay target of the integration harness's golden root
with its own sshd on a loopback address (as root, like the integration tests). For each it times
the whole ``provision verify -i INV --json --runs-dir DIR`` (its checks fail for want of GPUs, so
a support bundle is written as well, and the lock record is tried): once with the direct
transport (the default: the verify agent, the support reads and the lock record one command
each) and once with ``PROVISION_REMOTE_DETECT=ansible``, which sends every host through the
verify, support and lock plays as before the direct transport. The median of ``--repeat`` runs
each. Not part of the test suite::

    python3 benchmarks/bench_verify_live.py [--repeat 3] [--no-ssh]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "dual-a100x.yaml"


def timed(inventory: Path, runs: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and exit code of one ``provision verify -i``."""
    argv = [
        sys.executable,
        "-m",
        "provision",
        "verify",
        "-i",
        str(inventory),
        "--json",
        "--runs-dir",
        str(runs),
    ]
    started = time.perf_counter()
    done = subprocess.run(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - started, done.returncode


def median(inventory: Path, runs: Path, env: dict[str, str], repeat: int) -> tuple[float, int]:
    """The median wall time of ``repeat`` runs, and the last exit code."""
    times, rc = [], 0
    for _ in range(repeat):
        seconds, rc = timed(inventory, runs, env)
        times.append(seconds)
    return statistics.median(times), rc


def ssh_inventory(stack: ExitStack, work: Path) -> Path:
    """A one-host inventory reaching a fresh harness target over ssh as root."""
    from tests.integration.harness import golden
    from tests.integration.harness import target as target_mod

    root = golden.ensure_golden_root()
    box = target_mod.start_target(root.path, root.ssh_key, work / "gpu1")
    stack.callback(box.close)
    path = work / "ssh.ini"
    path.write_text(
        f"gpu1 ansible_host={box.host} ansible_port={box.port} ansible_user=root "
        f"ansible_ssh_private_key_file={box.ssh_key} ansible_python_interpreter=/usr/bin/python3 "
        "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null' "
        f"provision_spec={SPEC}\n",
        encoding="utf-8",
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-ssh", action="store_true", help="Only the local host (no root needed).")
    args = parser.parse_args()
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; median of {args.repeat} runs of verify -i")
    print(f"{'host':>6} {'direct s':>8} {'plays s':>8} {'plays/direct':>12} {'rc':>5}")
    with tempfile.TemporaryDirectory(prefix="provision-bench-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        local = work / "local.ini"
        local.write_text(f"here ansible_connection=local provision_spec={SPEC}\n", encoding="utf-8")
        inventories = {"local": local}
        if not args.no_ssh:
            inventories["ssh"] = ssh_inventory(stack, work)
        for name, inventory in inventories.items():
            direct_s, rc_d = median(
                inventory, work / "runs", env | {"PROVISION_REMOTE_DETECT": ""}, args.repeat
            )
            plays_s, rc_p = median(
                inventory, work / "runs", env | {"PROVISION_REMOTE_DETECT": "ansible"}, args.repeat
            )
            print(f"{name:>6} {direct_s:8.2f} {plays_s:8.2f} {plays_s / direct_s:12.1f} {rc_d:>2}/{rc_p}")


if __name__ == "__main__":
    main()
