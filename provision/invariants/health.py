"""The GPU's memory and clocks are healthy, and its modes are the ones the stack expects.

Sources: NVIDIA GPU Memory Error Management, "Error Recovery and Response Flags"
(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html);
NVML ``nvmlRemappedRowsInfo_v2_t`` (https://docs.nvidia.com/deploy/nvml-api/api/structnvmlRemappedRowsInfo__v2__t.html);
NVML clocks event reasons (https://docs.nvidia.com/deploy/nvml-api/api/group__nvmlClocksEventReasons.html);
NVIDIA MIG User Guide (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/).
"""

from __future__ import annotations

from provision.catalog import Catalog
from provision.detect.facts import Facts, Unknown
from provision.invariants.base import Invariant, Verdict
from provision.spec.models import Spec

MEM_ERRORS = (
    "NVIDIA GPU Memory Error Management, Error Recovery and Response Flags "
    "(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html)"
)
SLOWDOWNS = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")
"""Clock events that mean the GPU is held below its clocks by heat or power, not by choice."""


class GpuMemoryHealthy(Invariant):
    """No row remap pending, no remapping failure, no uncorrectable DRAM error since the driver loaded."""

    id = "gpu-memory-healthy"
    title = "GPU memory healthy (row remapping, ECC)"
    layer = "gpu"
    source = MEM_ERRORS
    reads = ("gpu_health",)
    severity = "warning"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        health = facts.gpu_health
        if isinstance(health, Unknown):
            return self.unknown(health)
        if not health:
            return self.not_applicable("nvidia-smi -q lists no GPU")
        failed = [h.bdf for h in health if h.remapping_failed]
        pending = [h.bdf for h in health if h.remapped_rows_pending]
        dram = [f"{h.bdf} {h.dram_uncorrectable_volatile}" for h in health if h.dram_uncorrectable_volatile]
        if failed:
            return self.violated(
                f"row remapping failed on {', '.join(failed)}",
                "the GPU ran out of spare rows for its memory errors",
                "the GPU needs service (RMA, per NVIDIA's row-remapping policy); take it out of use",
            )
        if pending:
            return self.violated(
                f"row remap pending on {', '.join(pending)}",
                "a memory row was marked for remapping, applied at the next GPU reset",
                "reset the GPU when idle (nvidia-smi -r -i <gpu>) or reboot",
            )
        if dram:
            return self.violated(
                f"uncorrectable DRAM ECC errors since load: {', '.join(dram)}",
                "the memory reported uncorrectable errors (workloads may have been killed)",
                "check dmesg for Xid 48/63/64, reset the GPU, and watch whether the count grows",
            )
        return self.holds(f"{len(health)} GPU(s): no pending or failed row remap, no uncorrectable error")


class ClocksNotHeldDown(Invariant):
    """No GPU held below its clocks by a hardware or thermal slowdown."""

    id = "gpu-clocks-not-slowed"
    title = "no thermal or power slowdown active"
    layer = "gpu"
    source = "NVML clocks event reasons (https://docs.nvidia.com/deploy/nvml-api/api/group__nvmlClocksEventReasons.html)"
    reads = ("gpu_health",)
    severity = "warning"
    checklist = ("cooling", "psu-sizing")

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        health = facts.gpu_health
        if isinstance(health, Unknown):
            return self.unknown(health)
        slowed = [(h.bdf, [e for e in h.clock_events if e in SLOWDOWNS]) for h in health]
        slowed = [(b, e) for b, e in slowed if e]
        if not slowed:
            return self.holds("no hardware, thermal or power-brake slowdown active")
        thermal = any("Thermal" in e for _, events in slowed for e in events)
        return self.violated(
            "; ".join(f"{b}: {', '.join(e)}" for b, e in slowed),
            "the GPU is too hot" if thermal else "the board or power supply asserts a power brake",
            "check airflow and fan curves (checklist item cooling)"
            if thermal
            else "check the PSU rating and cabling (checklist item psu-sizing)",
        )


class MigAsSpecified(Invariant):
    """MIG is off: the stack provision builds uses whole GPUs (MIG instances hide them from CUDA)."""

    id = "mig-off"
    title = "MIG mode off"
    layer = "gpu"
    source = "NVIDIA MIG User Guide (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/)"
    reads = ("gpus",)
    severity = "warning"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        if isinstance(facts.gpus, Unknown):
            return self.unknown(facts.gpus)
        on = [f"gpu{g.index}" for g in facts.gpus if g.mig_mode]
        if not on:
            return self.holds("MIG disabled or not supported on every GPU")
        return self.violated(
            f"MIG enabled on {', '.join(on)}",
            "MIG partitions the GPU; CUDA sees MIG instances, not the whole GPU",
            "nvidia-smi -i <gpu> -mig 0, then reset the GPU",
        )


class EccOn(Invariant):
    """ECC is on where the GPU has it (off, a memory error corrupts data silently)."""

    id = "ecc-on"
    title = "ECC enabled where supported"
    layer = "gpu"
    source = MEM_ERRORS
    reads = ("gpus",)
    severity = "warning"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        if isinstance(facts.gpus, Unknown):
            return self.unknown(facts.gpus)
        off = [g.index for g in facts.gpus if g.ecc_mode is False]
        if not off:
            return self.holds("ECC enabled or not supported on every GPU")
        observed = f"ECC disabled on {', '.join(f'gpu{i}' for i in off)}"
        if off and set(off) <= _ecc_pending_on(facts):
            return self.violated(
                observed,
                "ECC was turned on (nvidia-smi -e 1) and is pending: the mode changes only when the GPU "
                "is reset",
                "reboot (or reset the idle GPU: nvidia-smi -r -i <gpu>)",
            )
        return self.violated(
            observed, "ECC was turned off (nvidia-smi -e 0)", "nvidia-smi -i <gpu> -e 1, then reboot"
        )


def _ecc_pending_on(facts: Facts) -> set[int]:
    """nvidia-smi indexes of the GPUs whose ``ECC Mode`` is Current Disabled, Pending Enabled (-q); empty
    when that could not be read. Source: NVML nvmlDeviceSetEccMode, "takes effect after reboot"
    (https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceCommands.html)."""
    states = facts.gpu_state
    if isinstance(states, Unknown):
        return set()
    return {s.index for s in states if s.ecc_current is False and s.ecc_pending is True}
