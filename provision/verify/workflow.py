"""Collect what verify needs from the machine, then run every check over it.

``collect`` does the I/O (detection, the two fabric probes, the GPU load program, the all-reduce);
``evaluate`` is pure: the same inputs always give the same report, which is how the saved H200
run is replayed in the tests.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

from provision import gcpolicy
from provision.catalog import Catalog
from provision.detect.facts import Facts, Unknown
from provision.spec.models import Spec
from provision.verify import (
    checks_driver,
    checks_gpu,
    checks_gpu_settings,
    checks_invariants,
    checks_multi,
    checks_software,
    launch,
    observe,
    probes,
)
from provision.verify.context import Context
from provision.verify.limits import Limits
from provision.verify.models import CheckResult, Report
from provision.verify.runs import AllReduceRun, GpuRun, VerifyInputs

Check = Callable[[Context], list[CheckResult]]


def save_inputs(directory: Path, inputs: VerifyInputs) -> None:
    """Write ``inputs`` to ``directory/inputs.json`` (what ``verify --inputs`` replays), atomically,
    mode 0600 (:func:`provision.output.write_files`).

    Raises:
        ProvisionError: the directory cannot be created or the file cannot be written (the reason),
            or the trust rule refuses it.
    """
    from provision.output import PRIVATE, write_files

    write_files(directory, {"inputs.json": inputs.model_dump_json(indent=2)}, mode=PRIVATE)


MACHINE_CHECKS: tuple[Check, ...] = (
    *checks_driver.CHECKS,
    *checks_gpu.CHECKS,
    *checks_gpu_settings.CHECKS,
    *checks_software.CHECKS,
    *checks_multi.CHECKS,
    *checks_invariants.CHECKS,
)
"""The checks over detection's facts and the GPU programs: driver, GPUs and loads, software,
multi-GPU, invariants."""
CHECKS: tuple[Check, ...] = (*MACHINE_CHECKS, *(c for o in observe.observers() for c in o.checks))
"""Every check, in report order: the machine's, then each component observer's (registry order)."""


def collect(spec: Spec, facts: Facts) -> VerifyInputs:
    """Run the fabric probes and the bounded GPU loads on this machine, then ask what the
    components' observers read (vLLM's server, the monitoring, the container runtime) through the
    host probe, as remote verify does on each host.

    The GPU program runs only when nvidia-smi sees GPUs and the venv has an interpreter;
    otherwise the reason is recorded and the GPU checks fail or skip with it.
    """
    gcpolicy.long_running()  # the loads and the sampler run for seconds
    gpu_run = _gpu_run(spec, facts)
    return VerifyInputs(
        facts=facts,
        fm_version=probes.fm_version(),
        gpu_run=gpu_run,
        allreduce=_allreduce(spec, gpu_run),
        observed=observe.collect(spec),
    )


def _gpu_run(spec: Spec, facts: Facts) -> GpuRun | Unknown:
    if isinstance(facts.gpus, Unknown):
        return Unknown(unknown=f"no GPU work: {facts.gpus.unknown}")
    python = launch.python_of(spec.python.venv if spec.python else None)
    if isinstance(python, Unknown):
        return python
    seconds = spec.verify.load_seconds
    timeout = launch.gpu_timeout(len(facts.gpus), seconds)
    return launch.run_gpus(python, seconds, timeout, on_progress=_show_progress)


def _show_progress(text: str) -> None:
    # stderr, so that --json keeps stdout to its one document
    sys.stderr.write(f"verify: {text}\n")
    sys.stderr.flush()


def _allreduce(spec: Spec, gpu_run: GpuRun | Unknown) -> AllReduceRun | Unknown | None:
    if isinstance(gpu_run, Unknown) or gpu_run.device_count < 2:
        return None
    python = launch.python_of(spec.python.venv if spec.python else None)
    if isinstance(python, Unknown):
        return python
    return launch.run_allreduce(python, gpu_run.device_count, timeout=spec.verify.allreduce_timeout_s)


def evaluate(
    spec: Spec, inputs: VerifyInputs, catalog: Catalog, limits: Limits, checks: Iterable[Check] = CHECKS
) -> tuple[CheckResult, ...]:
    """Every check's results over ``inputs`` (pure)."""
    ctx = Context(spec=spec, inputs=inputs, catalog=catalog, limits=limits)
    return tuple(r for check in checks for r in check(ctx))


def verify(
    spec: Spec,
    spec_path: str,
    facts: Facts,
    catalog: Catalog,
    limits: Limits,
    *,
    inputs: VerifyInputs | None = None,
    save_raw: Path | None = None,
) -> Report:
    """Collect (unless ``inputs`` replays a saved run), evaluate, and time the whole verify."""
    started, t0 = datetime.now(UTC), time.monotonic()
    inputs = inputs or collect(spec, facts)
    if save_raw is not None:
        save_inputs(save_raw, inputs)
    results = evaluate(spec, inputs, catalog, limits)
    return Report(
        host=inputs.facts.host,
        spec=spec_path,
        started_at=started,
        seconds=time.monotonic() - t0,
        results=results,
    )
