"""What every check reads (spec, inputs, catalog, thresholds) and helpers that build results."""

from __future__ import annotations

from dataclasses import dataclass

from provision.catalog import Catalog, GpuModel
from provision.detect.facts import Facts, Gpu, Unknown
from provision.detect.unknown import NotRun
from provision.os import PackageManager
from provision.spec.models import Spec
from provision.verify.limits import Limits, Resolved
from provision.verify.models import CheckResult, Measured, Op, Status, Threshold
from provision.verify.runs import GpuLoad, GpuRun, VerifyInputs


@dataclass(frozen=True)
class Context:
    """Inputs of every check; checks are pure functions of it."""

    spec: Spec
    inputs: VerifyInputs
    catalog: Catalog
    limits: Limits

    @property
    def facts(self) -> Facts:
        return self.inputs.facts

    @property
    def pm(self) -> PackageManager:
        """The machine's package manager (reads package versions)."""
        return self.facts.package_manager(self.spec.os.distro)

    @property
    def model(self) -> GpuModel | None:
        """The catalog row of the spec's GPU model (None for an id the catalog lacks)."""
        return self.catalog.gpu(self.spec.gpus.model)

    @property
    def gpus(self) -> tuple[Gpu, ...] | Unknown:
        return self.facts.gpus

    @property
    def run(self) -> GpuRun | Unknown:
        """The load program's output; an Unknown when it did not run or CUDA is unavailable."""
        run = self.inputs.gpu_run
        if isinstance(run, GpuRun) and run.error is not None and not run.gpus:
            return Unknown(unknown=f"GPU load program: {run.error}")
        return run

    def loads(self) -> tuple[GpuLoad, ...] | Unknown:
        """Per-GPU load results, or why there are none."""
        run = self.run
        if isinstance(run, Unknown):
            return run
        return run.gpus if run.gpus else Unknown(unknown="torch sees no CUDA device")

    def gpu(self, index: int) -> Gpu | None:
        """The nvidia-smi row of GPU ``index``, if known."""
        gpus = self.gpus
        return None if isinstance(gpus, Unknown) else next((g for g in gpus if g.index == index), None)


def result(
    check_id: str,
    title: str,
    status: Status,
    *,
    subject: str = "",
    measured: Measured | None = None,
    threshold: Threshold | None = None,
    detail: str = "",
    hint: str | None = None,
) -> CheckResult:
    """A CheckResult; the hint is kept only when the check did not pass."""
    return CheckResult(
        id=check_id,
        subject=subject,
        title=title,
        status=status,
        measured=measured,
        threshold=threshold,
        detail=detail,
        hint=None if status == "pass" else hint,
    )


def compare(
    check_id: str,
    title: str,
    value: float,
    unit: str,
    limit: Resolved,
    op: Op,
    *,
    subject: str = "",
    hint: str,
    detail: str = "",
    below: Status = "fail",
) -> CheckResult:
    """Hold ``value`` to ``limit`` with ``op`` (``>=`` or ``<=``); ``below`` is the status on a miss."""
    ok = value >= limit.value if op == ">=" else value <= limit.value
    return result(
        check_id,
        title,
        "pass" if ok else below,
        subject=subject,
        measured=Measured(value=value, unit=unit),
        threshold=Threshold(op=op, value=limit.value, unit=unit, source=limit.source),
        detail=detail,
        hint=hint,
    )


def unknown(
    check_id: str,
    title: str,
    why: Unknown | str,
    *,
    subject: str = "",
    hint: str | None = None,
    status: Status = "fail",
) -> CheckResult:
    """A check that could not measure: fail (or ``status``) with the reason as detail; where its
    program never ran (:class:`NotRun`), the hint is what lets it run."""
    reason = why.unknown if isinstance(why, Unknown) else why
    if isinstance(why, NotRun):
        hint = why.fix
    return result(check_id, title, status, subject=subject, detail=reason, hint=hint)


def gpu_subject(index: int) -> str:
    """``gpu0``."""
    return f"gpu{index}"
