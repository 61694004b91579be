"""Checks that need two or more GPUs: P2P access and bandwidth, NCCL all-reduce (busbw), topology
paths (FF-14, FF-15). With one GPU they are skipped with that reason.
"""

from __future__ import annotations

from provision.detect.facts import Unknown
from provision.fieldfailures import ff_ref
from provision.verify.checks_gpu import expected_link
from provision.verify.context import Context, compare, result, unknown
from provision.verify.limits import ModelKey, Resolved, link_fraction, pcie_gbps, resolve, spec_override
from provision.verify.models import CheckResult, Measured, Threshold
from provision.verify.published import document, nvlink_floor
from provision.verify.runs import AllReduceRun


def gpu_total(ctx: Context) -> int:
    """GPUs seen by nvidia-smi, else by torch, else 0."""
    if not isinstance(ctx.gpus, Unknown):
        return len(ctx.gpus)
    run = ctx.run
    return 0 if isinstance(run, Unknown) else run.device_count


def _single(check_id: str, title: str, ctx: Context) -> CheckResult | None:
    n = gpu_total(ctx)
    return None if n >= 2 else unknown(check_id, title, f"{n} GPU(s): needs two or more", status="skip")


def p2p(ctx: Context) -> list[CheckResult]:
    """Every pair can access its peer, and each ordered pair copies above the floor."""
    title = "P2P access between every pair"
    if (skip := _single("p2p-access", title, ctx)) is not None:
        return [skip]
    run = ctx.run
    if isinstance(run, Unknown) or run.p2p is None:
        return [unknown("p2p-access", title, run if isinstance(run, Unknown) else "P2P not measured")]
    out = [_access(ctx, run.p2p.access)]
    out += [_pair(ctx, pair, gbps) for pair, gbps in sorted(run.p2p.bandwidth_gbps.items())]
    out += [
        unknown("p2p-bandwidth", "P2P copy bandwidth", err, subject=_pair_name(pair))
        for pair, err in sorted(run.p2p.errors.items())
    ]
    return out


def no_p2p(ctx: Context) -> str | None:
    """Why the platform offers no peer access (the catalog's model, e.g. GeForce), else None."""
    model = ctx.model
    if model is None or model.p2p.supported is not False:
        return None
    return f"NVIDIA's driver offers no P2P on {model.id} ({document(ctx.catalog, model.p2p)})"


def _access(ctx: Context, access: tuple[tuple[bool, ...], ...]) -> CheckResult:
    title = "P2P access between every pair"
    if (why := no_p2p(ctx)) is not None:
        return unknown("p2p-access", title, f"{why}: copies and NCCL go through host memory", status="skip")
    denied = [f"{i}->{j}" for i, row in enumerate(access) for j, ok in enumerate(row) if not ok]
    return result(
        "p2p-access",
        title,
        "fail" if denied else "pass",
        measured=Measured(value=f"denied {', '.join(denied)}" if denied else "all pairs"),
        threshold=Threshold(op="all", value="peer access", source=f"FF-14 ({ff_ref(14)})"),
        hint=_access_hint(ctx),
    )


def _access_hint(ctx: Context) -> str:
    """Disable ACS only where ACS redirect was seen on a bridge; otherwise the other causes."""
    hardware = ctx.facts.hardware
    acs = {} if isinstance(hardware, Unknown) or isinstance(hardware.acs, Unknown) else hardware.acs
    bridges = sorted(bdf for bdf, ctl in acs.items() if ctl.redirecting)
    if bridges:
        return f"ACS redirect on bridge(s) {', '.join(bridges)}: disable ACS, boot with iommu=pt (FF-14)."
    return (
        "No ACS redirect was seen: check the IOMMU (iommu=pt), the driver's P2P support for this "
        "platform, and that both GPUs sit under one root complex (FF-14, FF-15)."
    )


def _pair_name(pair: str) -> str:
    src, dst = pair.split("-")
    return f"gpu{src}-gpu{dst}"


def slowest_link(ctx: Context, indices: list[int]) -> tuple[int, int] | None:
    """The slowest expected PCIe link (gen, width) among GPUs ``indices``; None if one is unknown."""
    links = [expected_link(ctx, i) for i in indices]
    known = [(x[0], x[1]) for x in links if x is not None]
    if not known or len(known) != len(indices):
        return None
    return min(known, key=lambda gw: pcie_gbps(*gw))


FRACTIONS: dict[ModelKey, tuple[str, str, str]] = {
    "min_p2p_gbps": ("p2p_efficiency", "nvlink_p2p_fraction", "host_copy_efficiency"),
    "min_allreduce_busbw_gbps": (
        "allreduce_efficiency",
        "nvlink_allreduce_fraction",
        "allreduce_host_efficiency",
    ),
}
"""Per key, the ``verify.yaml`` fraction for a PCIe path, an NVLink path and a path through host memory."""


def _floor(ctx: Context, key: ModelKey, indices: list[int]) -> Resolved | None:
    """Spec override; on NVLink the model's measured row, else its published NVLink rate x fraction;
    without P2P the host-memory fraction of the slowest PCIe link; else the PCIe formula."""
    pcie, nvlink, host = FRACTIONS[key]
    override = spec_override(ctx.spec.verify, key)
    if override is not None:
        return override
    model, link = ctx.model, slowest_link(ctx, indices)
    if _nvlinked(ctx, indices):
        derived = nvlink_floor(ctx.catalog, ctx.limits, model, nvlink) if model else None
        row = resolve(ctx.limits, ctx.spec.verify, ctx.spec.gpus.model, key, derived)
        if row is not None:
            return row
    fraction = host if no_p2p(ctx) is not None else pcie
    return link_fraction(ctx.limits, fraction, *link) if link is not None else None


