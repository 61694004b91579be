"""Live detection of an inventory: how its cost grows with hosts and forks, one ssh command vs the play.

Every host is this machine through ``ansible_connection=local`` (no sshd needed, no root), so the
figures are the controller's cost plus the probes themselves, which all run on these same cores:
on real machines each host's probes run on that host. For each size and forks it times the whole
``provision detect -i INV --json --forks N``, once with the collector run directly per host
(:mod:`provision.detect.direct`, the default) and once through the detection play
(``PROVISION_REMOTE_DETECT=ansible``: pipelining, the free strategy, ControlPersist in Ansible's
default ssh_args). Not part of the test suite::

    python3 benchmarks/bench_detect_live.py [--sizes 1,5,20] [--forks 5,20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def inventory(directory: Path, size: int) -> Path:
    """An INI inventory of ``size`` local-connection hosts."""
    path = directory / f"hosts-{size}.ini"
    line = f"ansible_connection=local ansible_python_interpreter={sys.executable}"
    path.write_text("".join(f"h{i:04d} {line}\n" for i in range(size)), encoding="utf-8")
    return path


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and exit code."""
    started = time.perf_counter()
    done = subprocess.run(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,5,20")
    parser.add_argument("--forks", default="5,20")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; wall seconds of provision detect -i INV --json --forks N")
    print(f"{'hosts':>5} {'forks':>5} {'ssh-cmd s':>9} {'play s':>7} {'play/ssh':>8}")
    with tempfile.TemporaryDirectory(prefix="provision-bench-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            inv = inventory(Path(tmp), size)
            for forks in (int(f) for f in args.forks.split(",")):
                if forks > size and forks != int(args.forks.split(",")[0]):
                    continue
                argv = [
                    sys.executable,
                    "-m",
                    "provision",
                    "detect",
                    "-i",
                    str(inv),
                    "--json",
                    "--forks",
                    str(forks),
                ]
                direct_s, _ = timed(argv, dict(os.environ))
                play_s, _ = timed(argv, os.environ | {"PROVISION_REMOTE_DETECT": "ansible"})
                print(f"{size:>5} {forks:>5} {direct_s:9.2f} {play_s:7.2f} {play_s / direct_s:8.1f}")


if __name__ == "__main__":
    main()
