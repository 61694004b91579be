"""Parser tests: captured H200 outputs with exact values, and cases that need more than equality.

The data-driven cases of every fact (``tests/fixtures/facts/<fact id>/``) run in test_facts.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.detect.domains.driver import parse_driver_version
from provision.detect.domains.gpu import parse_query_gpu, parse_topology
from provision.detect.fact import failure
from provision.detect.facts import Gpu, Kernel, LoadedDriver, Package, Topology, Torch, Unknown
from provision.detect.registry import BY_ID
from provision.os.debian.probes import parse_dpkg
from provision.versions import DottedVersion
from tests.unit.factories import (
    H200_RAW,
    probe,
)

CASES = Path(__file__).parents[1] / "fixtures" / "facts"


def parse_fixture(name: str) -> Any:
    out = probe(H200_RAW / f"{name}.txt")
    return BY_ID[name].parse(out.output, out.rc)


# --- The captured H200: exact values ---------------------------------------------------------------


def test_h200_driver_is_open_580() -> None:
    assert parse_fixture("driver-version") == LoadedDriver(version="580.159.04", flavor="open")


def test_h200_gpu() -> None:
    gpus = parse_fixture("query-gpu")
    assert isinstance(gpus, tuple) and len(gpus) == 1
    gpu: Gpu = gpus[0]
    assert (gpu.index, gpu.name, gpu.compute_capability) == (0, "NVIDIA H200", DottedVersion("9.0"))
    assert (gpu.memory_total_mib, gpu.pcie_gen_current, gpu.pcie_gen_max) == (143771, 5, 5)
    assert (gpu.pcie_width_current, gpu.pcie_width_max, gpu.persistence_mode) == (16, 16, True)
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.temperature_memory_c) == (79.45, 700.0, 41.0)
    assert (gpu.pci_bus_id, gpu.driver_version) == ("00000000:00:06.0", "580.159.04")


def test_h200_topology_one_gpu() -> None:
    assert parse_fixture("topo-m") == Topology(
        gpus=("GPU0",),
        links={"GPU0": {"GPU0": "X"}},
        cpu_affinity={"GPU0": "0-15"},
        numa_affinity={"GPU0": "0"},
    )


def test_h200_held_cudnn_and_nccl() -> None:
    packages = parse_fixture("dpkg-nvidia")
    assert isinstance(packages, tuple) and len(packages) == 45
    assert Package(name="libcudnn9-cuda-13", version="9.14.0.64-1", status="hold ok installed") in packages
    nccl = next(p for p in packages if p.name == "libnccl2")
    assert (nccl.version, nccl.held, nccl.installed, nccl.unfinished) == (
        "2.28.3-1+cuda13.0",
        True,
        True,
        False,
    )


def test_h200_cuda_toolkit_and_nvcc() -> None:
    dirs = parse_fixture("cuda-dirs")
    assert dirs.installed == (DottedVersion("13.0"),) and dirs.default_target == "/etc/alternatives/cuda"
    nvcc = (DottedVersion("13.0"), DottedVersion("13.0.88"), "/usr/local/cuda/bin/nvcc")
    assert parse_fixture("nvcc") == nvcc


def test_h200_torch_from_real_import() -> None:
    assert parse_fixture("torch") == Torch(
        venv="(not recorded)",
        version="2.11.0+cu130",
        cuda="13.0",
        python="3.12.3",
        arch_list=("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
        device_count=1,
    )


def test_h200_kernel_and_compiler() -> None:
    assert parse_fixture("uname") == Kernel(release="6.18.44-fc-v657-gpu", machine="x86_64")
    assert parse_fixture("proc-version") == Kernel(release="6.18.44-fc-v657-gpu", compiler="gcc 15.3.0")


def test_h200_os_release() -> None:
    os_release = parse_fixture("os-release")
    assert (os_release.id, os_release.version_id, os_release.codename) == ("ubuntu", "24.04", "noble")
    assert os_release.id_like == ("debian",)


def test_h200_modinfo_missing_is_unknown() -> None:
    assert parse_fixture("modinfo") == Unknown(unknown="modinfo: not found")


@pytest.mark.parametrize("name", ["lspci-nv", "lspci-tv"])
def test_h200_lspci_not_found(name: str) -> None:
    out = probe(H200_RAW / f"{name}.txt")
    assert failure("lspci", out.output, out.rc) == Unknown(unknown="lspci: not found")


# --- Unknowns and edge cases -----------------------------------------------------------------------


def test_failure_reasons() -> None:
    assert failure("nvidia-smi", "x\n", 124) == Unknown(unknown="nvidia-smi timed out")
    assert failure("nvidia-smi", "", 3) == Unknown(unknown="nvidia-smi exited 3: no output")
    assert failure("nvidia-smi", "ok", 0) is None


def test_driver_not_loaded_reason() -> None:
    result = parse_driver_version("cat: /proc/driver/nvidia/version: No such file or directory\n", 1)
    assert result == Unknown(unknown="NVIDIA kernel module not loaded (no /proc/driver/nvidia/version)")


def test_nvidia_smi_driver_failure_reason() -> None:
    text = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure ...\n"
    result = parse_query_gpu(text, 9)
    assert isinstance(result, Unknown)
    assert result.unknown.startswith(
        "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
    )


def test_half_installed_packages_are_kept_and_broken() -> None:
    out = probe(CASES / "dpkg-nvidia" / "ff01-half-installed.txt")
    parsed = parse_dpkg(out.output, out.rc)
    assert isinstance(parsed, tuple)
    packages = {p.name: p for p in parsed}
    assert packages["libnvidia-compute-550"].unfinished and packages["nvidia-dkms-550"].unfinished
    assert packages["nvidia-fabricmanager-550"].held
    assert "bash" not in packages and "nvidia-driver-535" not in packages


def test_topology_nvswitch_ignores_nics() -> None:
    out = probe(CASES / "topo-m" / "h100-8gpu-nvswitch.txt")
    topo = parse_topology(out.output, out.rc)
    assert isinstance(topo, Topology) and len(topo.gpus) == 8
    assert all(topo.links[a][b] == ("X" if a == b else "NV18") for a in topo.gpus for b in topo.gpus)
    assert topo.numa_affinity["GPU7"] == "1" and topo.cpu_affinity["GPU0"] == "0-55,112-167"


def test_topology_ff15_sys_across_numa() -> None:
    out = probe(CASES / "topo-m" / "ff15-4gpu-sys-node.txt")
    topo = parse_topology(out.output, out.rc)
    assert isinstance(topo, Topology)
    assert (topo.links["GPU0"]["GPU1"], topo.links["GPU0"]["GPU2"], topo.links["GPU3"]["GPU2"]) == (
        "NODE",
        "SYS",
        "NODE",
    )
    assert topo.numa_affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}
