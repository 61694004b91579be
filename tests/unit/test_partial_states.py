"""The plan sees partial states as partial (issue 13, item 2): a venv without pip, wheels whose
metadata and files disagree, a repository keyring without the spec's fingerprint."""

from __future__ import annotations

from pathlib import Path

from provision.detect.domains.python import parse_venv
from provision.detect.facts import Facts, Torch, Venv
from provision.plan.models import Action, Component
from provision.plan.planner import make_plan
from provision.spec.models import Spec
from tests.unit.factories import CATALOG, fresh_ubuntu, locked, pkg, probe, spec, step

CASES = Path(__file__).parents[1] / "fixtures" / "facts" / "venv"
TORCH = Torch(venv="/opt/provision/venv", version="2.11.0+cu130", cuda="13.0", python="3.12.3")


def venv_case(name: str) -> Venv:
    out = probe(CASES / f"{name}.txt")
    venv = parse_venv(out.output, out.rc)
    assert isinstance(venv, Venv)
    return venv


def test_venv_without_pip_is_repaired_not_called_present() -> None:
    plan = make_plan(spec(), fresh_ubuntu(venv=venv_case("no-pip")), CATALOG)
    venv = step(plan, Component.PYTHON_VENV)
    assert venv.action is Action.INSTALL
    assert venv.current == "incomplete (no pip)"
    assert "-m venv over it again" in venv.reason


def test_complete_venv_is_a_noop() -> None:
    whole = venv_case("no-pip").model_copy(
        update={"distributions": {"pip": "23.0.1", "torch": "2.11.0+cu130"}}
    )
    plan = make_plan(spec(), fresh_ubuntu(venv=whole, torch=TORCH), CATALOG)
    assert step(plan, Component.PYTHON_VENV).action is Action.NOOP
    assert step(plan, Component.PYTHON_WHEELS).action is Action.NOOP


def test_uv_venv_needs_no_pip_and_older_captures_are_not_judged() -> None:
    uv = Venv(path="/opt/provision/venv", python="3.12.3", interpreter=True, uv=True)
    old = Venv(path="/opt/provision/venv", python="3.12.3")
    assert uv.missing_parts() == () and old.missing_parts() == ()


def test_venv_whose_interpreter_is_gone_is_repaired() -> None:
    gone = Venv(path="/opt/provision/venv", python="3.12.3", interpreter=False, distributions={"pip": "23"})
    assert gone.missing_parts() == ("interpreter bin/python",)


def test_torch_files_without_dist_info_are_not_installed() -> None:
    facts = fresh_ubuntu(
        venv=venv_case("no-pip").model_copy(update={"distributions": {"pip": "23"}}), torch=TORCH
    )
    wheels = step(make_plan(spec(), facts, CATALOG), Component.PYTHON_WHEELS)
    assert wheels.action is Action.INSTALL
    assert wheels.packages == ("torch==2.11.0+cu130",)


def test_half_installed_torch_is_reinstalled_over() -> None:
    plan = make_plan(spec(), fresh_ubuntu(venv=venv_case("half-installed"), torch=TORCH), CATALOG)
    wheels = step(plan, Component.PYTHON_WHEELS)
    assert wheels.action is Action.INSTALL
    assert wheels.current == "half-installed torch==2.11.0+cu130"
    assert "reinstall over the half-installed" in wheels.reason
    assert plan.role_vars("python_env")["python_env_reinstall"] is True
    assert step(plan, Component.PYTHON_VENV).action is Action.NOOP


def test_rotated_repository_key_is_planned() -> None:
    s = spec(python=None)
    catalog_key = str(
        make_plan(s, fresh_ubuntu(), CATALOG).role_vars("nvidia_repository")["nvidia_repository_fingerprint"]
    )
    facts = _converged(s, ("0" * 40,))
    plan = make_plan(s, facts, CATALOG)
    repo = step(plan, Component.REPOSITORY)
    assert repo.action is Action.CONFIGURE
    assert repo.current == f"key {'0' * 40}" and repo.target == f"key {catalog_key.upper()}"
    assert repo.reason.startswith("repository key rotated")
    assert plan.role_vars("nvidia_repository") is not None


def test_keyring_with_the_spec_key_or_unread_is_a_noop() -> None:
    s = spec(python=None)
    key = str(
        make_plan(s, fresh_ubuntu(), CATALOG).role_vars("nvidia_repository")["nvidia_repository_fingerprint"]
    )
    for fingerprints in ((key.upper(), "1" * 40), None):
        plan = make_plan(s, _converged(s, fingerprints), CATALOG)
        assert step(plan, Component.REPOSITORY).action is Action.NOOP, fingerprints


HELD_STACK = (
    ("nvidia-open", "580.95.05-1"),
    ("libnvidia-compute", "580.95.05-1"),
    ("cuda-toolkit-13-0", "13.0.2-1"),
    ("libcudnn9-cuda-13", "9.14.0.64-1"),
    ("libcudnn9-headers-cuda-13", "9.14.0.64-1"),
    ("libcudnn9-dev-cuda-13", "9.14.0.64-1"),
    ("libnccl2", "2.28.3-1+cuda13.0"),
    ("libnccl-dev", "2.28.3-1+cuda13.0"),
)


def _converged(s: Spec, fingerprints: tuple[str, ...] | None) -> Facts:
    """A box on which apply converged for ``s``, with the keyring holding ``fingerprints``."""
    locks = locked(s).model_copy(update={"keyring_fingerprints": fingerprints})
    packages = tuple(pkg(name, version, "hold ok installed") for name, version in HELD_STACK)
    return fresh_ubuntu(packages=packages, package_locks=locks)


