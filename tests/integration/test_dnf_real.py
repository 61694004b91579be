"""Real dnf 4 and rpm against stand-ins of NVIDIA's rhel9/rhel10 repositories, in installroots.

What is proven with the real tools (not imitated): a module stream enable installs that
branch only; the stream bounds ``dnf upgrade``; the flavour switch with ``dnf module switch-to
--allowerasing`` swaps the kmod (when the driver came from a module profile); versionlock in
a root blocks an upgrade and writes only the root's lock list; the rhel9 repository on an el10
host is "filtered out by modular filtering" and :func:`failure_cause` says why; rpm's own
version order agrees with :func:`rpmvercmp`/:func:`evr_compare` on several hundred pairs.
The packages are empty stand-ins (harness/rhelrepo.py): no scriptlet, kmod or DKMS build runs.
"""

from __future__ import annotations

import hashlib
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from provision.os.models import PackageOrigins
from provision.os.redhat.parse import (
    evr_compare,
    failure_cause,
    parse_module_list,
    parse_rpm_qa,
    parse_versionlock_list,
    rpmvercmp,
)
from provision.unknown import Unknown
from tests.integration.harness import golden
from tests.integration.harness.dnfroot import InstallRoot, Result, run_captured
from tests.integration.harness.rhelrepo import RhelRepo, make_rpm_key, publish_epel, publish_rhel_repo
from tests.unit.os.test_redhat_parse import EVR_CASES, VERCMP_CASES

TOOLS = ("dnf", "rpm", "rpmbuild", "rpmsign", "createrepo_c", "modifyrepo_c", "gpg")
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"real dnf tests need {', '.join(MISSING)} "
    "(apt-get install dnf python3-dnf dnf-plugins-core rpm createrepo-c libmodulemd2 gnupg)",
)
HOST_LOCKLIST = Path("/etc/dnf/plugins/versionlock.list")


@dataclass(frozen=True)
class Repos:
    rhel9: RhelRepo
    rhel10: RhelRepo
    epel9: RhelRepo
    epel10: RhelRepo


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> Repos:
    base = tmp_path_factory.mktemp("rhelrepos")
    cache = golden.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    key = make_rpm_key(base / "key")
    return Repos(
        rhel9=publish_rhel_repo(9, cache, base / "rhel9", key),
        rhel10=publish_rhel_repo(10, cache, base / "rhel10", key),
        epel9=publish_epel(9, cache, base / "epel9"),
        epel10=publish_epel(10, cache, base / "epel10"),
    )


@pytest.fixture()
def el9(repos: Repos, tmp_path: Path) -> InstallRoot:
    return InstallRoot(tmp_path / "el9", 9, [repos.rhel9, repos.epel9])


@pytest.fixture()
def el10(repos: Repos, tmp_path: Path) -> InstallRoot:
    return InstallRoot(tmp_path / "el10", 10, [repos.rhel10, repos.epel10])


@pytest.fixture(autouse=True)
def host_locklist_untouched() -> Iterator[None]:
    before = _digest(HOST_LOCKLIST)
    yield
    assert _digest(HOST_LOCKLIST) == before, "versionlock wrote the host's own lock list"


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def ok(result: Result) -> Result:
    assert result.rc == 0, result.output
    return result


def driver(root: InstallRoot) -> dict[str, str]:
    return {n: v for n, v in root.installed().items() if "nvidia" in n or n == "cuda-drivers"}


def stream_rows(root: InstallRoot) -> dict[str, object]:
    return {r.stream: r for r in parse_module_list(ok(root.dnf("module", "list", "nvidia-driver")).output)}


def test_stream_enable_installs_that_branch_and_verifies_signatures(el9: InstallRoot) -> None:
    ok(el9.dnf("module", "enable", "nvidia-driver:580-open"))
    result = ok(el9.dnf("install", "nvidia-open"))
    assert "Importing GPG key" in result.output  # gpgcheck=1: rpm checked the stand-in's signatures
    installed = driver(el9)
    assert installed["nvidia-driver"] == "3:580.95.05-1.el9"  # newest of the stream, not 590.48.01
    assert installed["kmod-nvidia-open-dkms"] == "3:580.95.05-1.el9"
    assert "kmod-nvidia-latest-dkms" not in installed
    rows = stream_rows(el9)
    assert rows["580-open"].enabled and not rows["590-open"].enabled  # type: ignore[attr-defined]
    assert rows["latest-dkms"].default  # type: ignore[attr-defined]


