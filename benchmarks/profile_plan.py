"""Where one live ``provision plan SPEC`` spends its wall time, phase by phase, and each probe's duration.

Usage: ``python3 benchmarks/profile_plan.py SPEC [--runs N]``. Prints one JSON document: per run, the
seconds from process start to each phase's end, in the order ``provision plan SPEC`` runs them
(``venv_probes``: the venv probes started, from the spec's YAML before it is validated; ``spec``: the
spec validated; the rest imported; facts; plan; text), and
each probe's wall seconds when run alone (the collector's own timing, sequentially) -- what
README's "Speed" section quotes for the H200.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PHASES = r"""
import time, sys, json
from pathlib import Path
t0 = time.perf_counter()
from provision.cli import out, start_up  # the console script imports the CLI (typer, rich) first
from provision import gcpolicy
start_up()  # as provision.cli.main
from provision.cli import _start_probes
from provision.detect import early
venv_started = []
start_venv = early.start_venv
early.start_venv = lambda venv: (venv_started.append(time.perf_counter()), start_venv(venv))
spec = _start_probes(Path(sys.argv[1]))  # as the command: probes, spec read, venv probes, validation
t_spec = time.perf_counter()
from provision import app
t_imports = time.perf_counter()
facts = app.gather(spec, app.Target())
t_detect = time.perf_counter()
plans = app.plan_all(spec, facts, sys.argv[1])
t_plan = time.perf_counter()
from provision.plan.render import render_plan  # to the command's own console: stdout, a pipe here
for p in plans.values():
    render_plan(p, out)
sys.stdout.flush()
t_out = time.perf_counter()
print(json.dumps({"venv_probes": venv_started[0] - t0 if venv_started else None,
                  "spec": t_spec - t0, "imports": t_imports - t0, "detect": t_detect - t0,
                  "plan": t_plan - t0, "output": t_out - t0}))
gcpolicy.exiting()
"""


def phases(spec: str) -> dict[str, float]:
    """One live run's cumulative seconds at each phase's end (in a fresh interpreter)."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _PHASES, spec], capture_output=True, text=True, check=True, cwd=ROOT
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["process"] = time.perf_counter() - start
    return result


def probe_times(venv: str | None) -> dict[str, float]:
    """Each probe's wall seconds, run alone, one after the other."""
    from provision.detect import collector
    from provision.detect.registry import all_probes

    times: dict[str, float] = {}
    for probe in all_probes(venv):
        start = time.perf_counter()
        collector.run_probe(list(probe.argv), probe.timeout)
        times[probe.id] = time.perf_counter() - start
    return dict(sorted(times.items(), key=lambda kv: -kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from provision.spec.loader import load_spec

    spec = load_spec(Path(args.spec))
    runs = [phases(args.spec) for _ in range(args.runs)]
    median = {k: None if runs[0][k] is None else statistics.median(r[k] for r in runs) for k in runs[0]}
    venv = spec.python.venv if spec.python else None
    print(json.dumps({"median_s": median, "runs": runs, "probes_s": probe_times(venv)}, indent=1))


if __name__ == "__main__":
    main()
