"""gpu-attached names a GPU fallen off the bus from lspci's all-ones read, not from nvidia-smi's text.

The held-out variant ``ho02-xid79-fallen-off-bus`` (``tests/fixtures/heldout-variants``) is the real
H200 capture with the GPU bound in sysfs, nvidia-smi failing on its handle and lspci showing rev ff.
The same capture with a responding function (rev a1) must stay unknown: nvidia-smi's failure alone
does not say which cause it is.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from provision.detect.runner import facts_from_raw
from provision.invariants.attached import GpuAttached
from provision.spec.loader import load_spec
from tests.unit.factories import CATALOG, ROOT

VARIANT = ROOT / "tests" / "fixtures" / "heldout-variants" / "ho02-xid79-fallen-off-bus"
BASE = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-03"
SPEC = ROOT / "specs" / "h200-ubuntu2404.yaml"


def _verdict(tmp_path: Path, revision: str) -> tuple[str, str, str]:
    target = tmp_path / "raw"
    shutil.copytree(BASE, target)
    for probe in VARIANT.glob("*.txt"):
        shutil.copyfile(probe, target / probe.name)
    lspci = target / "lspci-nn.txt"
    lspci.write_text(lspci.read_text().replace("(rev ff)", f"(rev {revision})"))
    verdict = GpuAttached().judge(load_spec(SPEC), facts_from_raw(target), CATALOG)
    return verdict.status, verdict.cause, verdict.source


def test_rev_ff_on_a_bound_gpu_is_fallen_off_the_bus(tmp_path: Path) -> None:
    status, cause, source = _verdict(tmp_path, "ff")
    assert status == "violated" and "fallen off the bus (Xid 79)" in cause
    assert "https://docs.nvidia.com/deploy/xid-errors/" in source and "57bdeef" in source


def test_a_responding_function_leaves_it_unknown(tmp_path: Path) -> None:
    status, cause, _ = _verdict(tmp_path, "a1")
    assert status == "unknown" and "Unable to determine the device handle" in cause