def test_stream_bounds_the_upgrade(el9: InstallRoot) -> None:
    ok(el9.dnf("module", "enable", "nvidia-driver:580-open"))
    ok(el9.dnf("install", "nvidia-open-3:580.82.07"))
    assert driver(el9)["nvidia-driver"] == "3:580.82.07-1.el9"
    ok(el9.dnf("upgrade"))
    after = driver(el9)
    assert after["nvidia-driver"] == after["nvidia-open"] == "3:580.95.05-1.el9"  # 590.48.01 stays out
    refused = el9.dnf("install", "nvidia-driver-3:590.48.01")
    assert refused.rc == 1
    cause = failure_cause(refused.output)
    assert cause is not None and "not enabled" in cause and "nvidia-driver-3:590.48.01" in cause


def test_branchless_stream_upgrades_across_branches(el9: InstallRoot) -> None:
    ok(el9.dnf("module", "enable", "nvidia-driver:open-dkms"))
    ok(el9.dnf("install", "nvidia-open-3:580.95.05"))
    ok(el9.dnf("upgrade"))
    assert driver(el9)["nvidia-driver"] == "3:590.48.01-1.el9"


def test_flavour_switch_swaps_the_kmod_of_a_profile_install(el9: InstallRoot) -> None:
    ok(el9.dnf("module", "install", "nvidia-driver:580-open/default"))
    assert "kmod-nvidia-open-dkms" in driver(el9)
    ok(el9.dnf("module", "switch-to", "nvidia-driver:580-dkms", "--allowerasing"))
    after = driver(el9)
    assert after["kmod-nvidia-latest-dkms"] == "3:580.95.05-1.el9"
    assert "kmod-nvidia-open-dkms" not in after and "nvidia-open" not in after
    assert after["cuda-drivers"] == "3:580.95.05-1.el9"
    rows = stream_rows(el9)
    assert rows["580-dkms"].enabled and rows["580-dkms"].installed  # type: ignore[attr-defined]
    assert not rows["580-open"].enabled  # type: ignore[attr-defined]


def test_switch_to_leaves_a_plainly_installed_flavour_behind(el9: InstallRoot) -> None:
    # A measured dnf behaviour the RedHat tasks must respect: switch-to distro-syncs only what
    # the module profile installed; packages installed by name after `module enable` keep the
    # old flavour ("No packages available to distrosync"), so the kmod must be swapped by name
    # (`dnf install --allowerasing kmod-nvidia-latest-dkms`) or installed by profile.
    ok(el9.dnf("module", "enable", "nvidia-driver:580-open"))
    ok(el9.dnf("install", "nvidia-open"))
    switched = ok(el9.dnf("module", "switch-to", "nvidia-driver:580-dkms", "--allowerasing"))
    assert "No packages available to distrosync" in switched.output
    assert "kmod-nvidia-open-dkms" in driver(el9)
    refused = el9.dnf("install", "cuda-drivers")  # without --allowerasing: the flavours conflict
    assert refused.rc == 1
    cause = failure_cause(refused.output)
    assert cause is not None and "conflicts with" in cause and "--allowerasing" in cause
    ok(el9.dnf("install", "--allowerasing", "cuda-drivers"))
    after = driver(el9)
    assert "kmod-nvidia-open-dkms" not in after and after["kmod-nvidia-latest-dkms"] == "3:580.95.05-1.el9"


def test_second_stream_enable_is_refused_with_the_switch_named(el9: InstallRoot) -> None:
    ok(el9.dnf("module", "enable", "nvidia-driver:580-open"))
    refused = el9.dnf("module", "enable", "nvidia-driver:590-open")
    assert refused.rc == 1
    cause = failure_cause(refused.output)
    assert cause is not None and "switch-to nvidia-driver:590-open --allowerasing" in cause


