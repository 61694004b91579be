"""gpu-count-mismatch names the sysfs binding when the missing GPU is on the bus under another driver.

Base: the real H200 capture with nvidia-smi answering "No devices were found" (the held-out variant
``ho07-vfio-pci-ids-left-over``'s probe files). With sysfs showing the GPU bound to vfio-pci, or to no
driver, the refusal carries gpu-bound's cause; with it bound to nvidia, the GPU is not served (Xid 79
or a failed initialisation) and the refusal keeps pointing at the kernel log.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from provision.detect.runner import facts_from_raw
from provision.plan.planner import make_plan
from provision.spec.loader import load_spec
from tests.unit.factories import CATALOG, ROOT

VARIANT = ROOT / "tests" / "fixtures" / "heldout-variants" / "ho07-vfio-pci-ids-left-over"
BASE = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-03"
SPEC = ROOT / "specs" / "h200-ubuntu2404.yaml"


def _refusal(tmp_path: Path, driver: str) -> str:
    target = tmp_path / "raw"
    shutil.copytree(BASE, target)
    for probe in VARIANT.glob("*.txt"):
        shutil.copyfile(probe, target / probe.name)
    sys_pci = target / "sys-pci.txt"
    sys_pci.write_text(sys_pci.read_text().replace("driver: vfio-pci", f"driver: {driver}".rstrip()))
    spec = load_spec(SPEC)
    plan = make_plan(
        spec, facts_from_raw(target, venv=str(spec.python.venv) if spec.python else None), CATALOG
    )
    found = [f for f in plan.blockers if f.rule == "gpu-count-mismatch"]
    assert len(found) == 1, [f.rule for f in plan.blockers]
    return f"{found[0].message} | {found[0].source}"


@pytest.mark.parametrize(
    ("driver", "named"),
    [
        ("vfio-pci", ("0000:00:06.0 vfio-pci", "vfio-pci.ids=", "driver-installation-guide")),
        ("", ("0000:00:06.0 unbound", "did not take the GPU", "dmesg")),
        ("nvidia", ("Xid 79", "xid-errors")),
    ],
)
def test_the_refusal_names_what_sysfs_shows(tmp_path: Path, driver: str, named: tuple[str, ...]) -> None:
    text = _refusal(tmp_path, driver)
    assert all(word in text for word in named), text
    assert ("Xid 79" in text) == (driver == "nvidia"), text