# Repair advice from the dpkg state (issue 13, item 3), over the real dpkg-query format.
DPKG_LINES = (
    "bash\t5.2.15-2+b7\tinstall ok installed\n"
    "tzdata\t2024a-0+deb12u1\tinstall ok half-configured\n"
    "nvidia-open\t580.95.05-1\thold ok installed\n"
)


def test_a_broken_package_outside_nvidia_names_blocks_with_configure_advice() -> None:
    from provision.os.debian.probes import parse_dpkg

    packages = parse_dpkg(DPKG_LINES, 0)
    assert isinstance(packages, tuple)
    assert [p.name for p in packages] == ["tzdata", "nvidia-open"]  # bash: neither recorded nor broken
    plan = make_plan(spec(), fresh_ubuntu(packages=packages), CATALOG)
    blocker = next(b for b in plan.blockers if b.rule == "broken-package-state")
    assert blocker.message.startswith(
        "broken package state: tzdata (install ok half-configured); run `dpkg --configure -a`; if a "
        "maintainer script of tzdata fails again"
    )


def test_an_interrupted_dpkg_run_blocks_even_with_every_package_installed() -> None:
    from provision.os.models import PackageLocks

    plan = make_plan(spec(), fresh_ubuntu(package_locks=PackageLocks(unfinished_transactions=2)), CATALOG)
    blocker = next(b for b in plan.blockers if b.rule == "broken-package-state")
    assert "an interrupted dpkg run (entries in /var/lib/dpkg/updates); run `dpkg --configure -a`," in (
        blocker.message
    )
    assert "fix-broken" not in blocker.message


def test_a_half_unpacked_package_is_reinstalled() -> None:
    broken = (pkg("libnccl2", "2.28.3-1+cuda13.0", "install reinstreq half-installed"),)
    plan = make_plan(spec(), fresh_ubuntu(packages=broken), CATALOG)
    blocker = next(b for b in plan.blockers if b.rule == "broken-package-state")
    assert "run `apt-get install --reinstall libnccl2`, before anything else" in blocker.message


# A held driver that the spec replaces (issue 13, item 5).
def test_flavour_switch_over_a_held_driver_is_a_removal_needing_consent() -> None:
    from provision.components.driver import needs_consent

    held = (
        pkg("cuda-drivers", "580.95.05-1", "hold ok installed"),
        pkg("nvidia-driver", "580.95.05-1", "hold ok installed"),
        pkg("libnvidia-compute", "580.95.05-1", "hold ok installed"),
    )
    plan = make_plan(spec(), fresh_ubuntu(packages=held), CATALOG)
    removal = next(s for s in plan.steps if s.component is Component.DRIVER and s.action is Action.REMOVE)
    assert (
        removal.current
        == "cuda-drivers 580.95.05-1, nvidia-driver 580.95.05-1, libnvidia-compute 580.95.05-1 (held)"
    )
    assert "--replace-held" in removal.reason and needs_consent(removal)
    assert removal.packages == ()  # nothing of it joins the install request


def test_version_change_over_held_packages_is_a_hold_release() -> None:
    held = (pkg("nvidia-open", "580.82.07-1", "hold ok installed"),)
    plan = make_plan(spec(), fresh_ubuntu(packages=held), CATALOG)
    release = next(s for s in plan.steps if s.action is Action.RELEASE)
    assert release.target == "580.95.05, held again"


def test_unheld_driver_change_needs_no_consent() -> None:
    plan = make_plan(spec(), fresh_ubuntu(packages=(pkg("nvidia-open", "580.82.07-1"),)), CATALOG)
    assert not [s for s in plan.steps if s.action in (Action.REMOVE, Action.RELEASE)]


def test_apply_refuses_a_held_driver_replacement_without_consent() -> None:
    import pytest

    from provision.apply.workflow import check_consent
    from provision.errors import ProvisionError

    held = (pkg("nvidia-open", "580.82.07-1", "hold ok installed"),)
    plan = make_plan(spec(), fresh_ubuntu(packages=held), CATALOG)
    with pytest.raises(ProvisionError, match=r"pass --replace-held or set driver.replace_held: true"):
        check_consent({"gpu1": plan}, replace_held=False)
    check_consent({"gpu1": plan}, replace_held=True)
    consenting = make_plan(spec(driver__replace_held=True), fresh_ubuntu(packages=held), CATALOG)
    check_consent({"gpu1": consenting}, replace_held=False)


def test_the_venv_probe_finds_a_wheel_whose_files_are_gone_on_a_real_tree(tmp_path: Path) -> None:
    from provision.detect import collector
    from provision.detect.registry import all_probes

    site = tmp_path / "lib" / "python3.12" / "site-packages"
    (tmp_path / "bin").mkdir(parents=True)
    (tmp_path / "pyvenv.cfg").write_text("version = 3.12.3\n", encoding="utf-8")
    for name, present in (("whole", True), ("torn", False)):
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Name: {name}\n", encoding="utf-8")
        (info / "RECORD").write_text(
            f"{name}/__init__.py,,\n{name}-1.0.dist-info/RECORD,,\n../../../bin/{name},,\n", encoding="utf-8"
        )
        if present:
            (site / name).mkdir()
    venv_probe = next(p for p in all_probes(str(tmp_path)) if p.id == "venv")
    result = collector.run_probe(list(venv_probe.argv), venv_probe.timeout)
    assert result["rc"] == 0, result["output"]
    assert f"incomplete {site}/torn-1.0.dist-info" in result["output"].splitlines()
    assert "whole-1.0.dist-info" not in result["output"].replace(f"{site}/whole-1.0.dist-info\n", "")
    venv = parse_venv(result["output"], result["rc"])
    assert isinstance(venv, Venv)
    assert venv.incomplete == {"torn": "1.0"} and venv.distributions.get("whole") == "1.0"
