"""The compatibility catalog: it loads, every row is sourced, and the facts match their sources.

The sources are the public documents of ``provision/catalog/data/sources.yaml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from provision.catalog import Architecture, Catalog, load_catalog, load_catalog_from
from provision.catalog.loader import DATA_DIR, catalog_files
from provision.catalog.tables import _sourced
from provision.errors import CatalogError
from provision.versions import DottedVersion, DriverVersion

REQUIRED_GPUS = (
    "a100x",
    "a100-pcie-40gb",
    "a100-pcie-80gb",
    "a100-sxm4-40gb",
    "a100-sxm4-80gb",
    "h100-pcie",
    "h100-sxm",
    "h100-nvl",
    "h200-sxm",
    "h200-nvl",
    "l40s",
    "rtx-4090",
    "rtx-5090",
    "rtx-pro-6000-blackwell",
    "b200",
    "a30",
    "a40",
    "l4",
    "rtx-6000-ada",
    "gh200",
)
CATALOG_FILES = tuple(p.name for p in catalog_files(DATA_DIR) if p.parent == DATA_DIR)
"""The catalog's top-level files, as the loader reads them (components/ is copied by the tests
that need it)."""


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    for name in CATALOG_FILES:
        shutil.copy(DATA_DIR / name, tmp_path / name)
    return tmp_path


def test_the_files_hashed_for_the_snapshot_are_the_files_read_one_by_one() -> None:
    """loader.catalog_files (the snapshot's and prebuilt.json's digest) and tables (the file
    models) name the tables in two modules, so that a start-up never imports the file models; a
    table read but not hashed would let an edit of it be served from the old snapshot."""
    from provision.catalog.tables import _Files

    assert tuple(f"{field}.yaml" for field in _Files.model_fields) == CATALOG_FILES


def test_load_is_cached(cat: Catalog) -> None:
    assert load_catalog() is cat


def test_every_row_has_a_defined_source_and_conf(cat: Catalog) -> None:
    rows = list(_sourced(cat))
    assert len(rows) > 100
    for row in rows:
        assert row.source, row
        assert set(row.source) <= set(cat.sources), row
        assert row.conf in ("P", "S", "U")


@pytest.mark.parametrize(
    ("release", "driver"),
    [
        ("11.8", "520.61.05"),
        ("12.0", "525.60.13"),
        ("12.4", "550.54.14"),
        ("12.6", "560.28.03"),
        ("12.8", "570.26"),
        ("12.9", "575.51.03"),
        ("13.0", "580.65.06"),
        ("13.1", "590.44.01"),
        ("13.2", "595.45.04"),
        ("13.3", "610.43.02"),
    ],
)
def test_cuda_ga_toolkit_driver(cat: Catalog, release: str, driver: str) -> None:
    found = cat.cuda_release(DottedVersion(release))
    assert found is not None and found.verified
    assert found.toolkit_driver == DriverVersion(driver)
    assert str(found.toolkit_driver) == driver


@pytest.mark.parametrize(
    ("release", "floor"), [("11.8", 450), ("12.0", 525), ("12.9", 525), ("13.0", 580), ("13.2", 580)]
)
def test_cuda_family_floor(cat: Catalog, release: str, floor: int) -> None:
    found = cat.cuda_release(DottedVersion(release))
    assert found is not None and found.family_floor == floor


@pytest.mark.parametrize(
    ("version", "driver"), [("12.8.1", "570.124.06"), ("13.0.2", "580.95.05"), ("12.2.1", "535.86.09")]
)
def test_cuda_update_rows_kept(cat: Catalog, version: str, driver: str) -> None:
    release = cat.cuda_release(DottedVersion(version))
    assert release is not None
    row = next(r for r in release.updates if r.version == DottedVersion(version))
    assert row.toolkit_driver == DriverVersion(driver)


def test_cuda_12_8_runfile_discrepancy_kept(cat: Catalog) -> None:
    release = cat.cuda_release(DottedVersion("12.8"))
    assert release is not None
    assert release.updates[0].runfile_driver == DriverVersion("570.86.10")


@pytest.mark.parametrize("release", ["13.4", "13.5"])
def test_unsourced_cuda_releases_are_unverified(cat: Catalog, release: str) -> None:
    found = cat.cuda_release(DottedVersion(release))
    assert found is not None
    assert (found.toolkit_driver, found.conf, found.verified) == (None, "U", False)


@pytest.mark.parametrize("release", ["12.7", "11.7", "14.0"])
def test_absent_cuda_releases(cat: Catalog, release: str) -> None:
    assert cat.cuda_release(DottedVersion(release)) is None


@pytest.mark.parametrize(
    ("torch", "variant", "present", "absent"),
    [
        ("2.11.0", "cu130", "sm_90", "sm_70"),
        ("2.11.0", "cu128", "sm_120", "sm_70"),
        ("2.10.0", "cu128", "sm_70", "sm_50"),
        ("2.9.1", "cu129", "sm_70", "sm_60"),
        ("2.7.0", "cu128", "sm_120", "sm_70"),
        ("2.11.0", "cu126", "sm_50", "sm_100"),
        ("2.6.0", "cu124", "sm_90", "sm_100"),
        ("2.13.0", "cu132", "sm_100", "sm_70"),
    ],
)
def test_torch_arch_lists(cat: Catalog, torch: str, variant: str, present: str, absent: str) -> None:
    release = cat.torch_release(Version(torch))
    assert release is not None
    assert present in release.arch_list(variant)
    assert absent not in release.arch_list(variant)


def test_torch_2_11_cu130_arch_list_exact(cat: Catalog) -> None:
    release = cat.torch_release(Version("2.11.0"))
    assert release is not None
    assert release.arch_list("cu130") == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    assert release.ptx("cu130") is True
    assert release.ptx("cu128") is False


@pytest.mark.parametrize(
    ("torch", "variants", "default", "py_min", "py_max"),
    [
        ("2.4.1", ("cu118", "cu121", "cu124"), "cu121", "3.8", "3.12"),
        ("2.7.0", ("cu118", "cu126", "cu128"), "cu126", "3.9", "3.13"),
        ("2.10.0", ("cu126", "cu128", "cu129", "cu130"), "cu128", "3.10", "3.14"),
        ("2.11.0", ("cu126", "cu128", "cu129", "cu130"), "cu130", "3.10", "3.14"),
        ("2.12.0", ("cu126", "cu129", "cu130", "cu132"), "cu130", "3.10", "3.14"),
        ("2.13.0", ("cu126", "cu129", "cu130", "cu132"), "cu130", "3.10", "3.15"),
    ],
)
def test_torch_release_rows(
    cat: Catalog, torch: str, variants: tuple[str, ...], default: str, py_min: str, py_max: str
) -> None:
    release = cat.torch_release(Version(torch))
    assert release is not None
    assert (release.variants, release.pypi_default) == (variants, default)
    assert (release.python_min, release.python_max) == (DottedVersion(py_min), DottedVersion(py_max))


@pytest.mark.parametrize(
    ("torch", "variant", "cudnn"),
    [
        ("2.11.0", "cu130", "9.17.1.4"),
        ("2.11.0", "cu126", "9.10.2.21"),
        ("2.9.0", "cu130", "9.13.0.50"),
    ],
)
def test_torch_cudnn_pins(cat: Catalog, torch: str, variant: str, cudnn: str) -> None:
    release = cat.torch_release(Version(torch))
    assert release is not None and release.builds[variant].cudnn == DottedVersion(cudnn)


def test_torch_unknown_and_planned(cat: Catalog) -> None:
    assert cat.torch_release(Version("2.3.0")) is None
    planned = cat.torch_release(Version("2.14.0"))
    assert planned is not None and planned.status == "planned"


@pytest.mark.parametrize(
    ("variant", "cuda"), [("cu130", "13.0"), ("cu118", "11.8"), ("cu128", "12.8"), ("cu132", "13.2")]
)
def test_variant_cuda(cat: Catalog, variant: str, cuda: str) -> None:
    assert cat.variant_cuda(variant) == DottedVersion(cuda)


def test_variant_cuda_rejects_garbage(cat: Catalog) -> None:
    with pytest.raises(ValueError, match="cu130"):
        cat.variant_cuda("rocm6")


def test_index_url(cat: Catalog) -> None:
    assert cat.index_url("cu130") == "https://download.pytorch.org/whl/cu130"


@pytest.mark.parametrize("gpu_id", REQUIRED_GPUS)
def test_required_gpus_present(cat: Catalog, gpu_id: str) -> None:
    gpu = cat.gpu(gpu_id)
    assert gpu is not None and gpu.id == gpu_id


@pytest.mark.parametrize(
    ("gpu_id", "cc", "arch", "nvswitch"),
    [
        ("h200-sxm", "9.0", Architecture.HOPPER, True),
        ("h200-nvl", "9.0", Architecture.HOPPER, False),
        ("a100x", "8.0", Architecture.AMPERE, False),
        ("a40", "8.6", Architecture.AMPERE, False),
        ("l40s", "8.9", Architecture.ADA, False),
        ("b200", "10.0", Architecture.BLACKWELL, True),
        ("rtx-5090", "12.0", Architecture.BLACKWELL, False),
        ("a100-sxm4-80gb", "8.0", Architecture.AMPERE, True),
    ],
)
def test_gpu_facts(cat: Catalog, gpu_id: str, cc: str, arch: Architecture, nvswitch: bool) -> None:
    gpu = cat.gpus[gpu_id]
    assert (gpu.compute_capability, gpu.architecture, gpu.nvswitch) == (DottedVersion(cc), arch, nvswitch)


def test_gpu_units(cat: Catalog) -> None:
    h200 = cat.gpus["h200-sxm"]
    assert (h200.memory_gib, h200.tdp_w, h200.pcie_gen_max, h200.pcie_width_max) == (141, 700, 5, 16)
    assert cat.gpus["a100x"].tdp_w is None
    assert cat.gpus["b200"].nvlink5 is True


def test_h200_identified_from_capture(cat: Catalog) -> None:
    by_name, by_pci = cat.gpu_by_smi_name("NVIDIA H200"), cat.gpu_by_pci_device("0x2335")
    assert by_name is not None and by_pci is not None
    assert (by_name.id, by_pci.id) == ("h200-sxm", "h200-sxm")
    assert cat.gpu_by_smi_name("NVIDIA Nonexistent") is None


PCI_ID_LISTS = ("https://pci-ids.ucw.cz/", "https://download.nvidia.com/XFree86/Linux-x86_64/")
"""The public lists a GPU's PCI device id may be taken from (the PCI ID Repository, NVIDIA's driver
README "supported chips")."""


def test_every_gpu_pci_id_carries_a_public_source(cat: Catalog) -> None:
    """No id from memory: each model's ids cite a public id list; a model without one has none, and
    is matched by name only."""
    with_ids = [g for g in cat.gpus.values() if g.pci is not None]
    assert {g.id for g in with_ids} >= {"h200-sxm", "a100x", "rtx-5090"}
    for gpu in with_ids:
        assert gpu.pci is not None and gpu.pci.device_ids == gpu.pci_device_ids
        urls = [cat.sources[k].url or "" for k in gpu.pci.source]
        assert any(u.startswith(PCI_ID_LISTS) for u in urls), (gpu.id, urls)
    assert all(g.pci_device_ids == () for g in cat.gpus.values() if g.pci is None)


def test_a100x_matched_by_its_public_pci_id(cat: Catalog) -> None:
    """10de:20b8 is "GA100 [A100X]" in the PCI ID Repository; nvidia-smi's name for it is unsourced."""
    a100x = cat.gpu_by_pci_device("0x20B8")
    assert a100x is not None and a100x.id == "a100x" and a100x.smi_names == ()
    assert cat.gpu_by_pci_device("0x20b9") is None


