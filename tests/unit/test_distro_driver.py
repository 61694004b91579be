"""``driver.source: distro``: the plan over the distributions' real package metadata.

Ubuntu's names are checked against its published index (tests/fixtures/distro, stanzas of
noble-updates restricted amd64 as archive.ubuntu.com serves them): every package a plan asks for
exists there, the signed module meta follows the kernel and stands in for the DKMS package, and a
branch the catalog does not list is transitional there. Debian's path is proven by a real install
(tests/integration/test_distro_driver.py).
"""

from __future__ import annotations

from debian.deb822 import Packages

from provision.detect.domains.driver import ModuleSigner
from provision.detect.facts import DkmsStatus, Facts, MokState, OsRelease
from provision.detect.runner import facts_from_raw, unknown_facts
from provision.plan.models import Action, Component, Plan
from provision.plan.planner import make_plan
from provision.spec.models import Spec
from provision.verify.checks_driver import module_signer
from provision.verify.context import Context
from provision.verify.limits import shipped_limits
from provision.verify.runs import VerifyInputs
from tests.unit.factories import CATALOG, ROOT, fresh_ubuntu, pkg, spec, step

FIXTURE = ROOT / "tests" / "fixtures" / "distro" / "ubuntu2404-noble-updates-restricted.Packages"
SECURE_BOOT_ON = ROOT / "tests" / "fixtures" / "hardware" / "synth-2gpu-ff14"


def _index() -> dict[str, Packages]:
    with FIXTURE.open() as f:
        lines = [line for line in f if not line.startswith("#")]
    return {p["Package"]: p for p in Packages.iter_paragraphs(lines, use_apt_pkg=False)}


INDEX = _index()


def _ubuntu(**over: object) -> Spec:
    return spec(driver__source="distro", driver__version=None, **over)


def _box(kernel: str, *installed: str, **over: object) -> Facts:
    facts = fresh_ubuntu(packages=tuple(pkg(n, "1") for n in (f"linux-image-{kernel}", *installed)))
    return facts.model_copy(update={"kernel": facts.kernel.model_copy(update={"release": kernel}), **over})  # type: ignore[union-attr]


def _names(plan: Plan, component: Component) -> list[str]:
    return [p.split("=")[0] for p in step(plan, component).packages]


def test_ubuntu_generic_kernel_gets_the_signed_module_and_its_flavour_meta_from_the_real_index() -> None:
    plan = make_plan(_ubuntu(), _box("6.8.0-151-generic", "linux-image-generic"), CATALOG)
    assert not plan.blockers, plan.blockers
    names = _names(plan, Component.DRIVER)
    assert names == [
        "nvidia-headless-no-dkms-580-server-open",
        "nvidia-utils-580-server",
        "linux-modules-nvidia-580-server-open-generic",
        "linux-modules-nvidia-580-server-open-6.8.0-151-generic",
    ]
    assert all(n in INDEX for n in names)  # every name exists in Ubuntu's published index
    meta = INDEX["linux-modules-nvidia-580-server-open-generic"]
    assert "linux-modules-nvidia-580-server-open-6.8.0-151-generic" in meta["Depends"]
    assert meta["Provides"].startswith("nvidia-dkms-580-server-open (= 580.")  # no DKMS package needed
    assert "nvidia-dkms" not in " ".join(names)
    assert all(s.component is not Component.DKMS for s in plan.steps)
    assert "no DKMS, no MOK" in step(plan, Component.DRIVER).reason
    userspace = [p for p in step(plan, Component.DRIVER).packages if "=" in p]
    assert userspace == []  # no driver.version: the pin holds the branch


def test_ubuntu_hwe_kernel_follows_the_hwe_meta() -> None:
    plan = make_plan(_ubuntu(), _box("6.17.0-40-generic", "linux-image-generic-hwe-24.04"), CATALOG)
    names = _names(plan, Component.DRIVER)
    assert names[2:] == [
        "linux-modules-nvidia-580-server-open-generic-hwe-24.04",
        "linux-modules-nvidia-580-server-open-6.17.0-40-generic",
    ]
    assert all(n in INDEX for n in names)


def test_ubuntu_proprietary_flavour_names_exist_too() -> None:
    plan = make_plan(_ubuntu(driver__flavor="proprietary"), _box("6.8.0-151-generic"), CATALOG)
    names = _names(plan, Component.DRIVER)
    assert "linux-modules-nvidia-580-server-generic" in names and all(n in INDEX for n in names)


