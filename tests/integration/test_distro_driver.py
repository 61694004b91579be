"""The real driver from Debian's archive, installed end to end: ``driver.source: distro``.

Nothing here is a stand-in. The Debian 12 root gets Debian's own archive (main, contrib, non-free,
non-free-firmware, as a Debian machine with the driver's components enabled has it) and a real
Debian kernel (``linux-image-amd64``), which is not the kernel this machine runs. ``provision apply``
then installs, through real Ansible and apt, the real ``nvidia-kernel-dkms``, ``nvidia-smi``
and ``libcuda1`` of bookworm's 535 series, with their real dependency tree (dkms, the compiler, the
GSP firmware), debconf non-interactive, and the real headers of that kernel, against which DKMS
builds the real module. Pins and holds are written, a fresh plan is empty, and a second apply
changes nothing.

What it proves and what it does not: README "The driver from the distribution". The module is built
and installed for the Debian kernel, never loaded (no GPU, and not the running kernel).

Downloads: about 250 MB of .debs the first time, cached under the harness cache
(``<cache>/apt-archives``, bind-mounted as the target's ``/var/cache/apt/archives``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import yaml

from tests.integration.harness import golden, timings
from tests.integration.harness.target import Target
from tests.integration.helpers import assert_no_change_unconfirmed, provision
from tests.unit.factories import one_plan

SECURITY = os.environ.get("PROVISION_TEST_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
COMPONENTS = "main contrib non-free non-free-firmware"  # firmware-nvidia-gsp is in non-free-firmware
DRIVER = ("nvidia-smi", "libcuda1", "nvidia-kernel-dkms")


def _spec(path: Path) -> Path:
    spec = {
        "schema_version": 1,
        "name": "debian12-distro-driver",
        "os": {"distro": "debian", "version": "12"},
        "gpus": {"model": "a100x", "count": 1},
        "driver": {"branch": 535, "flavor": "proprietary", "source": "distro", "kernel_guard": "hold"},
    }
    path.write_text(yaml.safe_dump(spec))
    return path


def _debian_kernel(target: Target) -> str:
    """Install Debian's kernel meta into the target, as any Debian machine has it; its release."""
    target.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "linux-image-amd64"], check=True)
    modules = sorted(p.name for p in (target.root / "lib/modules").iterdir())
    assert len(modules) == 1, modules
    return modules[0]


def test_debian_driver_from_non_free_is_built_by_dkms_pinned_held_and_converges(
    target: Target, tmp_path: Path, runs: Path
) -> None:
    cache = golden.cache_dir() / "apt-archives"
    with timings.timed("distro: Debian archive (sources, apt-get update)"):
        target.use_debian_archive(cache, golden.SUITE, COMPONENTS, golden.MIRROR, SECURITY)
    with timings.timed("distro: Debian kernel in the root (linux-image-amd64)"):
        kernel = _debian_kernel(target)
    assert kernel != os.uname().release  # DKMS builds for a kernel that is not the running one
    spec, inv = str(_spec(tmp_path / "spec.yaml")), str(target.inventory)

    planned = one_plan(json.loads(provision("plan", spec, "-i", inv, "--json").stdout))
    assert planned["blockers"] == [], planned["blockers"]
    steps = {s["component"]: s for s in planned["steps"]}
    assert [p.split("=")[0] for p in steps["driver"]["packages"]] == list(DRIVER)
    assert "DKMS builds the module" in steps["driver"]["reason"]
    assert f"linux-headers-{kernel}" in steps["dkms"]["packages"]
    assert steps["repository"]["target"] == "/etc/apt/preferences.d/00-provision-nvidia"
    assert "secure_boot" not in steps

    started = time.monotonic()
    first = provision("apply", spec, "-i", inv, "--yes")
    timings.record("distro: first apply (real driver, DKMS build)", time.monotonic() - started)
    assert first.exit_code == 0, first.output
    assert "Converged: a fresh plan shows no changes." in first.output

    status = target.dpkg_status()
    for name in (*DRIVER, "firmware-nvidia-gsp", "nvidia-kernel-support", "libnvidia-ml1"):
        version, state = status[name]
        assert version.startswith("535."), (name, version)
        assert state == "hold ok installed", (name, state)
    assert status[f"linux-headers-{kernel}"][1] == "install ok installed"
    assert status["linux-image-amd64"][1] == "hold ok installed"  # driver.kernel_guard: hold
    assert status["dkms"][1] == "install ok installed"
    assert not any(n.startswith(("cuda-drivers", "nvidia-driver-pinning", "nvidia-open")) for n in status)
    driver = status["nvidia-kernel-dkms"][0].split("-")[0]

    # The real module, built by DKMS against the real headers of the Debian kernel.
    dkms = target.run(["dkms", "status"], check=True).stdout
    assert f"nvidia-current/{driver}, {kernel}, x86_64: installed" in dkms, dkms
    module = f"/lib/modules/{kernel}/updates/dkms/nvidia-current.ko"  # modinfo of the root's kmod
    info = target.run(["modinfo", "-F", "version", module], check=True).stdout.strip()
    assert info == driver, info
    vermagic = target.run(["modinfo", "-F", "vermagic", module], check=True).stdout
    assert vermagic.startswith(f"{kernel} "), vermagic

    pins = (target.root / "etc/apt/preferences.d/00-provision-nvidia").read_text()
    assert "Package: nvidia-* libnvidia-* libcuda1 firmware-nvidia-gsp*\nPin: version 535.*\n" in pins
    assert not (target.root / "etc/apt/sources.list.d/provision-nvidia-cuda.sources").exists()
    policy = target.run(["apt-cache", "policy", "nvidia-kernel-dkms"], check=True).stdout
    assert "1001" in policy, policy

    replan = provision("plan", spec, "-i", inv, "--detailed-exitcode", "--json")
    assert replan.exit_code == 0, replan.output
    assert_no_change_unconfirmed(json.loads(replan.stdout))

    second = provision("apply", spec, "-i", inv, "--yes")
    assert second.exit_code == 0, second.output
    assert "Nothing to do: Ansible was not started." in second.output
    assert len(list(runs.iterdir())) == 1
