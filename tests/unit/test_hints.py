"""Verify's device-count hint names a cause only when its evidence is there (no fabric manager
blamed for a library clash, forward compatibility or a CPU-only wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.detect.facts import FabricState, Facts, PciDevice, Torch
from provision.detect.raw import read_raw
from provision.detect.registry import facts_from_outputs
from provision.verify.hints import GENERIC, device_count_hint

CAPTURE = Path(__file__).parents[1] / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01"
H200 = facts_from_outputs(read_raw(CAPTURE), host="h200")
NVSWITCH = H200.model_copy(
    update={
        "nvidia_pci": (PciDevice(bdf="0000:05:00.0", class_code="0680", device_id="22a3"),),
        "fabric": FabricState(states=(("In Progress", "N/A"),)),
    }
)
assert isinstance(H200.torch, Torch)
CPU_TORCH = H200.model_copy(update={"torch": H200.torch.model_copy(update={"cuda": None})})
MIG = H200.model_copy(
    update={"gpus": tuple(g.model_copy(update={"mig_mode": True}) for g in H200.gpus)}  # type: ignore[union-attr]
)
E802 = "RuntimeError: CUDA error: system not yet initialized (802)"


@pytest.mark.parametrize(
    ("facts", "error", "names", "never"),
    [
        (NVSWITCH, E802, "fabricmanager", "CPU-only"),
        (H200, E802, "driver is not ready", "fabricmanager"),
        (
            H200,
            "RuntimeError: forward compatibility was attempted on non supported HW (804)",
            "compat",
            "fabric",
        ),
        (H200, "ImportError: libcudnn.so.9: cannot open shared object file", "LD_LIBRARY_PATH", "fabric"),
        (NVSWITCH, "ImportError: undefined symbol: cudnnGetVersion", "LD_LIBRARY_PATH", "fabric"),
        (CPU_TORCH, E802, "CPU-only", "fabric"),
        (MIG, "", "MIG", "fabric"),
        (H200, "", "lspci", "fabric"),
    ],
    ids=[
        "802-nvswitch",
        "802-no-nvswitch",
        "forward-compat",
        "library",
        "library-on-nvswitch",
        "cpu-torch",
        "mig",
        "no-evidence",
    ],
)
def test_device_count_hint_follows_the_evidence(facts: Facts, error: str, names: str, never: str) -> None:
    hint = device_count_hint(facts, error)
    assert names in hint and never not in hint


def test_no_evidence_gives_the_generic_hint() -> None:
    assert device_count_hint(H200) == GENERIC
