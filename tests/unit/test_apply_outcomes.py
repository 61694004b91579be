"""What apply says after an interrupted or failed run (issue 13, item 6): a host lost at
re-detection is unreachable, not "did not converge"; "Reboot required" only after a run that
changed the kernel side, or when the fresh facts show a reboot pending."""

from __future__ import annotations

from pathlib import Path

from provision.apply import runner
from provision.apply.outcome import outcome, reboot_hosts
from provision.hosts import FleetPlan, HostPlan
from provision.os.models import PackageLocks
from provision.plan.planner import make_plan
from tests.unit.factories import CATALOG, fresh_ubuntu, spec

RUN = Path("/tmp/run")
FRESH = make_plan(spec(), fresh_ubuntu(), CATALOG)  # installs the driver: reboot_required


def result(**host: object) -> runner.ApplyResult:
    return runner.ApplyResult(RUN, "failed", 2, {"gpu1": runner.HostResult("gpu1", **host)})  # type: ignore[arg-type]


def test_a_failed_run_that_changed_nothing_asks_for_no_reboot() -> None:
    failed = result(ok=3, failed=1, failures=("Install: E: Unable to correct problems",))
    again = FleetPlan({"gpu1": HostPlan("gpu1", None, FRESH)})  # the same changes are still planned
    assert FRESH.reboot_required
    assert reboot_hosts({"gpu1": FRESH}, failed, again) == {}


def test_a_finished_run_of_a_kernel_side_change_asks_for_a_reboot() -> None:
    done = make_plan(spec(), fresh_ubuntu(), CATALOG).model_copy(
        update={"steps": (), "reboot_required": False}
    )
    again = FleetPlan({"gpu1": HostPlan("gpu1", None, done)})
    assert set(reboot_hosts({"gpu1": FRESH}, result(ok=30, changed=9), again)) == {"gpu1"}


def test_flag_alone_on_a_converged_box_gives_the_pending_reason() -> None:
    from provision.plan.consistency import reboot_pending

    step = reboot_pending(
        fresh_ubuntu(package_locks=PackageLocks(reboot_required=("linux-image-6.1.0-26-amd64",)))
    )
    assert step is not None
    assert step.reason == "reboot pending: /run/reboot-required was set by linux-image-6.1.0-26-amd64"
    assert reboot_pending(fresh_ubuntu(package_locks=PackageLocks())) is None


def test_a_host_lost_at_re_detection_is_unreachable_not_unconverged() -> None:
    lost = FleetPlan(
        {"gpu1": HostPlan("gpu1", None, FRESH, unreachable="host unreachable: ssh: connect refused")}
    )
    planned = HostPlan("gpu1", None, FRESH)
    said = outcome(planned, result(ok=30, changed=9), lost)
    assert said.outcome == (
        "unreachable after the run: host unreachable: ssh: connect refused; whether it converged is unknown"
    )
    assert not said.ok