def _nvlinked(ctx: Context, indices: list[int]) -> bool:
    """Whether ``topo -m`` shows NV# between every two of the GPUs ``indices``."""
    topo = ctx.facts.topology
    if isinstance(topo, Unknown):
        return False
    return topo.nvlinked([f"GPU{i}" for i in indices])


def _pair(ctx: Context, pair: str, gbps: float) -> CheckResult:
    src, dst = (int(x) for x in pair.split("-"))
    limit = _floor(ctx, "min_p2p_gbps", [src, dst])
    title, subject = "P2P copy bandwidth", _pair_name(pair)
    if limit is None:
        return result(
            "p2p-bandwidth",
            title,
            "pass",
            subject=subject,
            measured=Measured(value=gbps, unit="GB/s"),
            detail="no floor known (set verify.min_p2p_gbps)",
        )
    return compare(
        "p2p-bandwidth",
        title,
        gbps,
        "GB/s",
        limit,
        ">=",
        subject=subject,
        detail="no P2P on this model: the copy is staged through host memory" if no_p2p(ctx) else "",
        hint="Slow pair: a chipset slot, a cross-socket path or traffic through the IOMMU (FF-15, FF-16).",
    )


def busbw_gbps(run: AllReduceRun) -> float | None:
    """nccl-tests bus bandwidth: algbw x 2(n-1)/n, algbw = bytes / slowest rank's seconds per iteration."""
    times = [r.seconds_per_iter for r in run.ranks if r.seconds_per_iter]
    sizes = [r.bytes for r in run.ranks if r.bytes]
    if not times or not sizes or run.world < 2:
        return None
    algbw = sizes[0] / max(times) / 1e9
    return algbw * 2 * (run.world - 1) / run.world


def allreduce(ctx: Context) -> list[CheckResult]:
    """NCCL all-reduce across all GPUs, one process each: completes in time, sums right, busbw floor."""
    title = "NCCL all-reduce across all GPUs"
    if (skip := _single("nccl-allreduce", title, ctx)) is not None:
        return [skip]
    run = ctx.inputs.allreduce
    if run is None or isinstance(run, Unknown):
        return [unknown("nccl-allreduce", title, run or "not run")]
    problem = allreduce_problem(run)
    hint = "A hang or error: check P2P (ACS/IOMMU, FF-14); NCCL_DEBUG=INFO shows the transport chosen."
    if problem is not None:
        return [unknown("nccl-allreduce", title, problem, hint=hint)]
    busbw = busbw_gbps(run)
    assert busbw is not None
    limit = _floor(ctx, "min_allreduce_busbw_gbps", list(range(run.world)))
    detail = f"{run.world} ranks, {(run.ranks[0].bytes or 0) / 2**20:.0f} MiB, busbw = algbw x 2(n-1)/n"
    if no_p2p(ctx) is not None:
        detail += "; no P2P on this model: NCCL's SHM transport through host memory"
    if limit is None:
        return [
            result(
                "nccl-allreduce",
                title,
                "pass",
                measured=Measured(value=busbw, unit="GB/s busbw"),
                detail=detail + "; no floor known",
            )
        ]
    return [compare("nccl-allreduce", title, busbw, "GB/s", limit, ">=", detail=detail, hint=hint)]


def allreduce_problem(run: AllReduceRun) -> str | None:
    """Why an all-reduce run failed (hang, rank error, wrong sum), or None when it is sound."""
    if run.timed_out:
        return f"hung: not finished within {run.timeout_s:.0f} s, all {run.world} ranks killed"
    errors = [f"rank {r.rank}: {r.error}" for r in run.ranks if r.error] + list(run.failures)
    if errors:
        return "; ".join(errors)
    if len(run.ranks) != run.world or not all(r.correct for r in run.ranks):
        return "wrong all-reduce result"
    return None


def topology(ctx: Context) -> list[CheckResult]:
    """Worst ``nvidia-smi topo -m`` path between GPUs vs spec gpus.max_path; worse only warns (FF-15)."""
    title = "topology paths between GPUs"
    if (skip := _single("topology", title, ctx)) is not None:
        return [skip]
    topo = ctx.facts.topology
    if isinstance(topo, Unknown):
        return [unknown("topology", title, topo)]
    worst = topo.worst_path()
    want: str | None = getattr(ctx.spec.gpus, "max_path", None)
    measured = Measured(value=f"worst {worst}")
    if want is None:
        return [
            result(
                "topology", title, "pass", measured=measured, detail="no requirement (gpus.max_path unset)"
            )
        ]
    bad = topo.pairs_worse_than(want)
    return [
        result(
            "topology",
            title,
            "warn" if bad else "pass",
            measured=measured,
            threshold=Threshold(op="<=", value=want, source=f"spec gpus.max_path; FF-15 ({ff_ref(15)})"),
            detail=f"worse than {want}: {', '.join(bad)}" if bad else "",
            hint="Software cannot fix placement: move cards or change NPS/NUMA in BIOS (FF-15).",
        )
    ]


CHECKS = (p2p, allreduce, topology)