def test_architecture_order() -> None:
    order = list(Architecture)
    assert order == sorted(order)
    assert Architecture.VOLTA < Architecture.TURING < Architecture.BLACKWELL
    assert str(Architecture.HOPPER) == "hopper"


@pytest.mark.parametrize(
    ("branch", "kind", "max_cuda"),
    [(535, "LTSB", 12), (570, "PB", 12), (580, "LTSB", 13), (595, "PB", 13), (620, "LTSB", 13)],
)
def test_driver_branches(cat: Catalog, branch: int, kind: str, max_cuda: int) -> None:
    row = cat.driver_branch(branch)
    assert row is not None and (row.type, row.max_cuda_major) == (kind, max_cuda)


def test_kernel_module_rules(cat: Catalog) -> None:
    rules = cat.kernel_modules
    assert rules.open_supported.from_arch is Architecture.TURING
    assert rules.proprietary_required.archs == (Architecture.MAXWELL, Architecture.PASCAL, Architecture.VOLTA)
    assert rules.open_required.archs == (Architecture.BLACKWELL,)
    assert (rules.open_default.from_branch, rules.proprietary_removed.from_branch) == (560, 620)


@pytest.mark.parametrize(
    ("method", "args", "expected"),
    [
        ("fabric_manager", (580,), "nvidia-fabricmanager"),
        ("fabric_manager", (575,), "nvidia-fabricmanager-575"),
        ("fabric_manager", (610,), "nvidia-fabricmanager"),
        ("pinning", (580,), "nvidia-driver-pinning-580"),
        ("pinning", (575,), None),
        ("driver_meta", (580, "open"), "nvidia-open"),
        ("driver_meta", (575, "open"), "nvidia-open-575"),
        ("driver_meta", (580, "proprietary"), "cuda-drivers"),
        ("driver_meta", (570, "proprietary"), "cuda-drivers-570"),
        ("nscq", (580,), "libnvidia-nscq"),
        ("nscq", (575,), "libnvidia-nscq-575"),
        ("nvlink5", (580,), ("nvlsm", "infiniband-diags")),
        ("nvlink5", (570,), ()),
        ("cuda_toolkit", (DottedVersion("13.0"),), "cuda-toolkit-13-0"),
        ("cuda_toolkit", (DottedVersion("12.8"),), "cuda-toolkit-12-8"),
        ("cudnn", (13,), ("libcudnn9-cuda-13", "libcudnn9-headers-cuda-13", "libcudnn9-dev-cuda-13")),
        ("cudnn", (12,), ("libcudnn9-cuda-12", "libcudnn9-headers-cuda-12", "libcudnn9-dev-cuda-12")),
        ("nccl", (), ("libnccl2", "libnccl-dev")),
        ("nccl_deb_version", (DottedVersion("2.28.3"), DottedVersion("13.0")), "2.28.3-1+cuda13.0"),
        ("fm_version_string", (DriverVersion("580.95.05"),), "580.95.05-1"),
    ],
)
def test_package_naming(cat: Catalog, method: str, args: tuple[object, ...], expected: object) -> None:
    assert getattr(cat.naming("deb"), method)(*args) == expected


