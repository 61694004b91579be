"""GPU settings and MIG checks: what ``gpu:`` sets is what nvidia-smi shows, the persistence daemon
is as the spec says, no one else capped a GPU's power below its default, and the MIG layout is the
spec's (``nvidia-smi mig -lgi``). Judged with the planner's own comparisons
(``components/gpu_settings.py``, ``components/mig.py``) over detection's facts.
"""

from __future__ import annotations

from provision.components.base import PlanContext
from provision.detect.facts import Unknown
from provision.verify.context import Context, result
from provision.verify.models import CheckResult, Measured, Threshold

SOURCE = "spec gpu: (docs/gpu-settings.md)"


def _plan_context(ctx: Context) -> PlanContext:
    from provision.plan.planner import context

    return context(ctx.spec, ctx.facts, ctx.catalog)


def settings(ctx: Context) -> list[CheckResult]:
    """Each GPU's power limit, application clocks, compute mode and ECC mode as the spec sets them,
    and the boot unit on disk is the spec's (locked clocks are held by it)."""
    from provision.components.gpu_settings import boot_unit_step, ecc_step, observed_differences, wanted

    title = "GPU settings as the spec sets them"
    section = ctx.spec.gpu
    if section is None or not section.settings:
        return []  # not asked: no result, as for a component the spec does not name
    pctx = _plan_context(ctx)
    gpus, problems = wanted(pctx)
    differ = [d for w in gpus for d in observed_differences(w)]
    ecc = ecc_step(pctx)
    if ecc.changes:
        differ.append(ecc.current or "ECC differs")
    elif "pending" in ecc.reason:
        differ.append(ecc.reason)
    unit = boot_unit_step(pctx)
    if unit.changes:
        differ.append(f"boot unit {unit.current}")
    differ += [p.message for p in problems]
    return [
        result(
            "gpu-settings",
            title,
            "fail" if differ else "pass",
            measured=Measured(value="; ".join(differ) if differ else "as set"),
            threshold=Threshold(op="==", value="spec", source=SOURCE),
            hint="Run provision apply; an ECC change takes effect only after a reboot.",
        )
    ]


def power_drift(ctx: Context) -> list[CheckResult]:
    """No GPU runs under an enforced power limit below its default that the spec did not set.

    With a ``gpu:`` section it always reports; without one only a GPU that drifted (a warning), so
    that a spec that manages nothing of the GPUs' state gets no result it did not ask for."""
    from provision.components.gpu_settings import drift_findings

    title = "no power limit below the default that the spec did not set"
    if isinstance(ctx.facts.gpu_state, Unknown):
        asked = ctx.spec.gpu is not None
        return (
            [result("gpu-power-limit-drift", title, "skip", detail=ctx.facts.gpu_state.unknown)]
            if asked
            else []
        )
    drift = list(drift_findings(_plan_context(ctx)))
    if not drift and ctx.spec.gpu is None:
        return []
    return [
        result(
            "gpu-power-limit-drift",
            title,
            "warn" if drift else "pass",
            measured=Measured(value="; ".join(f.message.split(":")[0] for f in drift) or "none"),
            detail="; ".join(f.message for f in drift),
            hint=drift[0].message if drift else None,
        )
    ]


def persistenced(ctx: Context) -> list[CheckResult]:
    """nvidia-persistenced.service active and enabled (or stopped and disabled) as ``gpu.persistence``."""
    from provision.components.gpu_settings import persistence_step

    title = "nvidia-persistenced as the spec sets it"
    section = ctx.spec.gpu
    if section is None or section.persistence is None:
        return []
    step = persistence_step(_plan_context(ctx), section.persistence)
    return [
        result(
            "gpu-persistenced",
            title,
            "fail" if step.changes else "pass",
            measured=Measured(value=step.current or "not observed"),
            threshold=Threshold(
                op="==",
                value="active, enabled" if section.persistence else "inactive, disabled",
                source=SOURCE,
            ),
            hint="Run provision apply (it enables and starts the daemon).",
        )
    ]


def mig_layout(ctx: Context) -> list[CheckResult]:
    """Each GPU's MIG mode and GPU instances as ``gpu.mig`` sets them (``nvidia-smi mig -lgi``)."""
    from provision.components.mig import layout_step, mode_step, wanted

    title = "MIG mode and layout as the spec sets them"
    section = ctx.spec.gpu
    if section is None or not section.mig:
        return []
    pctx = _plan_context(ctx)
    out = []
    for want in wanted(pctx):
        steps = [mode_step(pctx, want), layout_step(pctx, want)]
        differ = [s.reason for s in steps if s.changes]
        subject = f"gpu{want.target.state.index}" if want.target.state is not None else want.target.ident
        out.append(
            result(
                "mig-layout",
                title,
                "fail" if differ else "pass",
                subject=subject,
                measured=Measured(value=steps[1].current or "not observed"),
                threshold=Threshold(op="==", value=str(want.layout or "MIG off"), source=SOURCE),
                detail="; ".join(differ),
                hint="Run provision apply; a MIG mode change needs a GPU reset or a reboot (see the plan).",
            )
        )
    return out


CHECKS = (settings, power_drift, persistenced, mig_layout)