def test_versionlock_in_the_root_blocks_the_upgrade(el10: InstallRoot) -> None:
    ok(el10.dnf("install", "nvidia-open-3:580.82.07"))
    ok(el10.dnf("versionlock", "add", "nvidia-*-3:580.82.07*", "kmod-nvidia-*-3:580.82.07*"))
    locks = parse_versionlock_list(ok(el10.dnf("versionlock", "list")).output)
    assert (
        "nvidia-driver-3:580.82.07-1.el10.*" in locks
        and "kmod-nvidia-open-dkms-3:580.82.07-1.el10.*" in locks
    )
    assert set(parse_versionlock_list(el10.locklist.read_text())) == set(locks)
    upgrade = ok(el10.dnf("upgrade"))
    assert "Nothing to do" in upgrade.output
    assert driver(el10)["nvidia-driver"] == "3:580.82.07-1.el10"
    refused = el10.dnf("install", "nvidia-open-3:580.95.05")
    assert refused.rc == 1
    cause = failure_cause(refused.output)
    assert cause is not None and "version lock" in cause
    ok(el10.dnf("versionlock", "clear"))
    ok(el10.dnf("upgrade"))
    assert driver(el10)["nvidia-driver"] == "3:590.48.01-1.el10"  # no modules on 10: the lock was the bound


def test_epochless_and_globbed_lock_entries_bind_epoch_3_packages(el10: InstallRoot) -> None:
    # The shape of provision's own block in the lock list: ``<name glob>-<version glob>``
    # without an epoch. dnf's subject rules read a missing epoch as "any", so these entries must
    # still hold NVIDIA's epoch-3 driver and the CUDA libraries (measured, not assumed).
    ok(
        el10.dnf(
            "install", "nvidia-open-580.82.07", "libcudnn9-devel-cuda-13-9.14.0.64", "libnccl-devel-2.28.3"
        )
    )
    driver_names = [n for n in driver(el10) if n != "nvidia-fabricmanager"]
    block = [f"{name}-580.82.07-*" for name in driver_names] + ["libcudnn9*-9.14.*", "libnccl*-2.28.3-*"]
    el10.locklist.write_text(
        "# BEGIN provision-nvidia pins\n" + "\n".join(block) + "\n# END provision-nvidia pins\n"
    )
    assert "Nothing to do" in ok(el10.dnf("upgrade")).output
    held = el10.installed()
    assert held["nvidia-driver"] == "3:580.82.07-1.el10"
    assert (held["libcudnn9-cuda-13"], held["libnccl"]) == ("0:9.14.0.64-1", "0:2.28.3-1+cuda13.0")
    refused = el10.dnf("install", "nvidia-open-3:590.48.01")
    assert refused.rc == 1 and "filtered out by exclude filtering" in refused.output


def test_a_lock_on_one_library_names_it_in_the_dependency_problem(el10: InstallRoot) -> None:
    ok(el10.dnf("install", "nvidia-driver-cuda-3:580.82.07"))
    ok(el10.dnf("versionlock", "add", "nvidia-driver-cuda-libs"))
    refused = el10.dnf("install", "nvidia-driver-cuda-3:580.95.05")
    assert refused.rc == 1
    cause = failure_cause(refused.output)
    assert cause is not None and "nvidia-driver-cuda-libs-3:580.95.05" in cause and "needed by" in cause


def test_rhel9_repository_on_el10_is_filtered_out_and_explained(repos: Repos, tmp_path: Path) -> None:
    wrong = InstallRoot(tmp_path / "el10-rhel9", 10, [repos.rhel9, repos.epel10])
    refused = wrong.dnf("install", "nvidia-open")
    assert refused.rc == 1
    assert "filtered out by modular filtering" in refused.output
    cause = failure_cause(refused.output)
    assert cause is not None and "platform:el9" in cause and "own major release" in cause
    assert "cuda-toolkit-13-0" in ok(wrong.dnf("install", "cuda-toolkit-13-0")).output  # non-modular: fine
    right = InstallRoot(tmp_path / "el10", 10, [repos.rhel10, repos.epel10])
    ok(right.dnf("install", "nvidia-open"))
    assert driver(right)["nvidia-open"] == "3:590.48.01-1.el10"


def test_missing_epel_names_dkms(repos: Repos, tmp_path: Path) -> None:
    root = InstallRoot(tmp_path / "noepel", 9, [repos.rhel9])
    ok(root.dnf("module", "enable", "nvidia-driver:580-open"))
    refused = root.dnf("install", "nvidia-open")
    assert refused.rc == 1
    cause = failure_cause(refused.output)
    assert cause is not None and "dkms" in cause and "EPEL" in cause


