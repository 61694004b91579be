"""Planner: spec + facts in, steps and findings out (pure; no command runs)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from provision.detect.domains.pci import NO_NVIDIA_PCI
from provision.detect.facts import LoadedDriver, OsRelease, Package, Torch, Unknown, Venv
from provision.detect.runner import facts_from_raw
from provision.plan.models import Action, Component, Plan
from provision.plan.planner import make_plan
from provision.spec.loader import load_spec
from tests.unit.factories import CATALOG, H200_RAW, ROOT, fresh_ubuntu, locked, pkg, spec, step


def test_h200_fixture_plans_no_changes() -> None:
    # The captured torch.txt ran the venv's python3 (/opt/torch/.venv/bin/python3 on that machine).
    facts = facts_from_raw(H200_RAW, venv="/opt/torch/.venv")
    plan = make_plan(load_spec(ROOT / "specs" / "h200-ubuntu2404.yaml"), facts, CATALOG)
    assert plan.blockers == ()
    assert plan.changes == ()
    assert "580.159.04" in step(plan, Component.DRIVER).reason
    assert step(plan, Component.NCCL).current == "2.28.3-1+cuda13.0"
    assert all(s.reason for s in plan.steps)


def test_fresh_box_installs_the_whole_stack_in_order() -> None:
    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    assert plan.blockers == ()
    assert [s.component for s in plan.changes] == [
        Component.REPOSITORY,
        Component.DRIVER,
        Component.CUDA_TOOLKIT,
        Component.CUDNN,
        Component.NCCL,
        Component.HOLDS,
        Component.PYTHON_VENV,
        Component.PYTHON_WHEELS,
    ]
    assert step(plan, Component.DRIVER).packages == ("nvidia-driver-pinning-580", "nvidia-open=580.95.05-*")
    assert step(plan, Component.CUDA_TOOLKIT).packages == ("cuda-toolkit-13-0",)
    assert step(plan, Component.CUDNN).packages == (
        "libcudnn9-cuda-13=9.14.*",
        "libcudnn9-headers-cuda-13=9.14.*",
        "libcudnn9-dev-cuda-13=9.14.*",
    )
    assert step(plan, Component.NCCL).packages == (
        "libnccl2=2.28.3-*+cuda13.0",
        "libnccl-dev=2.28.3-*+cuda13.0",
    )
    assert step(plan, Component.PYTHON_WHEELS).packages == ("torch==2.11.0+cu130",)
    assert plan.reboot_required


def test_fabric_manager_skipped_on_a100x_with_reason() -> None:
    fm = step(make_plan(spec(), fresh_ubuntu(), CATALOG), Component.FABRIC_MANAGER)
    assert fm.action is Action.NOOP
    assert "NVSwitch" in fm.reason


def test_extravars_carry_one_transaction_and_pinned_index() -> None:
    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    assert plan.role_vars("nvidia_packages")["nvidia_packages_list"] == [
        "nvidia-driver-pinning-580",
        "nvidia-open=580.95.05-*",
        "cuda-toolkit-13-0",
        "libcudnn9-cuda-13=9.14.*",
        "libcudnn9-headers-cuda-13=9.14.*",
        "libcudnn9-dev-cuda-13=9.14.*",
        "libnccl2=2.28.3-*+cuda13.0",
        "libnccl-dev=2.28.3-*+cuda13.0",
    ]
    assert (
        plan.role_vars("nvidia_repository")["nvidia_repository_url"]
        == "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
    )
    py = plan.role_vars("python_env")
    assert py["python_env_torch_index_url"] == "https://download.pytorch.org/whl/cu130"
    assert py["python_env_torch_requirements"] == ["torch==2.11.0+cu130"]
    key = plan.extravars["keys"]["nvidia_repository"]["nvidia_repository_keyring_src"]
    assert key["fingerprint"] == "EB693B3035CD5710E231E123A4B469963BF863CC" and key["url"].startswith(
        "https://"
    )


def test_installed_and_held_stack_is_noop_with_reasons() -> None:
    venv = Venv(path="/opt/provision/venv", python="3.12.3", distributions={"torch": "2.11.0+cu130"})
    facts = fresh_ubuntu(packages=_held_stack(), venv=venv, package_locks=locked(spec()))
    plan = make_plan(spec(), facts, CATALOG)
    assert plan.changes == ()
    assert step(plan, Component.DRIVER).reason.startswith("driver 580.95.05 (nvidia-open")
    assert step(plan, Component.REPOSITORY).reason == (
        "no package to install from NVIDIA's repository; apt pins in place"
    )
    assert step(plan, Component.HOLDS).action is Action.NOOP


def _held_stack() -> tuple[Package, ...]:
    return (
        pkg("nvidia-open", "580.95.05-1", "hold ok installed"),
        pkg("libnvidia-compute", "580.95.05-1", "hold ok installed"),
        pkg("cuda-toolkit-13-0", "13.0.2-1", "hold ok installed"),
        pkg("libcudnn9-cuda-13", "9.14.0.64-1", "hold ok installed"),
        pkg("libcudnn9-headers-cuda-13", "9.14.0.64-1", "hold ok installed"),
        pkg("libcudnn9-dev-cuda-13", "9.14.0.64-1", "hold ok installed"),
        pkg("libnccl2", "2.28.3-1+cuda13.0", "hold ok installed"),
        pkg("libnccl-dev", "2.28.3-1+cuda13.0", "hold ok installed"),
    )


@pytest.mark.parametrize("hold", [True, False])
def test_pins_an_older_release_wrote_where_nvidias_pinning_file_hides_them_are_moved(hold: bool) -> None:
    s = spec(driver={"branch": 580, "flavor": "open", "version": "580.95.05", "hold": hold})
    legacy = locked(s).model_copy(update={"legacy_pins": locked(s).pins})
    venv = Venv(path="/opt/provision/venv", python="3.12.3", distributions={"torch": "2.11.0+cu130"})
    plan = make_plan(s, fresh_ubuntu(packages=_held_stack(), venv=venv, package_locks=legacy), CATALOG)
    repo = step(plan, Component.REPOSITORY)
    assert repo.action is Action.CONFIGURE and repo.target == "/etc/apt/preferences.d/00-provision-nvidia"
    assert "/etc/apt/preferences.d/provision-nvidia, which apt reads after NVIDIA's" in repo.reason
    assert "apt_preferences(5)" in repo.reason
    written = plan.role_vars("nvidia_repository")
    assert written["nvidia_repository_preferences_file"] == "/etc/apt/preferences.d/00-provision-nvidia"
    assert written["nvidia_repository_legacy_preferences_files"] == [
        "/etc/apt/preferences.d/provision-nvidia"
    ]


@pytest.mark.parametrize(
    ("installed", "action"), [("580.82.07-1", Action.UPGRADE), ("580.126.20-1", Action.DOWNGRADE)]
)
def test_driver_version_change_direction(installed: str, action: Action) -> None:
    plan = make_plan(spec(), fresh_ubuntu(packages=(pkg("nvidia-open", installed),)), CATALOG)
    assert step(plan, Component.DRIVER).action is action
    assert step(plan, Component.DRIVER).target == "580.95.05"


def test_unheld_stack_package_gets_held() -> None:
    plan = make_plan(
        spec(python=None, cuda=None),
        fresh_ubuntu(
            packages=(
                pkg("nvidia-open", "580.95.05-1", "hold ok installed"),
                pkg("libnvidia-compute", "580.95.05-1"),
            )
        ),
        CATALOG,
    )
    holds = step(plan, Component.HOLDS)
    assert holds.action is Action.HOLD
    assert holds.packages == ("libnvidia-compute",)


def test_fabric_manager_pinned_to_exact_driver_on_hgx() -> None:
    s = spec(gpus__model="h100-sxm", gpus__count=8)
    fm = step(make_plan(s, fresh_ubuntu(), CATALOG), Component.FABRIC_MANAGER)
    assert fm.packages == ("nvidia-fabricmanager=580.95.05-*",)


def test_fabric_manager_without_exact_driver_is_refused() -> None:
    s = spec(gpus__model="h100-sxm", gpus__count=8, driver__version=None)
    plan = make_plan(s, fresh_ubuntu(), CATALOG)
    assert [b.rule for b in plan.blockers] == ["fabric-manager-needs-exact-driver"]


def test_fabric_manager_drift_is_moved_to_driver_version() -> None:
    s = spec(gpus__model="h100-sxm", gpus__count=8)
    facts = fresh_ubuntu(
        packages=(pkg("nvidia-open", "580.95.05-1"), pkg("nvidia-fabricmanager", "590.48.01-1"))
    )
    fm = step(make_plan(s, facts, CATALOG), Component.FABRIC_MANAGER)
    assert (fm.action, fm.current, fm.target) == (Action.DOWNGRADE, "590.48.01", "580.95.05")


def test_wrong_os_is_refused() -> None:
    facts = fresh_ubuntu(os=OsRelease(id="debian", version_id="12"))
    plan = make_plan(spec(), facts, CATALOG)
    assert [b.rule for b in plan.blockers] == ["os-mismatch"]
    assert "the machine runs debian 12" in plan.blockers[0].message


def test_broken_package_state_blocks() -> None:
    facts = fresh_ubuntu(
        packages=(pkg("libnvidia-compute-550", "550.107.02-0ubuntu0.24.04.1", "install ok half-configured"),)
    )
    plan = make_plan(spec(), facts, CATALOG)
    assert "broken-package-state" in [b.rule for b in plan.blockers]
    assert "run `dpkg --configure -a`" in plan.blockers[0].message


def test_reboot_pending_when_loaded_module_differs() -> None:
    facts = fresh_ubuntu(
        driver=LoadedDriver(version="580.82.07", flavor="open"),
        packages=(
            pkg("nvidia-open", "580.95.05-1", "hold ok installed"),
            pkg("libnvidia-compute", "580.95.05-1", "hold ok installed"),
        ),
    )
    plan = make_plan(spec(python=None, cuda=None), facts, CATALOG)
    reboot = step(plan, Component.REBOOT)
    assert reboot.reason == "reboot pending (module 580.82.07 loaded, 580.95.05 installed)"
    assert step(plan, Component.DRIVER).action is Action.NOOP


def test_existing_venv_with_other_python_is_refused_not_deleted() -> None:
    facts = fresh_ubuntu(venv=Venv(path="/opt/provision/venv", python="3.11.2"))
    plan = make_plan(spec(), facts, CATALOG)
    assert "venv-python-mismatch" in [b.rule for b in plan.blockers]


def test_torch_from_fixture_style_fact_counts_as_installed() -> None:
    facts = fresh_ubuntu(
        torch=Torch(venv="/opt/provision/venv", version="2.11.0+cu130", cuda="13.0", python="3.12.3")
    )
    plan = make_plan(spec(), facts, CATALOG)
    assert step(plan, Component.PYTHON_VENV).action is Action.NOOP
    assert step(plan, Component.PYTHON_WHEELS).action is Action.NOOP


def test_plan_round_trips_through_json() -> None:
    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    assert Plan.model_validate_json(plan.model_dump_json()) == plan


def test_planner_is_deterministic() -> None:
    facts = fresh_ubuntu()
    assert make_plan(spec(), facts, CATALOG) == make_plan(spec(), facts, CATALOG)


@pytest.mark.parametrize(
    ("cudnn", "nccl", "cudnn_glob", "nccl_glob"),
    [
        ("9.14", "2.28", "9.14.*", "2.28.*+cuda13.0"),
        # cuDNN has four fields, so 9.14.0 is a prefix: "9.14.0-*" would match no cuDNN release.
        ("9.14.0", "2.28.3", "9.14.0.*", "2.28.3-*+cuda13.0"),
        ("9.14.0.64", "2.28.3", "9.14.0.64-*", "2.28.3-*+cuda13.0"),
    ],
)
def test_library_globs_match_the_packaged_versions(
    cudnn: str, nccl: str, cudnn_glob: str, nccl_glob: str
) -> None:
    s = spec(cuda__cudnn=cudnn, cuda__nccl=nccl)
    plan = make_plan(s, fresh_ubuntu(), CATALOG)
    assert step(plan, Component.CUDNN).packages[0] == f"libcudnn9-cuda-13={cudnn_glob}"
    assert step(plan, Component.NCCL).packages[0] == f"libnccl2={nccl_glob}"
    prefs = plan.role_vars("nvidia_repository")["nvidia_repository_preferences"]
    assert f"Pin: version {cudnn_glob}\n" in prefs and f"Pin: version {nccl_glob}\n" in prefs
    # The versions NVIDIA's repository ships, as installed on the H200
    # (tests/fixtures/raw/h200-ubuntu2404-2026-12-01/dpkg-nvidia.txt).
    assert fnmatch.fnmatchcase("9.14.0.64-1", cudnn_glob)
    assert fnmatch.fnmatchcase("2.28.3-1+cuda13.0", nccl_glob)


def test_missing_dev_package_at_the_right_version_is_install_not_downgrade() -> None:
    facts = fresh_ubuntu(packages=(pkg("libnccl2", "2.28.3-1+cuda13.0"),))
    nccl = step(make_plan(spec(), facts, CATALOG), Component.NCCL)
    assert nccl.action is Action.INSTALL
    assert nccl.packages == ("libnccl2=2.28.3-*+cuda13.0", "libnccl-dev=2.28.3-*+cuda13.0")


@pytest.mark.parametrize(
    ("spec_file", "raw", "wanted", "seen"),
    [
        ("h200x2-ubuntu2404.yaml", "h200-ubuntu2404-2026-12-01", 2, 1),
        ("h200-ubuntu2404.yaml", "h200x2-ubuntu2404-2026-12-01", 1, 2),
    ],
)
def test_gpu_count_other_than_the_spec_is_refused_not_called_a_match(
    spec_file: str, raw: str, wanted: int, seen: int
) -> None:
    # Real captures of one and of two H200s: no step can add a GPU, so the plan must not say
    # "the machine matches the spec" on a box that lost one (or is another machine).
    facts = facts_from_raw(ROOT / "tests" / "fixtures" / "raw" / raw, venv="/opt/torch/.venv")
    plan = make_plan(load_spec(ROOT / "specs" / spec_file), facts, CATALOG)
    refusal = [f for f in plan.blockers if f.rule == "gpu-count-mismatch"]
    assert len(refusal) == 1
    assert f"expects {wanted} GPU(s), nvidia-smi shows {seen}" in refusal[0].message
    assert f"set gpus.count to {seen}" in refusal[0].message


def test_a_step_is_printed_as_written_never_read_as_rich_markup() -> None:
    """A version or a path holding ``[...]`` is text: rich would drop it as a style or fail on
    ``[/]``."""
    import io

    from rich.console import Console

    from provision.plan.render import render_plan

    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    odd = plan.steps[0].model_copy(update={"current": "[bold]1.0[/]", "target": "2.0 [/x]"})
    out = io.StringIO()
    render_plan(plan.model_copy(update={"steps": (odd, *plan.steps[1:])}), Console(file=out, width=200))
    assert "[bold]1.0[/] -> 2.0 [/x]" in out.getvalue()


def _rendered(plan: Plan, width: int, *, rich_only: bool, plain: bool = True) -> str:
    import io

    from rich.console import Console

    from provision.plan import render

    out = io.StringIO()
    console = Console(file=out, width=width, highlight=False, emoji=False)
    if rich_only:  # every grid laid out by rich, as before the plain-text path existed
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(render, "_grid", render.rich_grid)
            render.render_plan(plan, console)
    else:
        with pytest.MonkeyPatch.context() as patch:
            if width == 10_000 and plain:  # the lines fit: rich is not asked
                patch.setattr(render, "rich_grid", lambda *a: pytest.fail("laid out by rich"))
            render.render_plan(plan, console)
    return out.getvalue()


_SPECS = sorted((ROOT / "specs").glob("*.yaml"))
_RAWS = sorted(p for p in (ROOT / "tests" / "fixtures" / "raw").iterdir() if p.is_dir())


@pytest.mark.parametrize("raw", _RAWS, ids=[p.name for p in _RAWS])
@pytest.mark.parametrize("spec_path", _SPECS, ids=[p.stem for p in _SPECS])
def test_plan_text_is_what_rich_lays_out(spec_path: Path, raw: Path) -> None:
    """Without colour, render_plan composes the grid's lines itself; they are rich's, character
    for character (trailing spaces included), on every spec x capture, wide and narrow."""
    plan = make_plan(load_spec(spec_path), facts_from_raw(raw), CATALOG)
    for width in (10_000, 120, 40):
        assert _rendered(plan, width, rich_only=False) == _rendered(plan, width, rich_only=True), width


def test_plan_text_with_wide_characters_tabs_and_newlines_is_what_rich_lays_out() -> None:
    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    odd = (
        plan.steps[0].model_copy(update={"current": "版本 1.0", "target": "二"}),
        plan.steps[1].model_copy(update={"reason": "a\ttab"}),
        plan.steps[2].model_copy(update={"reason": "two\nlines"}),
    )
    plan = plan.model_copy(update={"steps": (*odd, *plan.steps[3:])})
    for width in (10_000, 60):
        mine = _rendered(plan, width, rich_only=False, plain=False)
        assert mine == _rendered(plan, width, rich_only=True), width
    wide_only = plan.model_copy(update={"steps": (odd[0], *plan.steps[3:])})
    assert _rendered(wide_only, 10_000, rich_only=False) == _rendered(wide_only, 10_000, rich_only=True)


@pytest.mark.parametrize(
    "venv_fact",
    [
        "virtual environment not probed",  # Facts' default: the capture has no venv probe
        "venv probe exited 1: cat: /opt/provision/venv/pyvenv.cfg: Permission denied",  # ran, failed
    ],
)
def test_a_venv_nobody_read_is_not_called_absent_and_is_still_made(venv_fact: str) -> None:
    # venv and pip over an existing environment keep what it holds: installing converges either way,
    # but the plan says what detection saw.
    from provision.detect.facts import NoVenv, Unknown

    unread = fresh_ubuntu(venv=Unknown(unknown=venv_fact), torch=Unknown(unknown="no venv given"))
    plan = make_plan(spec(), unread, CATALOG)
    for component in (Component.PYTHON_VENV, Component.PYTHON_WHEELS):
        assert step(plan, component).action is Action.INSTALL
        assert step(plan, component).current == f"not observed: {venv_fact}"
    absent = make_plan(spec(), fresh_ubuntu(venv=NoVenv(path="/opt/provision/venv")), CATALOG)
    assert step(absent, Component.PYTHON_VENV).current == "absent"
    assert step(absent, Component.PYTHON_WHEELS).current == "absent"


def test_a_venv_read_at_another_path_is_not_the_specs() -> None:
    other = Venv(path="/opt/other", python="3.12.3", distributions={"pip": "24.0"}, interpreter=True)
    plan = make_plan(spec(), fresh_ubuntu(venv=other), CATALOG)
    venv = step(plan, Component.PYTHON_VENV)
    assert venv.action is Action.INSTALL
    assert venv.current == "not observed: the facts read the venv /opt/other, not /opt/provision/venv"


def test_a_venv_observed_absent_stays_absent_through_a_facts_file() -> None:
    from provision.detect.facts import Facts, NoVenv

    facts = fresh_ubuntu()
    assert isinstance(facts.venv, NoVenv)
    again = Facts.model_validate_json(facts.model_dump_json())
    assert again == facts and isinstance(again.venv, NoVenv)
    venv = Facts.model_validate_json(fresh_ubuntu(venv=Venv(path="/opt/v")).model_dump_json()).venv
    assert isinstance(venv, Venv)


@pytest.mark.parametrize(
    ("pci_reason", "said"),
    [
        # sysfs read and no NVIDIA function on the bus: no driver will make the spec's GPUs appear
        (NO_NVIDIA_PCI, "no NVIDIA GPU in this machine: no NVIDIA PCI devices in /sys/bus/pci/devices"),
        # sysfs not readable: nothing is known about the bus, verify checks after the driver loads
        ("cannot read /sys/bus/pci/devices", "no GPU visible: nvidia-smi: not found; GPU count and model"),
    ],
)
def test_no_gpu_visible_says_whether_the_pci_bus_has_any(pci_reason: str, said: str) -> None:
    hardware = facts_from_raw(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01").hardware
    assert not isinstance(hardware, Unknown)
    facts = fresh_ubuntu(hardware=hardware.model_copy(update={"pci": Unknown(unknown=pci_reason)}))
    plan = make_plan(spec(), facts, CATALOG)
    found = [f for f in plan.warnings if f.rule == "gpus-not-visible"]
    assert len(found) == 1 and found[0].message.startswith(said) and found[0].unconfirmed
    assert ("the spec's 2 x a100x are not on the PCI bus" in found[0].message) is (
        pci_reason == NO_NVIDIA_PCI
    )
