"""``provision lock show -i`` wall time on a one-host local inventory: the direct transport vs the play.

The inventory is this machine through ``ansible_connection=local`` (its interpreter: the one
running this script). Each run is the whole ``provision lock show -i INV --json``, as a user
types it: once with the direct transport (the default: the lock module's read run as one
command, as root: ``sudo -n`` unless this process is root) and once with
``PROVISION_REMOTE_DETECT=ansible``, which sends the host through ``playbooks/lock.yml`` as every
``-i`` read did before. ``--compare DIR`` also times another checkout (``git worktree add
/tmp/before main``) with the same inventory. The kinds are interleaved, so that load on a shared
machine hits them alike; the table gives the minimum and the median of ``--repeat`` runs each.
The host's locks are whatever ``/var/lib/provision`` holds (none is the same two reads). Not part
of the test suite::

    python3 benchmarks/bench_lock_show.py [--repeat 7] [--compare DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(checkout: Path, inventory: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and exit code of one ``provision lock show -i INV --json`` from ``checkout``."""
    argv = [sys.executable, "-m", "provision", "lock", "show", "-i", str(inventory), "--json"]
    started = time.perf_counter()
    done = subprocess.run(
        argv,
        cwd=checkout,
        env=env | {"PYTHONPATH": str(checkout)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--compare", type=Path, help="Another checkout to time the same way (before).")
    args = parser.parse_args()
    kinds = {
        "direct": (ROOT, {"PROVISION_REMOTE_DETECT": ""}),
        "play": (ROOT, {"PROVISION_REMOTE_DETECT": "ansible"}),
    }
    if args.compare:
        kinds["before"] = (args.compare.resolve(), {"PROVISION_REMOTE_DETECT": ""})
    times: dict[str, list[float]] = {k: [] for k in kinds}
    codes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="provision-bench-") as tmp:
        inventory = Path(tmp) / "local.ini"
        inventory.write_text(
            f"here ansible_connection=local ansible_python_interpreter={sys.executable}\n", encoding="utf-8"
        )
        for _ in range(args.repeat):
            for kind, (checkout, extra) in kinds.items():
                seconds, codes[kind] = timed(checkout, inventory, os.environ | extra)
                times[kind].append(seconds)
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; {args.repeat} runs of lock show -i each")
    print(f"{'kind':>7} {'min s':>6} {'median s':>8} {'rc':>3}")
    for kind, found in times.items():
        print(f"{kind:>7} {min(found):6.2f} {statistics.median(found):8.2f} {codes[kind]:>3}")


if __name__ == "__main__":
    main()
