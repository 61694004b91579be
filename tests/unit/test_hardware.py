"""Hardware fact parsers: the real H200 capture with exact values, a synthesized FF-14/15/16 host,
and the Hardware assembly. The data-driven cases run in test_facts.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.detect.domains.pci import upstream_bridges
from provision.detect.facts import AcsControl, GpuHardware, Hardware, PciLink, SecureBoot, Unknown
from provision.detect.raw import ProbeOutput, read_raw
from provision.detect.registry import all_probes, facts_from_outputs


def parse_hardware(outputs: dict[str, ProbeOutput]) -> Hardware | Unknown:
    return facts_from_outputs(outputs).hardware


FIXTURES = Path(__file__).parents[1] / "fixtures" / "hardware"


def only_gpu(hw: Hardware) -> GpuHardware:
    assert isinstance(hw.pci, tuple) and len(hw.pci) == 1
    return hw.pci[0]


def hardware(name: str) -> Hardware:
    result = parse_hardware(read_raw(FIXTURES / name))
    assert isinstance(result, Hardware)
    return result


# --- The captured H200 (a KVM guest without lspci, mokutil, EFI or DMI) -----------------------------


def test_h200_bar1_memory_and_link() -> None:
    gpu = only_gpu(hardware("h200-ubuntu2404"))
    assert (gpu.bdf, gpu.pci_class, gpu.numa_node, gpu.local_cpus) == (
        "0000:00:06.0",
        "0x030200",
        None,
        "0-15",
    )
    assert (gpu.bar1_total_mib, gpu.memory_total_mib) == (262144, 143771)
    assert gpu.link_max == PciLink(speed_gts=32.0, width=16) and str(gpu.link_max) == "Gen5 x16 (32 GT/s)"


def test_h200_missing_tools_are_unknown_with_reasons() -> None:
    hw = hardware("h200-ubuntu2404")
    assert hw.boot_mode == "legacy"
    assert hw.secure_boot == Unknown(
        unknown="mokutil: not found; /sys/firmware/efi absent (legacy boot: Secure Boot cannot be on)"
    )
    assert hw.acs == Unknown(unknown="lspci: not found")
    assert hw.board == Unknown(unknown="no DMI data (/sys/class/dmi/id not readable or absent)")
    assert hw.cmdline == Unknown(unknown="no output from the cmdline probe")
    assert only_gpu(hw).upstream == Unknown(unknown="sysfs path not in this capture")


def test_h200_memory_cpu_numa() -> None:
    hw = hardware("h200-ubuntu2404")
    assert hw.memory_total_kib == 131981020
    assert (hw.cpu.model, hw.cpu.sockets, hw.cpu.numa_nodes, hw.cpu.hypervisor) == (  # type: ignore[union-attr]
        "Intel(R) Xeon(R) Processor",
        1,
        1,
        "KVM",
    )
    assert [(n.node, n.cpus, n.size_mb) for n in hw.numa] == [(0, "0-15", 5723)]  # type: ignore[union-attr]


# --- Synthesized host: FF-14 ACS, FF-15 NUMA split, Secure Boot on ----------------------------------


def test_synth_acs_enabled_on_both_bridges() -> None:
    hw = hardware("synth-2gpu-ff14")
    assert isinstance(hw.acs, dict)
    assert hw.acs["0000:00:03.1"].redirecting == ("ReqRedir", "CmpltRedir")
    assert hw.acs["0000:20:01.1"].flags["SrcValid"] and not hw.acs["0000:20:01.1"].flags["TransBlk"]


def test_synth_gpus_on_two_numa_nodes_with_upstream_bridges() -> None:
    gpus = hardware("synth-2gpu-ff14").gpus
    assert isinstance(gpus, tuple)
    assert [(g.bdf, g.numa_node, g.upstream, g.sriov_totalvfs) for g in gpus] == [
        ("0000:01:00.0", 0, ("0000:00:03.1",), 32),
        ("0000:21:00.0", 1, ("0000:20:01.1",), 0),
    ]
    assert [(g.bar1_total_mib, g.memory_total_mib) for g in gpus] == [(65536, 46068)] * 2


def test_synth_secure_boot_uefi_cmdline() -> None:
    hw = hardware("synth-2gpu-ff14")
    assert (hw.boot_mode, hw.secure_boot) == ("uefi", SecureBoot(enabled=True, source="mokutil"))
    assert hw.cmdline.iommu == {"amd_iommu": "on"} and not hw.cmdline.passthrough  # type: ignore[union-attr]
    assert hw.iommu.groups == 58  # type: ignore[union-attr]


# --- Pure helpers and assembly -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "bridges"),
    [
        ("/sys/devices/pci0000:00/0000:00:06.0", ()),
        (
            "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:10.0/0000:43:00.0",
            ("0000:42:10.0", "0000:41:00.0", "0000:40:01.1"),
        ),
    ],
)
def test_upstream_bridges_nearest_first(path: str, bridges: tuple[str, ...]) -> None:
    assert upstream_bridges(path) == bridges


def test_no_hardware_probe_output_is_one_unknown() -> None:
    outputs = read_raw(Path(__file__).parents[1] / "fixtures" / "raw" / "h200-ubuntu2404-probes")
    assert parse_hardware(outputs) == Unknown(unknown="hardware not probed")


def test_hardware_probes_are_in_the_probe_list_once() -> None:
    ids = [p.id for p in all_probes()]
    assert {"mokutil", "sys-pci", "lspci-vvv", "cpufreq", "nvidia-smi-q"} <= set(ids)
    assert len(ids) == len(set(ids))


def test_acs_model_round_trips() -> None:
    acs = AcsControl(bdf="0000:00:03.1", flags={"ReqRedir": True, "EgressCtrl": False})
    assert AcsControl.model_validate_json(acs.model_dump_json()) == acs
    assert GpuHardware(bdf="0000:00:06.0").is_gpu