def test_rpm_qa_probe_format_parses_every_installed_package(el9: InstallRoot) -> None:
    ok(el9.dnf("module", "install", "nvidia-driver:580-open/fm"))
    live = el9.rpm_qa()
    assert live.rc == 0
    packages = parse_rpm_qa(live.output)
    names = {p.name for p in packages}
    assert {"nvidia-fabricmanager", "kmod-nvidia-open-dkms", "dkms"} <= names
    assert len(packages) == len([line for line in live.output.splitlines() if "gpg-pubkey" not in line])


def _rpm_vercmp(pairs: list[tuple[str, str]]) -> list[int]:
    """rpm's own answers, from one ``rpm --eval`` Lua chunk (``rpm.vercmp``, rpm 4.16+)."""
    quoted = ",".join("{%s,%s}" % (_lua(a), _lua(b)) for a, b in pairs)  # noqa: UP031
    chunk = f"for _, p in ipairs({{{quoted}}}) do io.write(rpm.vercmp(p[1], p[2]), ' ') end"
    out = run_captured(["rpm", "--eval", f"%{{lua: {chunk}}}"])
    assert out.rc == 0, out.output
    return [int(v) for v in out.output.split()]


def _lua(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_rpmvercmp_agrees_with_real_rpm() -> None:
    rng = random.Random(28)
    alphabet = "0123456789aZ.~^_+"
    generated = [
        (
            "".join(rng.choices(alphabet, k=rng.randint(1, 8))),
            "".join(rng.choices(alphabet, k=rng.randint(1, 8))),
        )
        for _ in range(600)
    ]
    plain = [(a, b) for a, b, _ in VERCMP_CASES] + generated
    assert _rpm_vercmp(plain) == [rpmvercmp(a, b) for a, b in plain]
    evr_alphabet = "0123456789a.~^-:"
    evrs = [(a, b) for a, b, _ in EVR_CASES] + [
        (
            "".join(rng.choices(evr_alphabet, k=rng.randint(1, 10))),
            "".join(rng.choices(evr_alphabet, k=rng.randint(1, 10))),
        )
        for _ in range(400)
    ]
    assert _rpm_vercmp(evrs) == [evr_compare(a, b) for a, b in evrs]


def test_origins_probe_reads_the_repository_host_from_the_repo_file_not_the_id(
    el9: InstallRoot, repos: Repos
) -> None:
    """The dnf-origins probe's two halves on real dnf: ``from_repo`` from dnf's history, then the
    host of that repository's ``baseurl``. The stand-in's id is NVIDIA's (``cuda-rhel9-x86_64``);
    served from a mirror, the origin is the mirror, whatever the id says; its file:// URL is local."""
    from provision.os.redhat.probes import DRIVER_GLOBS, parse_origins

    ok(el9.dnf("module", "enable", "nvidia-driver:580-open"))
    ok(el9.dnf("install", "nvidia-open"))
    query = ok(
        el9.dnf(
            "-q",
            "-C",
            "--disablerepo=*",
            "repoquery",
            "--installed",
            "--qf",
            "%{name} %{from_repo}",
            *DRIVER_GLOBS,
        )
    )
    assert "nvidia-driver cuda-rhel9-x86_64" in query.output, query.output
    repo_file = (el9.path / f"etc/yum.repos.d/{repos.rhel9.repo_id}.repo").read_text()
    mirror = repo_file.replace(
        f"baseurl={repos.rhel9.url}", "baseurl=https://Mirror.example.org:8443/cuda/rhel9/"
    )
    assert mirror != repo_file
    origins = parse_origins(f"=== installed\n{query.output}=== repos\n{mirror}", 0)
    assert not isinstance(origins, Unknown), origins
    assert (
        origins.origins["nvidia-driver"]
        == origins.origins["kmod-nvidia-open-dkms"]
        == "mirror.example.org:8443"
    )
    here = parse_origins(f"=== installed\n{query.output}=== repos\n{repo_file}", 0)
    assert not isinstance(here, Unknown) and set(here.origins.values()) == {"local"}  # file:// repository
    gone = parse_origins(f"=== installed\n{query.output}=== repos\n", 0)  # the .repo file removed
    assert gone == PackageOrigins()  # not known: left out, never another origin than the spec's