def test_stack_patterns(cat: Catalog) -> None:
    assert cat.naming("deb").stack_patterns == (
        "nvidia-*",
        "libnvidia-*",
        "cuda-*",
        "libcudnn*",
        "libnccl*",
        "xserver-xorg-video-nvidia-*",
        "datacenter-gpu-manager*",
    )


@pytest.mark.parametrize(
    "code", ["ubuntu2204", "ubuntu2404", "debian12", "debian13", "rhel9", "amzn2023", "ubuntu2604"]
)
def test_repository_served(cat: Catalog, code: str) -> None:
    repo = cat.repository(code)
    assert repo is not None
    assert repo.url == f"https://developer.download.nvidia.com/compute/cuda/repos/{code}/x86_64/"
    # DIG: deb repositories are signed with 3bf863cc, rpm repositories with d42d0685.
    key, fingerprint = {
        "deb": ("3bf863cc.pub", "EB693B3035CD5710E231E123A4B469963BF863CC"),
        "rpm": ("D42D0685.pub", "610C7B14E068A878070DA4E99CD0A493D42D0685"),
    }[repo.package_format]
    assert repo.key_url == repo.url + key
    assert repo.fingerprint == fingerprint


def test_repository_arm_and_unserved(cat: Catalog) -> None:
    arm = cat.repository("ubuntu2404", arch="aarch64")
    assert arm is not None and arm.url.endswith("/ubuntu2404/sbsa/")
    assert cat.repository("ubuntu2004") is None


