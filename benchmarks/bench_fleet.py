"""Fleet apply wall time for 1, 2 and 4 hosts on this machine (a script, not a timed test).

Each host is a fresh overlay target of the integration harness's golden root with its own
sshd on a loopback address; all hosts share one stand-in NVIDIA repository and wheel index
served on loopback. For each fleet size it times ``provision apply -i INV --yes --forks N``
end to end (detect, plan, one Ansible run over all hosts, re-detect and re-plan), and
separately the Ansible run alone. Needs root, like the integration tests:

    python benchmarks/bench_fleet.py [--sizes 1 2 4]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from provision.apply import runner
from provision.fleet import load_fleet
from provision.fleet.apply import FleetOptions, apply_fleet
from tests.integration.harness import golden, services
from tests.integration.harness import target as target_mod
from tests.integration.harness.server import start_server
from tests.integration.helpers import write_spec


def main() -> None:
    """Print one line per fleet size: hosts, forks, command wall time, Ansible wall time, exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4])
    sizes = parser.parse_args().sizes
    root = golden.ensure_golden_root()
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp, served(Path(tmp)) as (repo, wheels):
        print(f"cpus={os.cpu_count()}")
        print(f"{'hosts':>5} {'forks':>5} {'apply_s':>8} {'ansible_s':>9} {'per_host_s':>10} {'rc':>3}")
        for n in sizes:
            row = bench(n, root, repo, wheels, Path(tmp) / f"fleet-{n}")
            apply_s, per_host = row["apply"], row["apply"] / n
            print(f"{n:>5} {n:>5} {apply_s:>8.1f} {row['ansible']:>9.1f} {per_host:>10.1f} {row['rc']:>3.0f}")


@contextmanager
def served(tmp: Path) -> Iterator[tuple[services.NvidiaRepo, services.WheelIndex]]:
    """The stand-in repository and wheel index on a loopback http server."""
    (tmp / "www").mkdir()
    server = start_server(tmp / "www", tmp / "http.log")
    try:
        repo = services.publish_nvidia_repo(server, golden.cache_dir(), tmp / "repo")
        yield repo, services.publish_wheel_index(server)
    finally:
        server.stop()


def bench(
    n: int, root: golden.GoldenRoot, repo: services.NvidiaRepo, wheels: services.WheelIndex, work: Path
) -> dict[str, float]:
    """Apply the test stack to ``n`` fresh targets at once; returns wall seconds and the exit code."""
    with ExitStack() as stack:
        boxes = {f"gpu{i}": start(stack, root, work / f"gpu{i}") for i in range(1, n + 1)}
        spec = write_spec(work / "spec.yaml", repo.url, repo, wheels)
        inventory = work / "hosts.ini"
        inventory.write_text("[gpu]\n" + "".join(host_line(h, b) + "\n" for h, b in boxes.items()))
        timer = AnsibleTimer()
        started = time.monotonic()
        with timer.installed():
            options = FleetOptions(dry_run=False, yes=True, runs_dir=work / "runs", forks=n)
            rc = apply_fleet(load_fleet(inventory, spec=spec), options, Console(quiet=True))
        return {"apply": time.monotonic() - started, "ansible": timer.seconds, "rc": rc}


def start(stack: ExitStack, root: golden.GoldenRoot, workdir: Path) -> target_mod.Target:
    """A fresh target, closed when ``stack`` unwinds."""
    box = target_mod.start_target(root.path, root.ssh_key, workdir)
    stack.callback(box.close)
    return box


def host_line(name: str, box: target_mod.Target) -> str:
    """An INI inventory line reaching ``box`` as root over ssh."""
    return (
        f"{name} ansible_host={box.host} ansible_port={box.port} ansible_user=root "
        f"ansible_ssh_private_key_file={box.ssh_key} ansible_python_interpreter=/usr/bin/python3 "
        "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'"
    )


class AnsibleTimer:
    """Wraps :func:`provision.apply.runner.run_playbook` to time the Ansible run alone."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def installed(self) -> Iterator[None]:
        real = runner.run_playbook

        def timed(*args: Any, **kwargs: Any) -> runner.ApplyResult:
            started = time.monotonic()
            try:
                return real(*args, **kwargs)
            finally:
                self.seconds += time.monotonic() - started

        runner.run_playbook = timed
        try:
            yield
        finally:
            runner.run_playbook = real


if __name__ == "__main__":
    main()