def test_signed_module_under_secure_boot_plans_no_mok_step() -> None:
    hardware = facts_from_raw(SECURE_BOOT_ON).hardware
    facts = _box("6.8.0-151-generic", hardware=hardware, mok=MokState(key_present=False, enrolled=False))
    plan = make_plan(_ubuntu(driver__console=False), facts, CATALOG)
    assert not plan.blockers, plan.blockers  # a headless machine is fine: nothing at the console
    sb = step(plan, Component.SECURE_BOOT)
    assert sb.action is Action.NOOP and "no MOK enrollment" in sb.reason


def test_kernel_flavour_without_signed_modules_falls_back_to_dkms_and_the_mok_flow() -> None:
    hardware = facts_from_raw(SECURE_BOOT_ON).hardware
    facts = _box("6.8.0-60-custom", hardware=hardware, mok=MokState(key_present=True, enrolled=False))
    plan = make_plan(_ubuntu(), facts, CATALOG)
    names = _names(plan, Component.DRIVER)
    assert names[-1] == "nvidia-dkms-580-server-open" and names[-1] in INDEX
    assert "DKMS builds the module" in step(plan, Component.DRIVER).reason
    assert "linux-headers-6.8.0-60-custom" in step(plan, Component.DKMS).packages
    assert step(plan, Component.SECURE_BOOT).action is Action.MANUAL


def test_a_branch_the_distribution_lacks_is_refused_listing_the_ones_it_carries() -> None:
    plan = make_plan(_ubuntu(driver__branch=570, cuda=None, python=None), _box("6.8.0-151-generic"), CATALOG)
    refusal = next(b for b in plan.blockers if b.rule == "driver-distro-branch")
    assert "carries driver branch 580, not 570" in refusal.message
    # Why 570 is not listed: in Ubuntu's index its -server-open meta is only a step to 580.
    assert INDEX["nvidia-driver-570-server-open"]["Depends"] == "nvidia-driver-580-server-open"
    debian = _ubuntu(os={"distro": "debian", "version": "12"}, cuda=None, python=None)
    refused = make_plan(debian, unknown_facts("box", "not read"), CATALOG).blockers
    assert any(b.rule == "driver-distro-branch" and "535, not 580" in b.message for b in refused)


def test_cuda_from_nvidia_beside_a_distribution_driver_never_pulls_nvidia_driver_metas() -> None:
    plan = make_plan(_ubuntu(), _box("6.8.0-151-generic"), CATALOG)
    assert step(plan, Component.CUDA_TOOLKIT).packages  # allowed: the toolkit from NVIDIA's repository
    assert step(plan, Component.REPOSITORY).target == "/etc/apt/sources.list.d/provision-nvidia-cuda.sources"
    forbidden = plan.role_vars("nvidia_packages")["nvidia_packages_forbidden_regex"]
    for name in ("cuda-drivers", "cuda-drivers-580", "nvidia-open", "nvidia-driver-pinning-580", "cuda-13-0"):
        assert __import__("re").fullmatch(forbidden, name), name
    assert not __import__("re").fullmatch(forbidden, "nvidia-headless-no-dkms-580-server-open")


def test_fabric_manager_with_a_distribution_driver_is_refused_with_the_reason() -> None:
    s = _ubuntu(gpus__model="h100-sxm", gpus__count=8, cuda=None, python=None)
    plan = make_plan(s, _box("6.8.0-151-generic"), CATALOG)
    assert any(b.rule == "driver-distro-fm-unplanned" for b in plan.blockers)


def test_distribution_driver_without_cuda_writes_only_the_pins() -> None:
    plan = make_plan(_ubuntu(cuda=None, python=None), _box("6.8.0-151-generic"), CATALOG)
    repo = step(plan, Component.REPOSITORY)
    assert repo.target == "/etc/apt/preferences.d/00-provision-nvidia"
    assert plan.role_vars("nvidia_repository")["nvidia_repository_url"] == ""
    assert (
        "Package: nvidia-* libnvidia-* libcuda1 firmware-nvidia-gsp*\nPin: version 580.*\n"
        in (plan.role_vars("nvidia_repository")["nvidia_repository_preferences"])
    )


def _installed_signed(kernel: str) -> tuple[str, ...]:
    return (
        "linux-image-generic",
        "nvidia-utils-580-server",
        "linux-modules-nvidia-580-server-open-generic",
        f"linux-modules-nvidia-580-server-open-{kernel}",
    )