def test_repository_cuda_releases(cat: Catalog) -> None:
    repo = cat.repository("debian13")
    assert repo is not None and repo.cuda_releases == (DottedVersion("13.0"),)
    assert cat.repository("fedora42") is not None and cat.repository("fedora42").cuda_releases == ()  # type: ignore[union-attr]


def test_distro_archives(cat: Catalog) -> None:
    assert cat.distro_archives["debian12"].driver_branches == (535,)
    assert cat.distro_archives["debian13"].driver_branches == (550,)
    assert cat.distro_archives["ubuntu2404"].driver_branches == (580,)
    assert "ubuntu2204" not in cat.distro_archives


@pytest.mark.parametrize(
    ("file", "old", "new", "problem"),
    [
        ("cuda.yaml", "source: [RN132], conf: P}", "source: [NOPE], conf: P}", "NOPE"),
        ("gpus.yaml", "  - id: a30\n", "  - id: a40\n", "duplicate GPU ids: a40"),
        ("gpus.yaml", "    tdp_w: 165\n", "", "tdp_w"),
        ("gpus.yaml", "    architecture: ada\n", "    architecture: lovelace\n", "architecture"),
        (
            "torch.yaml",
            'last: "2.14", sm: ["7.5"',
            'last: "2.13", sm: ["7.5"',
            "2.14 cu130 needs exactly one arch list",
        ),
        (
            "repos.yaml",
            "fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC",
            "fingerprint: eb693b3035cd5710e231e123a4b469963bf863cc",
            "fingerprint",
        ),
        ("drivers.yaml", "branches:\n", "branches: [\n", "drivers.yaml"),
        (
            "packages.yaml",
            "  unsuffixed_from_branch: 580\n",
            "  unsuffixed_from_branch: 580\n  surprise: 1\n",
            "surprise",
        ),
    ],
)
def test_invalid_catalog_names_file_and_problem(
    data_copy: Path, file: str, old: str, new: str, problem: str
) -> None:
    path = data_copy / file
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(CatalogError, match=file.replace(".", r"\.")) as err:
        load_catalog_from(data_copy)
    assert problem in str(err.value)


