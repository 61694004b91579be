"""``apply --reboot`` and ``provision resume`` without a machine: the resume record and its trust, the
one-shot unit (checked by systemd-analyze where installed), the reboot play's outcomes, the remote
reboot flow with Ansible and detection mocked, the MOK console stop, and the CLI options."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from rich.console import Console
from typer.testing import CliRunner

from provision import ansible, trust
from provision.apply import reboot as phase
from provision.apply import runner
from provision.apply.outcome import Applied, HostOutcome
from provision.apply.resume import resume_workflow
from provision.apply.views import JsonReport, SingleView
from provision.cli import cli
from provision.errors import ProvisionError
from provision.hosts import FleetPlan, HostPlan, Hosts, HostSpec, HostState
from provision.plan.models import Action, Component, Plan, Step
from provision.plan.planner import make_plan
from provision.reboot import mok, record, remote, unit
from tests.unit.factories import CATALOG, by_host, fresh_ubuntu, keyed, spec, systemd_analyze_verify

FRESH = make_plan(spec(), fresh_ubuntu(), CATALOG)  # installs the driver: a reboot is required
DONE = FRESH.model_copy(update={"steps": (), "reboot_required": False})
MOK_STEP = Step(component=Component.SECURE_BOOT, action=Action.MANUAL, target="MOK enrolled", reason="enroll")
MOK_WAITING = DONE.model_copy(update={"steps": (MOK_STEP,)})
CONSENTED = [s.component.value for s in FRESH.changes]


def _spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text((Path(__file__).resolve().parents[2] / "specs" / "dual-a100x.yaml").read_text())
    path.chmod(0o644)
    return path


def _record(tmp_path: Path, **over: Any) -> record.ResumeRecord:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    args: dict[str, Any] = {
        "inventory": None,
        "hosts": ["localhost"],
        "consented": CONSENTED,
        "mok_pending": [],
        "run_dir": run_dir,
        "runs_dir": tmp_path,
    } | over
    return record.new_record(_spec_file(tmp_path), **args)


# --- the resume record -------------------------------------------------------------------------


def test_a_record_round_trips_sealed_and_mode_0600(tmp_path: Path) -> None:
    written = _record(tmp_path, mok_pending=["localhost"])
    path = tmp_path / "state" / "resume.json"
    record.write_record(written, path)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert record.read_record(path) == written
    assert written.digest == record.digest_of(written) and len(written.digest) == 64
    assert written.log == tmp_path / "run" / "resume.log"
    assert record.check_spec(written) == Path(written.spec_path)


def test_an_edited_record_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "resume.json"
    record.write_record(_record(tmp_path), path)
    doc = json.loads(path.read_text())
    doc["consented"] = [*doc["consented"], "serve"]  # someone widens what may run unattended
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    with pytest.raises(record.ResumeError, match="changed after apply wrote it"):
        record.read_record(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's group needs root")
def test_a_record_others_may_write_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "resume.json"
    record.write_record(_record(tmp_path), path)
    path.chmod(0o620)
    os.chown(path, os.geteuid(), 100)  # Debian's "users": not the owner's private group
    with pytest.raises(record.ResumeError, match=r"not trusted: writable by group users"):
        record.read_record(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_as_root_a_record_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "resume.json"
    record.write_record(_record(tmp_path), path)
    os.chown(path, 1000, 1000)
    with pytest.raises(record.ResumeError, match=r"not trusted: a file owned by uid 1000 .*, not by root"):
        record.read_record(path)


def test_a_missing_or_malformed_record_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(record.ResumeError, match="no resume record"):
        record.read_record(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format_version": 1}')
    bad.chmod(0o600)
    with pytest.raises(record.ResumeError, match="not a provision resume record"):
        record.read_record(bad)


def test_a_spec_changed_since_apply_is_refused(tmp_path: Path) -> None:
    written = _record(tmp_path)
    Path(written.spec_path).write_text(Path(written.spec_path).read_text() + "# edited\n")
    with pytest.raises(record.ResumeError, match="changed since apply wrote the resume record"):
        record.check_spec(written)


# --- the unit ----------------------------------------------------------------------------------


def test_the_unit_runs_once_after_the_network_while_the_record_exists() -> None:
    text = unit.unit_text(("/opt/provision venv/bin/python", "-I", "-m", "provision", "resume", "--unit"))
    assert "Type=oneshot\n" in text
    assert "Wants=network-online.target\nAfter=network-online.target\n" in text
    assert "ConditionPathExists=/var/lib/provision/resume.json\n" in text
    assert 'ExecStart="/opt/provision venv/bin/python" -I -m provision resume --unit\n' in text
    assert "WantedBy=multi-user.target\n" in text
    assert unit.resume_argv("/usr/bin/python3") == (
        "/usr/bin/python3",
        "-I",
        "-m",
        "provision",
        "resume",
        "--unit",
    )


def test_the_unit_refuses_control_characters_and_unplain_record_paths() -> None:
    with pytest.raises(ValueError, match="control character"):
        unit.unit_text(("/usr/bin/python3\nExecStartPost=/bin/sh",))
    with pytest.raises(ValueError, match="not a plain absolute path"):
        unit.unit_text(("/usr/bin/python3",), Path("/var/lib/a b/resume.json"))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    written = unit.install_unit(unit.unit_text(unit.resume_argv()), tmp_path)
    done = systemd_analyze_verify(written)
    assert done.returncode == 0, done.stderr


def test_install_links_the_unit_into_multi_user_and_remove_takes_both(tmp_path: Path) -> None:
    written = unit.install_unit(unit.unit_text(unit.resume_argv()), tmp_path)
    link = tmp_path / "etc/systemd/system/multi-user.target.wants/provision-resume.service"
    assert written == tmp_path / "etc/systemd/system/provision-resume.service"
    assert oct(written.stat().st_mode & 0o777) == "0o644" and unit.installed(tmp_path)
    assert os.readlink(link) == "/etc/systemd/system/provision-resume.service"
    unit.remove_unit(tmp_path)
    assert not unit.installed(tmp_path) and not link.is_symlink()


def test_a_tree_with_a_file_others_may_write_is_not_run_as_root(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "mod.py").write_text("")
    (pkg / "sub" / "mod.py").chmod(0o666)
    why = trust.problem("tree", str(pkg))
    assert why is not None
    assert why.startswith(f"{pkg / 'sub' / 'mod.py'}: writable by every user (mode 0666")


def test_an_interpreter_in_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text("")
    bin_dir.chmod(0o777)
    why = unit.run_as_root_problem(str(bin_dir / "python"))
    assert why is not None and why.startswith("the interpreter: ")


# --- the reboot play's outcomes (pure) --------------------------------------------------------


def _event(kind: str, host: str, task: str = remote.REBOOT_TASK, **res: Any) -> dict[str, Any]:
    return {"event": kind, "event_data": {"host": host, "task": task, "res": res}}


def test_each_host_gets_its_own_reboot_outcome() -> None:
    played = ansible.PlayResult(
        "failed",
        2,
        events=(
            _event("runner_on_ok", "a", rebooted=True, elapsed=41),
            _event(
                "runner_on_failed",
                "b",
                rebooted=True,
                msg="Timed out waiting for last boot time check (timeout=600)",
            ),
            _event(
                "runner_on_unreachable",
                "c",
                task="Gathering Facts",
                msg="ssh: connect to host c port 22: refused",
            ),
        ),
        stdout_tail="PLAY RECAP",
    )
    assert remote.outcomes(played, ["a", "b", "c", "d"]) == {
        "a": None,
        "b": "reboot failed: Timed out waiting for last boot time check (timeout=600)",
        "c": "unreachable: ssh: connect to host c port 22: refused",
        "d": "no result from Ansible (PLAY RECAP)",
    }


def test_the_reboot_play_gets_the_timeout_as_data_and_only_the_hosts_to_reboot(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    run = mocker.patch("provision.ansible.run_play", return_value=ansible.PlayResult("successful", 0))
    said: list[tuple[str, str | None]] = []
    remote.reboot_hosts(
        tmp_path / "hosts.ini",
        ["a", "b"],
        tmp_path / "reboot",
        90,
        forks=3,
        on_back=lambda h, w: said.append((h, w)),
    )
    kwargs = run.call_args.kwargs
    assert run.call_args.args[1] == "reboot.yml"
    assert kwargs["extravars"] == {"provision_reboot_timeout": 90}
    assert kwargs["limit"] == "a,b" and kwargs["forks"] == 3
    # Progress: one line per host as its reboot task ends, nothing for other tasks.
    kwargs["on_event"](_event("runner_on_ok", "a"))
    kwargs["on_event"](_event("runner_on_ok", "b", task="Gathering Facts"))
    kwargs["on_event"](
        _event("runner_on_failed", "b", msg="Timed out waiting for last boot time check (timeout=90)")
    )
    assert said == [("a", None), ("b", "Timed out waiting for last boot time check (timeout=90)")]


# --- the remote reboot flow --------------------------------------------------------------------


class Recorder:
    """The reboot phase's view, keeping what it was told."""

    def __init__(self) -> None:
        self.console = Console(record=True, width=200)
        self.reports: list[tuple[list[phase.RebootOutcome], Any]] = []

    def after_reboot(self) -> Recorder:
        return Recorder()

    def reboot_report(self, outcomes: list[phase.RebootOutcome], after: Any) -> None:
        self.reports.append((outcomes, after))


