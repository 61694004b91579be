"""How long each command takes from the shell, against the floor measured in the same run.

The floor is ``python3 -c "import pydantic, typer, rich.console"``: the libraries every command
needs (issue 21). Each command runs ``--runs`` times (default 7), interleaved with the floor so
that load on the machine hits both alike; the table gives the minimum and the median wall time,
the median CPU time (user + system of the child), and the target, judged on the medians (the
minima, the least disturbed runs of a shared machine, are judged against the floor's minimum in
``met (min)``):

- ``--help``: at most 1.1 x the floor
- ``validate`` and ``plan --from-raw``: at most the floor + 0.1 s
- live ``plan`` and ``detect --json``: at most the floor + the slowest probe (``nvidia-smi -q``,
  timed here when present, else 0.12 s as on the H200) + 0.1 s

A row without a target, the floor plus one pydantic model and ruamel.yaml, shows how much of the
0.1 s the libraries a spec check needs take before any provision code runs.

Not part of the test suite; run from the repository root (needs nothing but the package's own
dependencies; the live rows probe this machine, so run them on a GPU machine for real figures)::

    python3 benchmarks/bench_startup.py [--runs 7] [--json] [--compare DIR]

``--compare DIR`` also times every command in another checkout (for example ``git worktree add
/tmp/before main``), interleaved with this one and the floor, with the same inputs: the
``before`` columns (minimum and median wall, median CPU), for a before/after table from one run;
on a loaded shared machine the CPU medians move less than the wall ones.

It first byte-compiles ``provision/`` (``compileall``, as an installed wheel is): with
``PYTHONDONTWRITEBYTECODE=1`` set, as on the lent GPU machines, every start would otherwise
compile every module again and the figures would measure the compiler. The libraries are not
compiled here (they may not be the user's to write); the table names any of them imported from
source without bytecode (a wheel installed with ``pip install --no-compile``): then every start
compiles them too, and the figures are not those of an ordinary installation (on the H200, with
the carried wheels uncompiled, the floor measured 0.304 s instead of 0.174 s).

Exit code 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = str(ROOT / "specs" / "h200-ubuntu2404.yaml")
RAW = str(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec")
PY = sys.executable
FLOOR = [PY, "-c", "import pydantic, typer, rich.console"]
H200_SLOWEST_PROBE_S = 0.12  # nvidia-smi -q on the lent H200 (README, "Speed")


@dataclass(frozen=True)
class Row:
    """One command: its name, argv and how its target is derived from the floor."""

    name: str
    argv: list[str]
    target: str  # "ratio" (x floor), "plus" (floor + 0.1 s), "probe" (floor + probe + 0.1 s), "" none


def _provision(*args: str) -> list[str]:
    return [PY, "-m", "provision", *args]


LIBRARIES = (
    "import gc, os\ngc.disable()\nos.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'\n"
    "import pydantic, typer, rich.console, ruamel.yaml\nclass M(pydantic.BaseModel):\n    x: int\nM(x=1)\n"
    "gc.freeze()"
)
"""The floor plus what a spec check cannot do without, and no provision code: pydantic's model
machinery (``import pydantic`` alone loads little of it), one model built and validated, and the
YAML reader. What ``validate`` costs above this is provision's own. pydantic's plugins are off, as
every provision command has them (``provision.cli.base.start_up``): else this row would count
pydantic's scan of every installed distribution's entry points (204 distributions on the H200),
which no command does. pydantic's own plugin loader still imports ``importlib.metadata`` here
(~5 ms), which provision's commands skip (``provision/pydanticplugins.py``). The cyclic garbage
collector is off and the heap frozen at exit, as in every command (``provision/gcpolicy.py``):
with it on, this row would count collections that no command pays."""

ROWS = [
    Row("python3 -c pass", [PY, "-c", "pass"], ""),
    Row("floor + BaseModel + ruamel (no provision)", [PY, "-c", LIBRARIES], ""),
    Row("provision --help", _provision("--help"), "ratio"),
    Row("provision validate SPEC", _provision("validate", SPEC), "plus"),
    Row("provision plan SPEC --from-raw", _provision("plan", SPEC, "--from-raw", RAW), "plus"),
    Row(
        "provision plan SPEC --from-raw --json", _provision("plan", SPEC, "--from-raw", RAW, "--json"), "plus"
    ),
    Row("provision catalog --json", _provision("catalog", "--json"), "plus"),
    Row("provision detect --json (live)", _provision("detect", "--json"), "probe"),
    Row("provision plan SPEC (live)", _provision("plan", SPEC), "probe"),
]


def timed(argv: list[str], cwd: Path = ROOT) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run in ``cwd`` (whose ``provision`` package
    ``python3 -m provision`` runs); output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def slowest_probe(runs: int) -> tuple[float, str]:
    """Median seconds of ``nvidia-smi -q`` here, or the H200's figure when there is none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return H200_SLOWEST_PROBE_S, "H200 figure (no nvidia-smi here)"
    return statistics.median(timed([smi, "-q"])[0] for _ in range(runs)), "nvidia-smi -q measured"


LIBRARY_MODULES = (
    *("pydantic.main", "pydantic._internal._generate_schema", "typer.main", "rich.console"),
    "ruamel.yaml.main",
)
"""Modules of the libraries every command loads, checked for bytecode."""