def test_kernel_guard_next_kernel_gets_its_signed_module_before_it_boots() -> None:
    running = "6.8.0-151-generic"
    installed = (*_installed_signed(running), "linux-image-6.8.0-160-generic")
    facts = _box(running, *installed)
    facts = facts.model_copy(
        update={
            "packages": (
                *facts.packages,
                pkg("nvidia-headless-no-dkms-580-server-open", "580.178.04-0ubuntu1"),
            )
        }  # type: ignore[misc]
    )
    plan = make_plan(_ubuntu(cuda=None, python=None), facts, CATALOG)
    driver = step(plan, Component.DRIVER)
    assert driver.changes and "linux-modules-nvidia-580-server-open-6.8.0-160-generic" in driver.packages
    # Once it is installed, the plan is quiet.
    done = facts.model_copy(
        update={
            "packages": (*facts.packages, pkg("linux-modules-nvidia-580-server-open-6.8.0-160-generic", "1"))
        }  # type: ignore[misc]
    )
    assert not step(make_plan(_ubuntu(cuda=None, python=None), done, CATALOG), Component.DRIVER).changes


def test_kernel_guard_reports_a_newer_kernel_dkms_has_not_built_for() -> None:
    debian = OsRelease(id="debian", version_id="12", codename="bookworm")
    installed = (
        "nvidia-smi",
        "libcuda1",
        "nvidia-kernel-dkms",
        "dkms",
        "linux-image-amd64",
        "linux-headers-amd64",
    )
    kernels = ("6.1.0-57-amd64", "6.1.0-58-amd64")
    facts = fresh_ubuntu(
        os=debian,
        packages=tuple(pkg(n, "535.309.01-0+deb12u1") for n in installed)
        + tuple(pkg(f"linux-{k}", "1") for k in (f"image-{kernels[0]}", f"image-{kernels[1]}"))
        + tuple(pkg(f"linux-headers-{k}", "1") for k in kernels),
        dkms=DkmsStatus(
            modules=(("535.309.01", kernels[0], "installed"), ("535.309.01", kernels[1], "added"))
        ),
    )
    facts = facts.model_copy(update={"kernel": facts.kernel.model_copy(update={"release": kernels[0]})})  # type: ignore[union-attr]
    s = _ubuntu(
        os={"distro": "debian", "version": "12"},
        driver__branch=535,
        driver__flavor="proprietary",
        cuda=None,
        python=None,
    )
    plan = make_plan(s, facts, CATALOG)
    warning = next(w for w in plan.warnings if w.rule == "kernel-without-module")
    assert "kernel 6.1.0-58-amd64 is installed and newer" in warning.message and "added" in warning.message
    assert "set driver.kernel_guard: hold" in warning.message
    held = make_plan(
        s.model_copy(update={"driver": s.driver.model_copy(update={"kernel_guard": "hold"})}), facts, CATALOG
    )
    holds = step(held, Component.HOLDS)
    assert "linux-image-amd64" in holds.packages and "linux-headers-amd64" in holds.packages
    assert "linux-image-6.1.0-58-amd64" not in holds.packages


def _signer(signer: str, source: str = "distro") -> str | None:
    hardware = facts_from_raw(SECURE_BOOT_ON).hardware
    facts = _box("6.8.0-151-generic", hardware=hardware, module_signer=ModuleSigner(signer=signer))
    s = spec(driver__source=source, driver__version=None if source == "distro" else "580.95.05")
    ctx = Context(
        spec=s,
        inputs=VerifyInputs(facts=facts, gpu_run=unknown_facts("x", "y").gpus),
        catalog=CATALOG,
        limits=shipped_limits(),
    )  # type: ignore[arg-type]
    results = module_signer(ctx)
    return results[0].status if results else None


def test_verify_checks_the_module_signer_against_secure_boot() -> None:
    assert _signer("Canonical Ltd. Kernel Module Signing") == "pass"
    assert _signer("DKMS module signing key") == "fail"  # the distribution's signed module was expected
    assert _signer("") == "fail"
    assert _signer("DKMS module signing key", source="nvidia-repo") == "pass"
    assert _signer("", source="nvidia-repo") == "fail"
    facts = _box("6.8.0-151-generic", module_signer=ModuleSigner(signer=""))  # Secure Boot not read
    ctx = Context(
        spec=_ubuntu(),
        inputs=VerifyInputs(facts=facts, gpu_run=unknown_facts("x", "y").gpus),
        catalog=CATALOG,
        limits=shipped_limits(),
    )  # type: ignore[arg-type]
    assert module_signer(ctx) == []


def test_kernel_guard_hold_holds_the_kernel_metas_with_nvidias_driver_too() -> None:
    facts = _box("6.8.0-151-generic", "linux-image-generic", "linux-headers-generic")
    held = make_plan(spec(driver__kernel_guard="hold"), facts, CATALOG)
    assert {"linux-image-generic", "linux-headers-generic"} <= set(step(held, Component.HOLDS).packages)
    reported = make_plan(spec(), facts, CATALOG)
    assert "linux-image-generic" not in step(reported, Component.HOLDS).packages