def _hosts(names: list[str], spec_path: str = "/srv/spec.yaml") -> Hosts:
    return Hosts(Path("/srv/hosts.ini"), {h: HostSpec(spec(), spec_path) for h in names})


def _applied(tmp_path: Path, ok: list[str], failed: list[str]) -> Applied:
    hosts = {h: runner.HostResult(h, ok=20, changed=8) for h in ok}
    hosts |= {h: runner.HostResult(h, ok=3, failed=1, failures=("Install: E: broken",)) for h in failed}
    result = runner.ApplyResult(tmp_path, "failed" if failed else "successful", 2 if failed else 0, hosts)
    again = FleetPlan({h: HostPlan(h, None, DONE if h in ok else FRESH) for h in [*ok, *failed]})
    outcomes = [
        HostOutcome(h, HostState.CHANGE, hosts[h], "converged" if h in ok else "failed", h in ok)
        for h in [*ok, *failed]
    ]
    return Applied(result, again, outcomes)


def test_only_converged_hosts_are_rebooted_and_one_not_back_fails_alone(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    reboots = mocker.patch(
        "provision.reboot.remote.reboot_hosts",
        return_value={
            "a": None,
            "b": "reboot failed: Timed out waiting for last boot time check (timeout=60)",
        },
    )
    after = FleetPlan({"a": HostPlan("a", None, DONE)})
    mocker.patch("provision.apply.reboot.plan_hosts_with_facts", return_value=(after, {}))
    reapply = mocker.Mock(return_value=0)
    view = Recorder()
    pending = {h: FRESH for h in ("a", "b", "c")}
    code = phase.after_apply(
        _hosts(["a", "b", "c"]),
        pending,
        _applied(tmp_path, ["a", "b"], ["c"]),
        phase.RebootOptions(True, 60),
        tmp_path,
        view,
        reapply,
    )
    assert code == 1
    assert reboots.call_args.args[1] == ["a", "b"]  # c failed in Ansible: not rebooted
    assert reboots.call_args.args[3] == 60
    outcomes = {o.host: o for o in view.reports[0][0]}
    assert outcomes["a"].state == "rebooted" and outcomes["a"].ok
    assert outcomes["b"].state == "not-back" and not outcomes["b"].ok
    assert "Timed out waiting for last boot time check" in outcomes["b"].outcome
    assert "c" not in outcomes
    reapply.assert_not_called()  # a's fresh plan has nothing left


def test_what_is_left_after_the_boot_is_applied_within_the_consent_only(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    mocker.patch("provision.reboot.remote.reboot_hosts", return_value={"a": None, "b": None})
    left = FRESH.model_copy(update={"steps": tuple(s for s in FRESH.steps if s.component is Component.HOLDS)})
    serve = Step(component=Component.SERVE, action=Action.INSTALL, reason="not confirmed before the reboot")
    unconfirmed = left.model_copy(update={"steps": (*left.steps, serve)})
    after = FleetPlan({"a": HostPlan("a", None, left), "b": HostPlan("b", None, unconfirmed)})
    mocker.patch("provision.apply.reboot.plan_hosts_with_facts", return_value=(after, {}))
    reapply = mocker.Mock(return_value=0)
    view = Recorder()
    code = phase.reboot_phase(
        _hosts(["a", "b"]),
        ["a", "b"],
        [],
        {"a": CONSENTED, "b": CONSENTED},
        tmp_path,
        tmp_path,
        phase.RebootOptions(True),
        view,
        reapply,
    )
    sub_hosts, sub_plan, _ = reapply.call_args.args
    assert list(sub_hosts.specs) == ["a"] and list(sub_plan.hosts) == ["a"]
    outcomes = {o.host: o for o in view.reports[0][0]}
    assert outcomes["a"].outcome == "rebooted; applied the rest; converged"
    assert outcomes["b"].state == "refused" and "serve install" in outcomes["b"].outcome
    assert code == 1


def test_a_pending_mok_enrollment_stops_with_the_console_steps_and_a_record(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    reboots = mocker.patch("provision.reboot.remote.reboot_hosts")
    spec_path = _spec_file(tmp_path)
    view = Recorder()
    code = phase.reboot_phase(
        _hosts(["a"], str(spec_path)),
        ["a"],
        {"a": "/etc/dkms/keys/signing key.der"},
        {"a": CONSENTED},
        tmp_path,
        tmp_path,
        phase.RebootOptions(True),
        view,
        mocker.Mock(),
    )
    assert code == phase.RESUME_PENDING == 3
    reboots.assert_not_called()  # MokManager boots on without enrolling: never rebooted unattended
    said = view.console.export_text()
    # the certificate the plan detected, quoted for the shell, never DKMS's default path
    assert "mokutil --import '/etc/dkms/keys/signing key.der'" in said
    assert "/var/lib/dkms/mok.pub" not in said and '"Enroll MOK", "Continue", "Yes"' in said
    assert f"provision resume {tmp_path / 'resume.json'}" in said
    kept = record.read_record(tmp_path / "resume.json")
    assert kept.mok_pending == ("a",) and kept.inventory == "/srv/hosts.ini" and kept.consented


def test_mok_pending_is_read_from_the_manual_step() -> None:
    assert mok.mok_pending(MOK_WAITING) and not mok.mok_pending(DONE) and not mok.mok_pending(None)


def test_the_certificate_to_enrol_is_read_from_the_manual_step() -> None:
    carrying = MOK_STEP.model_copy(update={"current": "/var/lib/shim-signed/mok/MOK.der"})
    assert (
        mok.certificate(DONE.model_copy(update={"steps": (carrying,)})) == "/var/lib/shim-signed/mok/MOK.der"
    )
    # a plan saved before the step carried it: DKMS's default certificate
    assert mok.certificate(MOK_WAITING) == mok.certificate(None) == "/var/lib/dkms/mok.pub"
    lines = mok.instructions("box1", "then resume", "/var/lib/shim-signed/mok/MOK.der")
    assert lines[1] == (
        "  1. on box1, as root: `mokutil --import /var/lib/shim-signed/mok/MOK.der` and choose a "
        "one-time password"
    )


def test_this_machine_gets_the_record_and_unit_and_a_reboot_in_a_minute(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    shutdown = mocker.patch("subprocess.run", return_value=subprocess.CompletedProcess([], 0, "", ""))
    view = Recorder()
    hosts = Hosts(None, {"localhost": HostSpec(spec(), str(_spec_file(tmp_path)))})
    options = phase.RebootOptions(True, root=tmp_path)
    code = phase.reboot_phase(
        hosts, ["localhost"], [], {"localhost": CONSENTED}, tmp_path, tmp_path, options, view, mocker.Mock()
    )
    assert code == 0
    assert shutdown.call_args.args[0][:3] == ["shutdown", "-r", "+1"]
    assert unit.installed(tmp_path)
    assert record.read_record(options.record_path).hosts == ("localhost",)
    assert view.reports[0][0][0].state == "scheduled"


# --- provision resume ----------------------------------------------------------------------------


def _local_record(tmp_path: Path, **over: Any) -> phase.RebootOptions:
    options = phase.RebootOptions(True, root=tmp_path)
    record.write_record(_record(tmp_path, **over), options.record_path)
    unit.install_unit(unit.unit_text(unit.resume_argv()), tmp_path)
    return options


def _planned(plan: Plan) -> FleetPlan:
    return FleetPlan({"localhost": HostPlan("localhost", None, plan)})


def test_resume_stops_again_while_the_mok_is_not_enrolled_and_keeps_its_unit(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    options = _local_record(tmp_path, mok_pending=["localhost"])
    mocker.patch("provision.apply.resume.plan_hosts", return_value=_planned(MOK_WAITING))
    assert resume_workflow(None, as_json=False, console=Console(width=200), options=options) == 3
    assert options.record_path.exists() and unit.installed(tmp_path)
    log = (tmp_path / "run" / record.LOG_NAME).read_text()  # what the unit printed, kept in the run directory
    assert "mokutil --import /var/lib/dkms/mok.pub" in log and "localhost: MOK still not enrolled" in log


def test_resume_with_nothing_left_removes_its_record_and_unit(
    tmp_path: Path, mocker: MockerFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from provision import jsonout

    jsonout.begin()
    options = _local_record(tmp_path, mok_pending=["localhost"])
    mocker.patch("provision.apply.resume.plan_hosts", return_value=_planned(DONE))  # the key is enrolled now
    assert resume_workflow(None, as_json=True, console=Console(stderr=True), options=options) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["outcome"] == "nothing-to-do" and by_host(doc)["localhost"]["ok"] is True
    assert not options.record_path.exists() and not unit.installed(tmp_path)


def test_resume_applies_within_the_consent_and_refuses_the_rest(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    options = _local_record(tmp_path, consented=["holds"])
    mocker.patch(
        "provision.apply.resume.plan_hosts", return_value=_planned(FRESH)
    )  # the driver, not consented
    apply = mocker.patch("provision.apply.resume.apply_planned")
    assert resume_workflow(None, as_json=False, console=Console(width=300), options=options) == 1
    apply.assert_not_called()
    log = (tmp_path / "run" / record.LOG_NAME).read_text()
    assert "driver install" in log and "run `provision apply` to review" in log
    assert not options.record_path.exists() and not unit.installed(tmp_path)  # it ran once


def test_resume_hands_what_is_left_to_the_apply_sequence(tmp_path: Path, mocker: MockerFixture) -> None:
    options = _local_record(tmp_path)
    mocker.patch("provision.apply.resume.plan_hosts", return_value=_planned(FRESH))
    apply = mocker.patch("provision.apply.resume.apply_planned", return_value=0)
    assert resume_workflow(None, as_json=False, console=Console(record=True), options=options) == 0
    hosts, planned, apply_options, view = apply.call_args.args
    assert hosts.inventory is None and list(planned.hosts) == ["localhost"]
    assert apply_options.yes and not apply_options.reboot.enabled and isinstance(view, SingleView)


# --- the command line ---------------------------------------------------------------------------


def test_apply_shows_the_reboot_options_and_bounds_the_timeout() -> None:
    runner_ = CliRunner()
    shown = runner_.invoke(cli, ["apply", "--help"], env={"COLUMNS": "200"})
    assert "--reboot " in shown.output and "--reboot-timeout" in shown.output
    bad = runner_.invoke(cli, ["apply", "specs/dual-a100x.yaml", "--reboot", "--reboot-timeout", "5"])
    assert bad.exit_code == 2 and "--reboot-timeout" in bad.output


def test_resume_without_a_record_is_nothing_to_do_in_one_line_or_one_document(tmp_path: Path) -> None:
    absent = tmp_path / "none.json"
    said = CliRunner().invoke(cli, ["resume", str(absent)])
    assert said.exit_code == 0 and "Nothing to resume: no resume record" in said.output
    assert len(said.output.strip().splitlines()) == 1
    as_json = CliRunner().invoke(cli, ["resume", str(absent), "--json"])
    doc = json.loads(as_json.stdout)  # exactly one document: a second would not parse
    assert as_json.exit_code == 0 and doc["outcome"] == "nothing-to-do" and doc["record"] == str(absent)
    assert doc["hosts"] == [] and doc["apply"] is None and doc["record_kept"] is False
    both = CliRunner().invoke(cli, ["resume", str(absent), "--unit"])
    assert both.exit_code == 1 and "give no RECORD" in both.output


def test_the_unit_without_a_record_is_nothing_to_do_and_removes_itself(tmp_path: Path) -> None:
    options = phase.RebootOptions(True, root=tmp_path)
    unit.install_unit(unit.unit_text(unit.resume_argv()), tmp_path)
    console = Console(record=True, width=300)
    assert resume_workflow(None, as_json=False, console=console, options=options, unit_mode=True) == 0
    assert "nothing is waiting for a reboot" in console.export_text() and not unit.installed(tmp_path)


def test_reboot_on_this_machine_is_refused_before_anything_changes_without_systemd(tmp_path: Path) -> None:
    hosts = Hosts(None, {"localhost": HostSpec(spec(), None)})
    if os.geteuid() != 0:
        with pytest.raises(ProvisionError, match="needs root"):
            phase.preflight(hosts, phase.RebootOptions(True), tmp_path)
    elif not Path("/run/systemd/system").is_dir():
        with pytest.raises(ProvisionError, match="needs systemd as init"):
            phase.preflight(hosts, phase.RebootOptions(True), tmp_path)
    phase.preflight(hosts, phase.RebootOptions(False), tmp_path)  # without --reboot nothing is checked


def test_the_single_view_reports_reboots_in_its_json() -> None:
    report = JsonReport(True)
    view = SingleView(Console(record=True), report, "x")
    report.outcome("applied", converged=True)
    view.reboot_report([phase.RebootOutcome("gpu1", "not-back", "did not come back: timeout")], None)
    assert report.data["outcome"] == "failed" and keyed(report.data["reboot"])["gpu1"]["ok"] is False
    mok_view = SingleView(Console(record=True), JsonReport(True), "x")
    mok_view.reboot_report([phase.RebootOutcome("localhost", "mok-pending", "MOK enrollment pending")], None)
    assert mok_view.report.data["outcome"] == "resume-pending"


def test_reboot_with_nothing_to_change_reboots_the_hosts_a_reboot_is_pending_on(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    from provision.apply.workflow import ApplyOptions, apply_planned
    from provision.fleet.apply import FleetView

    step = Step(component=Component.REBOOT, action=Action.REBOOT, reason="reboot pending (module 570 loaded)")
    pending_reboot = DONE.model_copy(update={"steps": (step,), "reboot_required": True})
    planned = FleetPlan({"a": HostPlan("a", None, pending_reboot), "b": HostPlan("b", None, DONE)})
    reboots = mocker.patch("provision.reboot.remote.reboot_hosts", return_value={"a": None})
    mocker.patch(
        "provision.apply.reboot.plan_hosts_with_facts",
        return_value=(FleetPlan({"a": HostPlan("a", None, DONE)}), {}),
    )
    run = mocker.patch("provision.apply.workflow.run")
    view = FleetView(Console(record=True, width=200))
    options = ApplyOptions(False, True, tmp_path, reboot=phase.RebootOptions(True, 120))
    assert apply_planned(_hosts(["a", "b"]), planned, options, view) == 0
    run.assert_not_called()  # Ansible's apply never started: nothing to change
    assert reboots.call_args.args[1] == ["a"] and reboots.call_args.args[3] == 120
    assert keyed(view.report.data["reboot"])["a"]["state"] == "rebooted"
    assert len(list(tmp_path.iterdir())) == 1  # the reboot's own run directory


def _fake_python(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "python"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(0o755)
    return str(exe)


def test_the_unit_must_import_this_very_provision(tmp_path: Path) -> None:
    """``-I`` drops the working directory: a provision run from an uninstalled tree is not what boots."""
    elsewhere = _fake_python(tmp_path, "printf /elsewhere/provision/__init__.py")
    assert unit.other_package_problem(elsewhere) == (
        f"`{elsewhere} -I -m provision` would run /elsewhere/provision/__init__.py, not this provision "
        f"({Path(unit.__file__).resolve().parents[1] / '__init__.py'})"
    )
    missing = _fake_python(tmp_path, "echo 'ModuleNotFoundError: provision' >&2; exit 1")
    assert "finds no provision package" in (unit.other_package_problem(missing) or "")


def test_the_unit_removes_itself_when_its_record_is_not_trusted(tmp_path: Path) -> None:
    options = _local_record(tmp_path)
    options.record_path.chmod(0o666)
    with pytest.raises(record.ResumeError, match="not trusted"):
        resume_workflow(None, as_json=False, console=Console(), options=options, unit_mode=True)
    assert not unit.installed(tmp_path) and options.record_path.exists()  # left for root to look at


def test_a_resume_whose_spec_changed_runs_nothing_and_keeps_its_record(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    options = _local_record(tmp_path)
    found = record.read_record(options.record_path)
    Path(found.spec_path).write_text(Path(found.spec_path).read_text() + "# edited after apply\n")
    detect = mocker.patch("provision.apply.resume.plan_hosts")
    with pytest.raises(record.ResumeError, match="changed since apply") as refused:
        resume_workflow(None, as_json=False, console=Console(), options=options, unit_mode=True)
    detect.assert_not_called()
    assert f"the resume record is kept: to drop this resume, remove it (`rm {options.record_path}`)" in str(
        refused.value
    )
    assert options.record_path.exists()  # kept for the user to review or remove
    assert not unit.installed(tmp_path)  # but the boot-time unit does not refuse again at every boot


def test_a_host_not_reachable_yet_keeps_the_record_and_is_not_called_resumed(
    tmp_path: Path, mocker: MockerFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from provision import jsonout

    inventory = tmp_path / "hosts.ini"
    inventory.write_text("box1\nbox2\n")
    where = tmp_path / "run" / record.RECORD_NAME
    record.write_record(
        _record(tmp_path, inventory=inventory, hosts=["box1", "box2"], mok_pending=["box1"]), where
    )
    booting = HostPlan("box1", None, None, "Failed to connect to the host via ssh: Connection refused")
    planned = FleetPlan({"box1": booting, "box2": HostPlan("box2", None, DONE)})
    mocker.patch("provision.apply.resume.plan_hosts", return_value=planned)
    apply = mocker.patch("provision.apply.resume.apply_planned")
    console = Console(record=True, width=300)
    assert resume_workflow(where, as_json=False, console=console, options=phase.NO_REBOOT) == 1
    said = (tmp_path / "run" / record.LOG_NAME).read_text()  # what it printed, kept in the run directory
    assert (
        "box1: not reachable yet (Failed to connect to the host via ssh: Connection refused); "
        f"run `provision resume {where}` again"
    ) in said
    assert "box1: resumed" not in said and "then unreachable" not in said
    assert where.exists() and f"The resume record {where} is kept." in console.export_text()
    apply.assert_not_called()
    capsys.readouterr()
    jsonout.begin()  # the same again with --json: one document, the record still kept
    assert resume_workflow(where, as_json=True, console=Console(stderr=True), options=phase.NO_REBOOT) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["outcome"] == "not-reachable" and doc["record_kept"] is True
    assert by_host(doc)["box1"]["state"] == "not-back" and by_host(doc)["box1"]["ok"] is False
    assert by_host(doc)["box2"]["ok"] is True and where.exists()


def test_a_host_whose_plan_still_asks_for_a_reboot_after_the_boot_failed() -> None:
    """The module did not load (Secure Boot rejected it, a kernel without it): the boot did not take."""
    step = Step(
        component=Component.REBOOT, action=Action.REBOOT, reason="reboot pending: GPUs not bound to nvidia"
    )
    blocked = DONE.model_copy(
        update={"blockers": (FRESH.warnings[0].model_copy(update={"severity": "blocker"}),)}
    )
    again = FleetPlan(
        {
            "a": HostPlan("a", None, DONE.model_copy(update={"steps": (step,), "reboot_required": True})),
            "b": HostPlan("b", None, DONE),
            "c": HostPlan("c", None, FRESH, unreachable="host unreachable: ssh: connect refused"),
            "d": HostPlan("d", None, blocked),
        }
    )
    outcomes, go = phase.after_boot(again, {}, "rebooted")
    said = {o.host: o for o in outcomes}
    assert said["a"].state == "failed"
    assert said["a"].outcome.startswith(
        "rebooted, but still reboot pending: GPUs not bound to nvidia: the boot did not bring the new kernel"
    )
    assert (
        said["b"].ok
        and said["c"].outcome == "rebooted, then unreachable: host unreachable: ssh: connect refused"
    )
    assert said["d"].state == "refused" and f"plan refused: [{FRESH.warnings[0].rule}]" in said["d"].outcome
    assert go == {}


def test_the_single_view_keeps_the_apply_after_the_boot_in_its_json(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    mocker.patch("provision.reboot.remote.reboot_hosts", return_value={"a": None})
    left = FRESH.model_copy(update={"steps": tuple(s for s in FRESH.steps if s.component is Component.HOLDS)})
    mocker.patch(
        "provision.apply.reboot.plan_hosts_with_facts",
        return_value=(FleetPlan({"a": HostPlan("a", None, left)}), {}),
    )

    def reapply(hosts: Hosts, planned: FleetPlan, view: SingleView) -> int:
        return view.report.outcome("applied", converged=True)  # what the nested apply's view records

    report = JsonReport(True)
    report.outcome("applied", converged=True)
    view = SingleView(Console(record=True), report, "x")
    code = phase.reboot_phase(
        _hosts(["a"]),
        ["a"],
        [],
        {"a": CONSENTED},
        tmp_path,
        tmp_path,
        phase.RebootOptions(True),
        view,
        reapply,  # type: ignore[arg-type]
    )
    assert code == 0 and report.data["outcome"] == "applied"
    assert (
        report.data["after_reboot"]["outcome"] == "applied"
        and report.data["after_reboot"]["converged"] is True
    )
    assert keyed(report.data["reboot"])["a"]["outcome"] == "rebooted; applied the rest; converged"


def test_ctrl_c_during_the_reboot_play_is_exit_130(tmp_path: Path, mocker: MockerFixture) -> None:
    played = ansible.PlayResult("canceled", -1, events=(_event("runner_on_ok", "a"),))
    mocker.patch("provision.ansible.run_play", return_value=played)
    mocker.patch(
        "provision.apply.reboot.plan_hosts_with_facts",
        return_value=(FleetPlan({"a": HostPlan("a", None, DONE)}), {}),
    )
    view = Recorder()
    code = phase.reboot_phase(
        _hosts(["a", "b"]),
        ["a", "b"],
        [],
        {},
        tmp_path,
        tmp_path,
        phase.RebootOptions(True),
        view,
        mocker.Mock(),
    )
    assert code == 130
    said = {o.host: o for o in view.reports[0][0]}
    assert said["a"].ok and said["b"].outcome == f"did not come back: {remote.INTERRUPTED}"


# --- apply --reboot --dry-run: the same refusals as the real run ---------------------------------


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_dry_run_refuses_what_the_real_run_refuses_and_says_so_in_its_json(
    tmp_path: Path, mocker: MockerFixture, dry_run: bool
) -> None:
    from provision.apply.workflow import ApplyOptions, apply_planned

    mocker.patch("provision.apply.reboot.os.geteuid", return_value=1000)  # not root: --reboot refused here
    run = mocker.patch("provision.apply.workflow.run")
    report = JsonReport(True, reboot=True)
    console = Console(record=True, width=300)
    options = ApplyOptions(dry_run, True, tmp_path / "runs", reboot=phase.RebootOptions(True))
    hosts = Hosts(None, {"localhost": HostSpec(spec(), None)})
    with pytest.raises(ProvisionError, match="--reboot on this machine needs root") as refused:
        apply_planned(hosts, _planned(FRESH), options, SingleView(console, report, "x"))
    run.assert_not_called()
    assert "Dry run" not in console.export_text() and not (tmp_path / "runs").exists()
    assert report.data["outcome"] == "refused" and report.data["error"]["message"] == str(refused.value)
    assert report.data["reboot"] is None and report.data["after_reboot"] is None


def test_the_cli_dry_run_with_reboot_is_refused_as_the_real_run_one_line_exit_1(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    mocker.patch("provision.apply.reboot.os.geteuid", return_value=1000)
    mocker.patch("provision.app.gather", return_value={"localhost": fresh_ubuntu()})
    mocker.patch("provision.apply.workflow.plan_facts", return_value=_planned(FRESH))
    spec_file = _spec_file(tmp_path)
    ends = {}
    for how in (["--dry-run"], ["--yes"]):
        said = CliRunner().invoke(
            cli, ["apply", str(spec_file), "--reboot", "--runs-dir", str(tmp_path / "runs"), "--json", *how]
        )
        doc = json.loads(said.stdout)  # one document
        ends[how[0]] = (
            said.exit_code,
            doc["outcome"],
            doc["error"]["message"],
            doc["reboot"],
            doc["after_reboot"],
        )
    assert ends["--dry-run"] == ends["--yes"]
    assert ends["--dry-run"][:2] == (1, "refused") and "needs root" in ends["--dry-run"][2]
    assert not (tmp_path / "runs").exists()


def test_a_dry_run_with_reboot_carries_the_reboot_keys_single_and_fleet(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    from provision.apply.workflow import ApplyOptions, apply_planned
    from provision.fleet.apply import FleetJsonReport, FleetView

    preflight = mocker.patch("provision.apply.workflow.preflight")
    options = ApplyOptions(True, False, tmp_path, reboot=phase.RebootOptions(True))
    report = JsonReport(True, reboot=True)
    view = SingleView(Console(record=True, width=200), report, "x")
    assert apply_planned(_hosts(["a"]), FleetPlan({"a": HostPlan("a", None, FRESH)}), options, view) == 0
    preflight.assert_called_once()  # checked before the dry run stopped
    assert report.data["outcome"] == "dry-run" and report.data["reboot"] is None
    assert "after_reboot" in report.data and report.data["after_reboot"] is None
    fleet = FleetView(Console(record=True, width=200), FleetJsonReport(reboot=True))
    assert apply_planned(_hosts(["a"]), FleetPlan({"a": HostPlan("a", None, FRESH)}), options, fleet) == 0
    assert fleet.report.data["outcome"] == "dry-run" and fleet.report.data["reboot"] is None
    assert "after_reboot" in fleet.report.data and fleet.report.data["after_reboot"] is None
    preflight.side_effect = ProvisionError(
        "--reboot: the runs directory is not root's alone (x); nothing was changed"
    )
    refused = FleetView(Console(record=True, width=200), FleetJsonReport(reboot=True))
    with pytest.raises(ProvisionError, match="runs directory"):
        apply_planned(_hosts(["a"]), FleetPlan({"a": HostPlan("a", None, FRESH)}), options, refused)
    assert refused.report.data["outcome"] == "refused" and refused.report.data["reboot"] is None
    assert "runs directory" in refused.report.data["error"]["message"]
    plain = JsonReport(True)  # without --reboot the document is as before
    assert "reboot" not in plain.data and "after_reboot" not in plain.data


def test_a_dry_run_with_a_reboot_pending_says_what_it_would_reboot_and_reboots_nothing(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    from provision.apply.workflow import ApplyOptions, apply_planned
    from provision.fleet.apply import FleetView

    step = Step(component=Component.REBOOT, action=Action.REBOOT, reason="reboot pending (module 570 loaded)")
    pending_reboot = DONE.model_copy(update={"steps": (step,), "reboot_required": True})
    reboots = mocker.patch("provision.reboot.remote.reboot_hosts")
    preflight = mocker.patch("provision.apply.workflow.preflight")
    view = FleetView(Console(record=True, width=200))
    options = ApplyOptions(True, True, tmp_path, reboot=phase.RebootOptions(True, 120))
    assert (
        apply_planned(_hosts(["a"]), FleetPlan({"a": HostPlan("a", None, pending_reboot)}), options, view)
        == 0
    )
    reboots.assert_not_called()
    preflight.assert_called_once()
    assert "Dry run: --reboot would reboot a; nothing was changed." in view.console.export_text()
    assert list(tmp_path.iterdir()) == []