def uncompiled() -> list[str]:
    """Those of :data:`LIBRARY_MODULES` whose source has no bytecode beside it (each start compiles
    it while ``PYTHONDONTWRITEBYTECODE`` is set)."""
    import importlib.util

    missing = []
    for name in LIBRARY_MODULES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin and origin.endswith(".py") and not os.path.exists(importlib.util.cache_from_source(origin)):
            missing.append(name)
    return missing


def target_s(row: Row, floor: float, probe: float) -> float | None:
    """The row's target in seconds, or None when it has none."""
    return {"ratio": 1.1 * floor, "plus": floor + 0.1, "probe": floor + probe + 0.1}.get(row.target)


def measure(runs: int, compare: Path | None = None) -> dict[str, object]:
    """Every row's minimum and median wall seconds and median CPU seconds, the floor's, and each
    target (on the medians; ``met_min`` on the minima); with ``compare``, the same commands'
    wall and CPU seconds in that checkout (``before_wall_min_s``, ``before_wall_s``,
    ``before_cpu_s``)."""
    trees = [ROOT] if compare is None else [ROOT, compare]
    for tree in trees:
        compileall.compile_dir(tree / "provision", quiet=1)
        for argv in [FLOOR] + [r.argv for r in ROWS]:  # warm the page cache and .pyc files
            timed(argv, tree)
    floor_walls: list[float] = []
    floor_cpus: list[float] = []
    samples: dict[str, list[tuple[float, float]]] = {r.name: [] for r in ROWS}
    before: dict[str, list[tuple[float, float]]] = {r.name: [] for r in ROWS}
    for _ in range(runs):
        for row in ROWS:
            wall, cpu = timed(FLOOR)
            floor_walls.append(wall)
            floor_cpus.append(cpu)
            samples[row.name].append(timed(row.argv))
            if compare is not None:
                before[row.name].append(timed(row.argv, compare))
    floor, floor_min = statistics.median(floor_walls), min(floor_walls)
    probe, probe_origin = slowest_probe(runs)
    rows = []
    for row in ROWS:
        wall = statistics.median(s[0] for s in samples[row.name])
        wall_min = min(s[0] for s in samples[row.name])
        cpu = statistics.median(s[1] for s in samples[row.name])
        target = target_s(row, floor, probe)
        target_min = target_s(row, floor_min, probe)
        rows.append(
            {
                "command": row.name,
                "wall_s": wall,
                "wall_min_s": wall_min,
                "cpu_s": cpu,
                "target_s": target,
                "met": None if target is None else wall <= target,
                "met_min": None if target_min is None else wall_min <= target_min,
            }
        )
        if compare is not None:
            rows[-1] |= {
                "before_wall_min_s": min(s[0] for s in before[row.name]),
                "before_wall_s": statistics.median(s[0] for s in before[row.name]),
                "before_cpu_s": statistics.median(s[1] for s in before[row.name]),
            }
    return {
        "runs": runs,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "compare": None if compare is None else str(compare),
        "load_average": os.getloadavg(),
        "uncompiled": uncompiled(),
        "floor": {
            "command": " ".join(["python3", *FLOOR[1:]]),
            "wall_s": floor,
            "wall_min_s": floor_min,
            "cpu_s": statistics.median(floor_cpus),
        },
        "slowest_probe": {"seconds": probe, "origin": probe_origin},
        "rows": rows,
    }


def render(result: dict[str, object]) -> str:
    """The result as a text table (seconds: wall minimum and median, CPU median)."""
    floor = result["floor"]
    assert isinstance(floor, dict)
    load = ", ".join(f"{x:.2f}" for x in result["load_average"])  # type: ignore[attr-defined]
    lines = [
        f"{result['runs']} runs each, python {result['python']}, {result['cpus']} CPUs, load average "
        f"{load}; slowest probe {result['slowest_probe']['seconds']:.3f} s "  # type: ignore[index]
        f"({result['slowest_probe']['origin']})",  # type: ignore[index]
        f"{'command':42} {'min s':>7} {'median s':>8} {'cpu s':>7} {'target s':>9}  met  met (min)",
        f"{'floor: import pydantic, typer, rich.console':42} {floor['wall_min_s']:7.3f} "
        f"{floor['wall_s']:8.3f} {floor['cpu_s']:7.3f}",
    ]
    missing = result.get("uncompiled")
    if isinstance(missing, list) and missing:
        lines.insert(1, f"WARNING: no bytecode for {', '.join(missing)}: each start compiles them")
    for row in result["rows"]:  # type: ignore[attr-defined]
        target = "" if row["target_s"] is None else f"{row['target_s']:9.3f}"
        met = {None: "", True: "yes", False: "NO"}[row["met"]]
        met_min = {None: "", True: "yes", False: "NO"}[row["met_min"]]
        before = (
            f"   before {row['before_wall_min_s']:.3f} / {row['before_wall_s']:.3f}"
            f" / {row['before_cpu_s']:.3f}"
            if "before_wall_s" in row
            else ""
        )
        lines.append(
            f"{row['command']:42} {row['wall_min_s']:7.3f} {row['wall_s']:8.3f} {row['cpu_s']:7.3f} "
            f"{target:>9}  {met:4} {met_min:9}{before}"
        )
    if result["compare"]:
        lines.append(f"before (min / median wall s / median cpu s): the same commands in {result['compare']}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--compare", type=Path, help="another checkout to time alongside (before)")
    args = parser.parse_args()
    result = measure(args.runs, args.compare)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0 if all(r["met"] is not False for r in result["rows"]) else 1  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