def test_missing_file_is_a_catalog_error(data_copy: Path) -> None:
    (data_copy / "gpus.yaml").unlink()
    with pytest.raises(CatalogError, match=r"gpus\.yaml"):
        load_catalog_from(data_copy)


@pytest.mark.parametrize(
    ("branch", "day", "state"),
    [
        (580, "2027-12-29", "supported"),  # 184 days before the end of June 2028
        (580, "2027-12-30", "ending"),  # 183 days before: the notice starts
        (580, "2028-06-30", "ending"),  # the last day of its end-of-life month
        (580, "2028-07-01", "ended"),
        (535, "2026-07-01", "ended"),
        (550, None, "ended"),  # listed as ended: no date needed
        (580, None, "undated"),  # a month, but no day to judge it on
        (590, "2026-12-01", "undated"),  # a New Feature Branch without an end-of-life date
    ],
)
def test_branch_lifecycle_state(cat: Catalog, branch: int, day: str | None, state: str) -> None:
    from datetime import date

    row = cat.driver_branch(branch)
    assert row is not None
    assert row.state(date.fromisoformat(day) if day else None, cat.lifecycle.notice_days) == state


def test_branch_architectures_run_from_each_first_to_each_last_branch(cat: Catalog) -> None:
    assert Architecture.VOLTA in cat.branch_architectures(580)
    assert Architecture.VOLTA not in cat.branch_architectures(590)
    assert Architecture.BLACKWELL not in cat.branch_architectures(565)
    assert cat.branch_architectures(620)[0] is Architecture.TURING


def test_kernel_builds_name_the_first_release_that_builds() -> None:
    from provision.catalog.lifecycle import builds, kernel_series, known_building

    rows = load_catalog().kernel_builds
    six19 = kernel_series("6.19.3-200.fc43.x86_64")
    assert six19 == DottedVersion("6.19") and kernel_series("vmlinuz") is None
    assert builds(rows, DriverVersion("580.126.18"), six19) is None
    refused = builds(rows, DriverVersion("580.95.05"), six19)
    assert refused is not None and str(refused.first) == "580.126.18"
    assert builds(rows, DriverVersion("580.95.05"), DottedVersion("6.18")) is None  # no row: not judged
    blocked = builds(rows, DriverVersion("590.48.01"), DottedVersion("7.0"))
    assert blocked is not None and blocked.first is None  # no 590 release is known to build from 6.19
    assert [str(v) for v in known_building(rows, DottedVersion("6.19"))] == ["580.126.18"]
    # 570 needs 570.169 for 6.15, and 570.195.03 from 6.17: the newest requirement decides.
    decided = builds(rows, DriverVersion("570.172.08"), DottedVersion("6.17"))
    assert decided is not None and str(decided.first) == "570.195.03"
