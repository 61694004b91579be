"""What the GPU load program (``gpuload.py``) reports, as typed data, and the other verify inputs.

``VerifyInputs`` is everything the checks read: detection facts, the fabric probes and the load
program's output. Checks are pure functions of it, so a saved ``inputs.json`` (``verify
--save-raw``) replays a run exactly; the real H200 run is kept that way as a test fixture.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from provision.detect.facts import Facts, Unknown
from provision.detect.unknown import NotRun
from provision.models import Frozen

LEGACY_OBSERVED = ("serve", "monitoring")
"""Top-level keys of files saved before verify's readings moved under ``observed``."""


class Sample(Frozen):
    """One ``nvidia-smi`` reading taken while a load ran; None where the field is not supported."""

    index: float | None = None
    pcie_link_gen_current: float | None = None
    pcie_link_width_current: float | None = None
    temperature_gpu: float | None = None
    temperature_memory: float | None = None
    power_draw: float | None = None
    clocks_sm: float | None = None


class Phase(Frozen):
    """Samples of one load phase (``h2d-copy``, ``d2h-copy``, ``bf16-matmul``)."""

    phase: str
    samples: tuple[Sample, ...] = ()
    error: str | None = None


class GpuLoad(Frozen):
    """Measurements on one GPU (torch index = nvidia-smi index: CUDA_DEVICE_ORDER=PCI_BUS_ID).

    Units: GB/s (1e9 B/s), TFLOP/s (1e12), bytes, degrees C.
    """

    index: int
    name: str
    cc: str
    total_memory_bytes: int
    error: str | None = None
    ones_sum: float | None = None
    fp32_rel_error: float | None = None
    bf16_tflops: float | None = None
    bf16_rel_error: float | None = None
    iters: int | None = None
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    gpu_max_operating_c: float | None = None
    phases: tuple[Phase, ...] = ()

    def samples(self, *phases: str) -> tuple[Sample, ...]:
        """Samples of the named phases (all phases when none is named)."""
        return tuple(s for p in self.phases if not phases or p.phase in phases for s in p.samples)


class P2P(Frozen):
    """Peer access matrix (``access[i][j]``) and copy GB/s per ordered pair ``"i-j"``."""

    access: tuple[tuple[bool, ...], ...]
    bandwidth_gbps: dict[str, float] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)


class GpuRun(Frozen):
    """The ``gpus`` mode output: versions as torch sees them, per-GPU loads, P2P."""

    mode: str = "gpus"
    error: str | None = None
    torch: str | None = None
    cuda: str | None = None
    driver_cuda: int | None = Field(None, description="cudaDriverGetVersion: 13000 for CUDA 13.0.")
    cudnn: int | None = Field(None, description="torch.backends.cudnn.version(): 91900 for 9.19.0.")
    nccl: str | None = None
    arch_list: tuple[str, ...] = ()
    available: bool = False
    device_count: int = 0
    gpus: tuple[GpuLoad, ...] = ()
    p2p: P2P | None = None


class RankResult(Frozen):
    """One all-reduce rank's output."""

    mode: str = "allreduce"
    rank: int | None = None
    world: int | None = None
    backend: str | None = None
    bytes: int | None = None
    iters: int | None = None
    error: str | None = None
    correct: bool | None = None
    seconds_per_iter: float | None = None


class AllReduceRun(Frozen):
    """An all-reduce across ``world`` processes, one per GPU.

    Attributes:
        timed_out: The deadline passed with a rank still running (a hang); every rank was killed.
        ranks: The outputs of the ranks that printed one.
        failures: Per-rank reasons (exit status, stderr tail) of ranks that did not report.
    """

    world: int
    backend: str
    timeout_s: float
    seconds: float
    timed_out: bool = False
    ranks: tuple[RankResult, ...] = ()
    failures: tuple[str, ...] = ()


class FabricGpu(Frozen):
    """The ``Fabric`` section of ``nvidia-smi -q`` for one GPU (``N/A`` without NVSwitch)."""

    state: str
    status: str


class VerifyInputs(Frozen):
    """Everything the checks read, as collected on the machine (or replayed from a file).

    Attributes:
        fm_version: ``nv-fabricmanager --version``'s version, or why it is unknown.
        fabric: Only in files written before ``facts.fabric`` carried it; read through
            :meth:`fabric_states`, which prefers the facts.
        gpu_run: The load program's output, or why it did not run (no venv, timeout...).
        allreduce: None when not run (fewer than two GPUs or no CUDA).
        observed: What each component's observer read on the host (:mod:`provision.verify.observe`):
            key (``serve``, ``monitoring``, ``containers``) -> its run model, or the Unknown saying
            why it could not be read (the host probe did not run or gave no answer); a key is
            absent when the spec asks nothing of it (or a file saved before verify read it).
            Files saved with top-level ``serve`` / ``monitoring`` load into it.
    """

    facts: Facts
    fm_version: str | Unknown = Unknown(unknown="not probed")
    fabric: tuple[FabricGpu, ...] | Unknown = Unknown(unknown="not probed")
    gpu_run: GpuRun | NotRun | Unknown
    allreduce: AllReduceRun | Unknown | None = None
    observed: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _legacy_observed(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any(k in data for k in LEGACY_OBSERVED):
            return data
        moved = {k: data[k] for k in LEGACY_OBSERVED if data.get(k) is not None}
        rest = {k: v for k, v in data.items() if k not in LEGACY_OBSERVED}
        return {**rest, "observed": {**moved, **(rest.get("observed") or {})}}

    @field_validator("observed")
    @classmethod
    def _typed(cls, value: dict[str, Any]) -> dict[str, Any]:
        from provision.verify.observe import typed

        return typed(value)

    def fabric_states(self) -> tuple[FabricGpu, ...] | Unknown:
        """Each GPU's fabric (State, Status): detection's ``facts.fabric``, parsed once with the rest
        of ``nvidia-smi -q``; the ``fabric`` field only when the facts lack it (an older file)."""
        fabric = self.facts.fabric
        if isinstance(fabric, Unknown) and not isinstance(self.fabric, Unknown):
            return self.fabric
        if isinstance(fabric, Unknown):
            return fabric
        return tuple(FabricGpu(state=state, status=status) for state, status in fabric.states)
