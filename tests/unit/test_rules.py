"""Cross-field spec rules: each rule fires on a spec built for it and stays silent on a good spec."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from provision.catalog import Architecture, Catalog, load_catalog
from provision.plan.models import Finding
from provision.spec import rules
from provision.spec.models import Spec
from provision.spec.rules import blockers_and_warnings, check_spec, resolve_flavor
from provision.versions import DottedVersion

GOOD: dict[str, Any] = {
    "name": "good",
    "os": {"distro": "ubuntu", "version": "24.04"},
    "gpus": {"model": "a100x", "count": 2},
    "driver": {"branch": 580, "flavor": "open"},
    "cuda": {"toolkit": "13.0"},
    "python": {"interpreter": "3.12", "venv": "/opt/venv", "torch": "2.11.0", "cuda_variant": "cu130"},
}
DROP = object()
"""Override value that removes the key."""


def make(**overrides: Any) -> Spec:
    """GOOD with ``section__key=value`` overrides (``python=DROP`` removes a section)."""
    data = copy.deepcopy(GOOD)
    for path, value in overrides.items():
        *parents, key = path.split("__")
        node = data
        for part in parents:
            node = node[part]
        if value is DROP:
            node.pop(key, None)
        else:
            node[key] = value
    return Spec.model_validate(data)


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def cat_volta(cat: Catalog) -> Catalog:
    """The catalog plus a stand-in Volta GPU (cc 7.0), to exercise the pre-Turing rules."""
    volta = cat.gpus["a100-pcie-40gb"].model_copy(
        update={
            "id": "volta-test",
            "architecture": Architecture.VOLTA,
            "compute_capability": DottedVersion("7.0"),
        }
    )
    return cat.model_copy(update={"gpus": {**cat.gpus, "volta-test": volta}})


def by_rule(findings: tuple[Finding, ...], rule: str) -> Finding:
    found = [f for f in findings if f.rule == rule]
    assert len(found) == 1, findings
    return found[0]


@pytest.mark.parametrize(
    "spec",
    [
        make(),
        make(gpus__model="h200-sxm", gpus__count=1, driver__source="preinstalled"),
        make(gpus__model="h100-sxm", gpus__count=8, driver__version="580.95.05", fabric_manager="required"),
        make(gpus__model="rtx-5090", gpus__count=1, driver__flavor="auto"),
        make(
            gpus__model="b200",
            gpus__count=8,
            cuda__toolkit="12.8",
            driver__branch=570,
            python=DROP,
            os__version="12",
            os__distro="debian",
        ),
        make(
            os__distro="debian",
            os__version="12",
            driver__branch=535,
            cuda=DROP,
            python=DROP,
            driver__source="distro",
        ),
        make(driver__version="580.65.06"),
        make(python__torch="2.12.1", python__cuda_variant="cu132", cuda=DROP, driver__branch=595),
    ],
    ids=[
        "dual-a100x",
        "h200-vm",
        "hgx-h100",
        "rtx5090-auto",
        "b200-debian12",
        "debian12-distro",
        "exact-ga",
        "cu132",
    ],
)
def test_good_specs_are_silent(cat: Catalog, spec: Spec) -> None:
    assert check_spec(spec, cat) == ()


# (overrides, rule id, severity, text the message must contain)
CASES: list[tuple[dict[str, Any], str, str, str]] = [
    ({"gpus__model": "a100-128gb"}, "gpu-model-unknown", "blocker", "valid ids: a100-pcie-40gb"),
    ({"cuda__toolkit": "12.7"}, "cuda-release-unknown", "blocker", "12.7 is not in the catalog"),
    (
        {"cuda__toolkit": "13.5"},
        "cuda-release-unknown",
        "blocker",
        "13.5 has no sourced toolkit driver (unverified:",
    ),
    (
        {"driver__branch": 575, "python": DROP},
        "cuda-driver-floor",
        "blocker",
        "CUDA 13.0 needs driver branch >= 580 (CUDA 13.x minor-version compatibility floor); "
        "full support from 580.65.06",
    ),
    (
        {"driver__branch": 520, "cuda__toolkit": "12.0", "python": DROP},
        "cuda-driver-floor",
        "blocker",
        "needs driver branch >= 525",
    ),
    (
        {"cuda__toolkit": "13.2", "python": DROP, "os__version": "22.04"},
        "cuda-driver-minor-compat",
        "warning",
        "driver branch 580 is below the toolkit driver 595.45.04 (CUDA 13.2 GA)",
    ),
    (
        {"driver__version": "580.60.01"},
        "cuda-driver-minor-compat",
        "warning",
        "driver 580.60.01 is below the toolkit driver 580.65.06",
    ),
    (
        {"driver__branch": 550, "cuda__toolkit": "12.8", "python": DROP, "os__version": "22.04"},
        "cuda-driver-minor-compat",
        "warning",
        "use >= 570.26 for full support",
    ),
    ({"python__torch": "2.3.0"}, "torch-release-unknown", "blocker", "known: 2.4, 2.5"),
    ({"python__torch": "2.14.0"}, "torch-release-unconfirmed", "warning", "torch 2.14 is planned"),
    (
        {"python__torch": "2.12.0", "python__cuda_variant": "cu128", "cuda": DROP},
        "torch-variant-unpublished",
        "blocker",
        "published variants: cu126, cu129 (from 2.12.1), cu130, cu132",
    ),
    (
        {"python__torch": "2.12.0", "python__cuda_variant": "cu129", "cuda": DROP},
        "torch-variant-unpublished",
        "blocker",
        "no cu129 wheels",
    ),
    (
        {"driver__branch": 575, "cuda": DROP},
        "torch-driver-floor",
        "blocker",
        "torch cu130 (CUDA 13.0) needs driver branch >= 580 (CUDA 13.x minor-version compatibility floor); "
        "full support from 580.65.06 (CUDA 13.0 GA toolkit driver); spec driver.branch is 575",
    ),
    (
        {"driver__branch": 520, "cuda": DROP, "python__torch": "2.7.0", "python__cuda_variant": "cu128"},
        "torch-driver-floor",
        "blocker",
        "needs driver branch >= 525",
    ),
    (
        {"driver__branch": 550, "cuda": DROP, "python__torch": "2.10.0", "python__cuda_variant": "cu128"},
        "torch-driver-minor-compat",
        "warning",
        "torch cu128 (CUDA 12.8): driver branch 550 is below the toolkit driver 570.26",
    ),
    (
        {"python__cuda_variant": "cu128"},
        "torch-cuda-major-mismatch",
        "warning",
        "python.cuda_variant cu128 (CUDA 12.8) and cuda.toolkit 13.0 differ in major",
    ),
    (
        {"python__interpreter": "3.9"},
        "python-version-range",
        "blocker",
        "python.interpreter 3.9 is outside torch 2.11's supported range 3.10-3.14",
    ),
    (
        {
            "gpus__model": "rtx-5090",
            "gpus__count": 1,
            "cuda": DROP,
            "python__torch": "2.6.0",
            "python__cuda_variant": "cu124",
        },
        "torch-arch-missing",
        "blocker",
        "GPU rtx-5090 cc 12.0 not in wheel arch list of torch 2.6.0+cu124 (sm_50, sm_60, sm_70, sm_75, "
        "sm_80, sm_86, sm_90+PTX); need torch >= 2.7.0 with cu128 (or newer)",
    ),
    (
        {
            "gpus__model": "b200",
            "gpus__count": 1,
            "cuda": DROP,
            "python__torch": "2.11.0",
            "python__cuda_variant": "cu126",
        },
        "torch-arch-missing",
        "blocker",
        "use cu128 or cu129 or cu130 with torch 2.11",
    ),
    (
        {"gpus__model": "rtx-5090", "driver__flavor": "proprietary"},
        "flavor-open-required",
        "blocker",
        "Blackwell GPU rtx-5090 (GB202) requires driver.flavor open",
    ),
    (
        {"driver__branch": 620, "driver__flavor": "proprietary"},
        "flavor-proprietary-removed",
        "blocker",
        "driver branch 620 has no proprietary kernel modules (removed from 620); set driver.flavor: open",
    ),
    (
        {"gpus__model": "gh200", "driver__flavor": "proprietary", "os__version": "22.04"},
        "flavor-open-required",
        "blocker",
        "GPU gh200",
    ),
    (
        {
            "gpus__model": "b200",
            "cuda__toolkit": "12.6",
            "python": DROP,
            "driver__branch": 580,
            "gpus__count": 2,
        },
        "arch-min-cuda",
        "blocker",
        "GPU b200 (cc 10.0) needs CUDA >= 12.8; spec cuda.toolkit is 12.6",
    ),
    (
        {"gpus__model": "rtx-5090", "driver__branch": 565, "cuda__toolkit": "12.6", "python": DROP},
        "arch-min-branch",
        "blocker",
        "Blackwell GPU rtx-5090 needs driver branch >= 570; spec driver.branch is 565",
    ),
    ({"driver__branch": 600}, "driver-branch-unknown", "warning", "driver branch 600 is not in the catalog"),
    ({"os__version": "20.04"}, "os-repo-unserved", "blocker", "serves no ubuntu2004 (x86_64)"),
    (
        {"cuda__toolkit": "13.1", "python": DROP, "driver__branch": 590},
        "os-repo-cuda-unconfirmed",
        "warning",
        "CUDA 13.1 is not confirmed in NVIDIA's ubuntu2404 repository (confirmed: 12.6, 13.0)",
    ),
    (
        {"fabric_manager": "required"},
        "fm-without-nvswitch",
        "blocker",
        "fabric_manager: required, but a100x has no NVSwitch",
    ),
    (
        {"gpus__model": "h100-sxm", "gpus__count": 8, "fabric_manager": "disabled"},
        "fm-disabled-on-nvswitch",
        "blocker",
        "8 x h100-sxm is an NVSwitch system: fabric manager is required",
    ),
    (
        {"driver__source": "distro", "os__version": "22.04"},
        "driver-distro-unknown",
        "blocker",
        "no NVIDIA driver packages in ubuntu2204's own archive",
    ),
    (
        {"driver__source": "distro", "driver__branch": 570},
        "driver-distro-branch",
        "blocker",
        "ubuntu2404's archive carries driver branch 580, not 570",
    ),
    (
        {"driver__source": "distro", "os__distro": "debian", "os__version": "12"},
        "driver-distro-branch",
        "blocker",
        "debian12's archive carries driver branch 535, not 580",
    ),
    (
        {
            "driver__source": "distro",
            "os__distro": "debian",
            "os__version": "12",
            "driver__branch": 535,
            "cuda__toolkit": "12.2",
            "python": DROP,
            "gpus__model": "h100-sxm",
            "gpus__count": 8,
        },
        "driver-distro-no-fm",
        "blocker",
        "debian12's archive has no fabric manager",
    ),
    (
        {
            "driver__source": "distro",
            "cuda": DROP,
            "python": DROP,
            "gpus__model": "h100-sxm",
            "gpus__count": 8,
        },
        "driver-distro-fm-unplanned",
        "blocker",
        "nvidia-fabricmanager-580 is not planned yet",
    ),
    (
        {"cuda__cudnn": "8.9"},
        "cudnn-major-unpackaged",
        "blocker",
        "cuda.cudnn 8.9 is cuDNN 8, but NVIDIA's repository packages cuDNN 9 for CUDA 13 (libcudnn9-cuda-13)",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "rule", "severity", "text"), CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)]
)
def test_rule_fires(cat: Catalog, overrides: dict[str, Any], rule: str, severity: str, text: str) -> None:
    finding = by_rule(check_spec(make(**overrides), cat), rule)
    assert finding.severity == severity
    assert text in finding.message
    assert re.search(r"\([A-Z0-9-]+\)", finding.source) or finding.source.startswith("provision catalog")


VOLTA_CASES: list[tuple[dict[str, Any], str, str]] = [
    (
        {"driver__flavor": "open"},
        "flavor-proprietary-required",
        "Volta GPU volta-test requires driver.flavor proprietary",
    ),
    (
        {"driver__flavor": "proprietary", "driver__branch": 590},
        "driver-branch-too-new-for-arch",
        "R580 is the last branch for Volta GPUs (volta-test); spec driver.branch is 590",
    ),
    ({"driver__flavor": "auto"}, "torch-arch-missing", "use cu126 with torch 2.11"),
]


@pytest.mark.parametrize(("overrides", "rule", "text"), VOLTA_CASES, ids=[c[1] for c in VOLTA_CASES])
def test_pre_turing_rules(cat_volta: Catalog, overrides: dict[str, Any], rule: str, text: str) -> None:
    finding = by_rule(check_spec(make(gpus__model="volta-test", **overrides), cat_volta), rule)
    assert (finding.severity, text in finding.message) == ("blocker", True)


def test_impossible_a100x_is_refused_with_its_reasons(cat: Catalog) -> None:
    spec = make(driver__branch=575, cuda__toolkit="13.5")
    blockers, _ = blockers_and_warnings(check_spec(spec, cat))
    assert [f.rule for f in blockers] == ["cuda-release-unknown", "cuda-driver-floor", "torch-driver-floor"]
    assert "CUDA 13.2 U2 release notes" in blockers[1].source


def test_single_sxm_gpu_may_disable_fm(cat: Catalog) -> None:
    spec = make(gpus__model="h200-sxm", gpus__count=1, fabric_manager="disabled")
    assert check_spec(spec, cat) == ()


@pytest.mark.parametrize(
    ("model", "flavor", "expected"),
    [
        ("a100x", "auto", "open"),
        ("rtx-5090", "auto", "open"),
        ("volta-test", "auto", "proprietary"),
        ("volta-test", "open", "open"),
        ("a100x", "proprietary", "proprietary"),
        ("not-a-gpu", "auto", "open"),
    ],
)
def test_resolve_flavor(cat_volta: Catalog, model: str, flavor: str, expected: str) -> None:
    assert resolve_flavor(make(gpus__model=model, driver__flavor=flavor), cat_volta) == expected


def test_every_documented_rule_is_tested() -> None:
    documented = set(re.findall(r"[a-z]+(?:-[a-z0-9]+)+", rules.__doc__.split("Rule ids:")[1]))  # type: ignore[union-attr]
    tested = {c[1] for c in CASES} | {c[1] for c in VOLTA_CASES}
    assert documented == tested


# ---- validate runs the planner's spec-only rules ----------------------------------------------------


def test_validate_refuses_a_fabric_manager_without_an_exact_driver(cat: Catalog) -> None:
    from provision.plan.validate import validate_spec

    spec = make(gpus__model="h200-sxm", gpus__count=8, python=DROP, cuda=DROP)
    rules = [f.rule for f in validate_spec(spec, cat) if f.severity == "blocker"]
    assert rules == ["fabric-manager-needs-exact-driver"]
    pinned = make(gpus__model="h200-sxm", gpus__count=8, driver__version="580.95.05", python=DROP, cuda=DROP)
    assert not [f for f in validate_spec(pinned, cat) if f.rule == "fabric-manager-needs-exact-driver"]


def test_validate_and_plan_give_the_same_exact_driver_finding(cat: Catalog) -> None:
    from provision.detect.runner import unknown_facts
    from provision.plan.planner import make_plan
    from provision.plan.validate import validate_spec

    spec = make(gpus__model="h200-sxm", gpus__count=8, python=DROP, cuda=DROP)
    planned = make_plan(spec, unknown_facts("box", "not read"), cat).blockers
    validated = validate_spec(spec, cat)
    rule = "fabric-manager-needs-exact-driver"
    assert [f for f in planned if f.rule == rule] == [f for f in validated if f.rule == rule]


def test_validate_accepts_driver_source_distro_for_a_branch_the_archive_carries(cat: Catalog) -> None:
    from provision.plan.validate import validate_spec

    spec = make(
        os__distro="debian",
        os__version="12",
        driver__source="distro",
        driver__branch=535,
        cuda=DROP,
        python=DROP,
    )
    assert [f.rule for f in validate_spec(spec, cat) if f.severity == "blocker"] == []
