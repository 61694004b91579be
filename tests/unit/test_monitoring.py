"""Monitoring (issue 16): the DCGM and monitoring components' plans and refusals, the files they
render, the shipped rules and counters (promtool), verify's monitoring checks and its textfile."""

from __future__ import annotations

import csv
import http.server
import io
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from provision.catalog.monitoring import load_monitoring
from provision.components.monitoring_files import managed_files, role_file
from provision.detect.domains.monitoring import MANAGED_FILES, Listening, ManagedFiles, Socket
from provision.detect.facts import Facts, PciDevice, Unknown
from provision.errors import ProvisionError
from provision.plan.models import Action, Component, Plan
from provision.plan.planner import make_plan
from provision.plan.validate import validate_spec
from provision.spec.models import Spec
from provision.verify.checks_monitoring import NODE_FAMILIES, RULE_FAMILIES
from provision.verify.limits import shipped_limits
from provision.verify.models import CheckResult, Measured, Report, Threshold
from provision.verify.monitoring_probe import (
    MonitoringRun,
    Scrape,
    Target,
    parse_states,
    parse_targets,
    scrape,
)
from provision.verify.runs import VerifyInputs
from provision.verify.textfile import check_path, render, write_textfile
from provision.verify.workflow import evaluate
from tests.unit.factories import CATALOG, ROOT, fresh_ubuntu, one_report, pkg, spec

RULES = ROOT / "playbooks" / "roles" / "monitoring" / "files" / "provision-gpu.rules.yml"
RULE_TESTS = ROOT / "tests" / "promtool" / "provision-gpu.rules.test.yml"
EXPORTER_PAGE = ROOT / "tests" / "fixtures" / "monitoring" / "dcgm-exporter-metrics.txt"
MON = load_monitoring()
GPU = PciDevice(bdf="0000:41:00.0", class_code="0302", device_id="20b8")
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)"
)


def monitored(**monitoring: object) -> Spec:
    """dual-a100x with a monitoring section (DCGM 4.5.3 and Prometheus unless overridden)."""
    section = {"dcgm": "4.5.3", "prometheus": True} | monitoring
    return spec(monitoring=section)


def machine(**changes: object) -> Facts:
    """A fresh box with one NVIDIA GPU in lspci and nothing listening."""
    base = {"nvidia_pci": (GPU,), "listening": Listening(), "monitoring_files": ManagedFiles()}
    return fresh_ubuntu(**(base | changes))


def converged(s: Spec) -> Facts:
    """What detection reads after apply: the packages installed, the files as rendered."""
    assert s.monitoring is not None
    files = {f.dest: f.sha256 for f in managed_files(s.monitoring, MON)}
    return machine(
        packages=(
            pkg("datacenter-gpu-manager-4-core", "1:4.5.3-1"),
            pkg("datacenter-gpu-manager-4-cuda13", "1:4.5.3-1"),
            pkg("datacenter-gpu-manager-exporter", "4.8.2-1"),
            pkg("prometheus-node-exporter", "1.5.0-1+b6"),
            pkg("prometheus", "2.42.0+ds-5+deb12u1"),
        ),
        monitoring_files=ManagedFiles(sha256=files),
        listening=Listening(
            sockets=(
                Socket(address="0.0.0.0", port=9400, process="dcgm-exporter"),
                Socket(address="*", port=9100, process="prometheus-node"),
                Socket(address="127.0.0.1", port=9090, process="prometheus"),
            )
        ),
    )


def steps(plan: Plan, component: Component) -> list[tuple[Action, tuple[str, ...]]]:
    return [(s.action, s.packages) for s in plan.steps if s.component is component]


def rules(plan: Plan) -> list[str]:
    return [f.rule for f in plan.blockers]


# --- Plan -------------------------------------------------------------------------------------------


def test_fresh_box_installs_dcgm_paired_with_its_exporter_and_the_distro_services() -> None:
    plan = make_plan(monitored(), machine(), CATALOG)
    assert not rules(plan), plan.blockers
    assert steps(plan, Component.DCGM) == [
        (
            Action.INSTALL,
            (
                "datacenter-gpu-manager-4-core=1:4.5.3-*",
                "datacenter-gpu-manager-4-cuda13=1:4.5.3-*",
                "datacenter-gpu-manager-exporter=4.8.2-*",
            ),
        )
    ]
    assert steps(plan, Component.MONITORING) == [
        (Action.INSTALL, ("prometheus-node-exporter", "prometheus")),
        (Action.CONFIGURE, ()),
    ]
    # DCGM joins the one NVIDIA transaction; the distribution's packages go through the role.
    assert (
        "datacenter-gpu-manager-exporter=4.8.2-*" in plan.role_vars("nvidia_packages")["nvidia_packages_list"]
    )
    assert "prometheus" not in plan.role_vars("nvidia_packages")["nvidia_packages_list"]
    role = plan.role_vars("monitoring")
    assert role["monitoring_packages"] == ["prometheus-node-exporter", "prometheus"]
    assert [f["dest"] for f in role["monitoring_files"]] == list(MANAGED_FILES[:-1])  # the last is RHEL's
    assert role["monitoring_services"] == [
        "nvidia-dcgm",
        "nvidia-dcgm-exporter",
        "prometheus-node-exporter",
        "prometheus",
    ]


def test_shipped_files_travel_as_role_files_not_as_templated_text() -> None:
    files = make_plan(monitored(), machine(), CATALOG).role_vars("monitoring")["monitoring_files"]
    assert [f.get("src") for f in files if "src" in f] == ["dcgm-counters.csv", "provision-gpu.rules.yml"]
    assert not any("{{" in f.get("content", "") for f in files)


def test_dcgm_is_pinned_and_held_with_the_stack() -> None:
    plan = make_plan(monitored(), machine(), CATALOG)
    preferences = plan.role_vars("nvidia_repository")["nvidia_repository_preferences"]
    assert "Package: datacenter-gpu-manager-4-*\nPin: version 1:4.5.3-*" in preferences
    assert "Package: datacenter-gpu-manager-exporter\nPin: version 4.8.2-*" in preferences
    held = next(s for s in plan.steps if s.component is Component.HOLDS)
    assert {"datacenter-gpu-manager-4-core", "datacenter-gpu-manager-exporter"} <= set(held.packages)


def test_converged_machine_plans_no_monitoring_change_and_says_why() -> None:
    s = monitored()
    plan = make_plan(s, converged(s), CATALOG)
    changing = [x for x in plan.steps if x.changes and x.component in (Component.DCGM, Component.MONITORING)]
    assert not changing, changing
    reasons = [x.reason for x in plan.steps if x.component in (Component.DCGM, Component.MONITORING)]
    assert reasons == [
        "datacenter-gpu-manager-4-core, datacenter-gpu-manager-4-cuda13, datacenter-gpu-manager-exporter "
        "installed at the paired versions",
        "prometheus-node-exporter 1.5.0-1+b6, prometheus 2.42.0+ds-5+deb12u1 installed from the distribution",
        "6 monitoring files match the spec (counters file, dcgm-exporter drop-in, node exporter ARGS, "
        "Prometheus ARGS, alert rules, scrape configuration)",
    ]
    assert plan.role_vars("monitoring") is None


def test_a_drifted_file_is_rewritten_and_only_it_is_named() -> None:
    s = monitored()
    facts = converged(s)
    assert isinstance(facts.monitoring_files, ManagedFiles)
    drifted = facts.monitoring_files.sha256 | {"/etc/prometheus/prometheus.yml": "0" * 64}
    plan = make_plan(s, facts.model_copy(update={"monitoring_files": ManagedFiles(sha256=drifted)}), CATALOG)
    step = next(x for x in plan.steps if x.component is Component.MONITORING and x.changes)
    assert step.current == "differs"
    assert step.reason.startswith("write scrape configuration (/etc/prometheus/prometheus.yml);")


def test_no_monitoring_section_plans_nothing() -> None:
    plan = make_plan(spec(), machine(), CATALOG)
    assert not [x for x in plan.steps if x.component in (Component.DCGM, Component.MONITORING)]
    assert plan.role_vars("monitoring") is None


# --- Refusals ---------------------------------------------------------------------------------------


def test_dcgm_plugin_not_matching_the_drivers_cuda_major_is_refused_by_validate_and_plan() -> None:
    s = monitored(dcgm_cuda=12)  # driver R580 reports CUDA 13
    assert [f.rule for f in validate_spec(s, CATALOG)] == ["dcgm-cuda-mismatch"]
    plan = make_plan(s, machine(), CATALOG)
    assert rules(plan) == ["dcgm-cuda-mismatch"]
    assert "datacenter-gpu-manager-4-cuda13" in plan.blockers[0].message
    assert not steps(plan, Component.DCGM)


def test_dcgm_release_without_a_paired_exporter_is_refused() -> None:
    finding = next(f for f in validate_spec(monitored(dcgm="4.0.0"), CATALOG))
    assert finding.rule == "dcgm-release-unpaired"
    assert "4.5.3" in finding.message and "github.com/NVIDIA/dcgm-exporter" in finding.source


def test_monitoring_without_nvidia_gpus_is_refused() -> None:
    plan = make_plan(monitored(), machine(nvidia_pci=()), CATALOG)
    assert rules(plan) == ["monitoring-without-nvidia-gpus"]


def test_unknown_pci_does_not_refuse() -> None:
    plan = make_plan(monitored(), machine(nvidia_pci=Unknown(unknown="lspci: not found")), CATALOG)
    assert "monitoring-without-nvidia-gpus" not in rules(plan)


@pytest.mark.parametrize(
    ("socket", "field"),
    [
        (Socket(address="0.0.0.0", port=9400, process="python3"), "exporter_port"),
        (Socket(address="::", port=9100, process="nginx"), "node_exporter_port"),
        (Socket(address="127.0.0.1", port=9090, process=None), "prometheus_port"),
    ],
)
def test_a_port_taken_by_another_program_is_refused(socket: Socket, field: str) -> None:
    plan = make_plan(monitored(), machine(listening=Listening(sockets=(socket,))), CATALOG)
    assert rules(plan) == ["monitoring-port-taken"]
    assert plan.blockers[0].message.startswith(f"monitoring.{field}: port {socket.port} is taken by")


def test_a_port_on_another_specific_address_is_no_conflict() -> None:
    other = Listening(sockets=(Socket(address="127.0.0.3", port=9400, process="python3"),))
    assert not rules(make_plan(monitored(listen="127.0.0.2"), machine(listening=other), CATALOG))
    assert rules(make_plan(monitored(listen="0.0.0.0"), machine(listening=other), CATALOG)) == [
        "monitoring-port-taken"
    ]


def test_the_services_own_sockets_are_not_a_conflict() -> None:
    s = monitored()
    assert not rules(make_plan(s, converged(s), CATALOG))
    # ss without -p rights shows no process: the socket counts as the service's once its package is in.
    facts = converged(s)
    assert isinstance(facts.listening, Listening)
    anonymous = Listening(
        sockets=tuple(x.model_copy(update={"process": None}) for x in facts.listening.sockets)
    )
    assert not rules(make_plan(s, facts.model_copy(update={"listening": anonymous}), CATALOG))


def test_dcgm_3_installed_is_refused() -> None:
    facts = machine(packages=(pkg("datacenter-gpu-manager", "1:3.3.9"),))
    assert rules(make_plan(monitored(), facts, CATALOG)) == ["dcgm-3-installed"]


def test_ports_must_differ() -> None:
    with pytest.raises(ValueError, match="must differ"):
        monitored(exporter_port=9100)


@pytest.mark.parametrize("listen", ["localhost", "0.0.0.0:9400", "{{ lookup('pipe', 'id') }}"])
def test_listen_must_be_an_ip_address(listen: str) -> None:
    with pytest.raises(ValueError, match="IPv4 or IPv6 address"):
        monitored(listen=listen)


# --- Rendered files, fleet targets -----------------------------------------------------------------


def test_managed_paths_are_what_detection_hashes() -> None:
    all_on = managed_files(monitored().monitoring, MON)  # type: ignore[arg-type]
    rhel = managed_files(monitored().monitoring, MON.for_format("rpm"))  # type: ignore[arg-type]
    on_either = dict.fromkeys(f.dest for f in (*all_on, *rhel))
    assert tuple(on_either) == MANAGED_FILES


def test_ipv6_listen_is_bracketed_and_prometheus_yaml_lists_fleet_hosts() -> None:
    s = monitored(listen="::", scrape_hosts=["gpu2.example.org"])
    assert s.monitoring is not None
    files = {f.dest: f.content for f in managed_files(s.monitoring, MON, ("gpu3",))}
    dropin = files["/etc/systemd/system/nvidia-dcgm-exporter.service.d/provision.conf"]
    counters = "/etc/dcgm-exporter/provision-counters.csv"
    assert dropin.endswith(f"ExecStart=\nExecStart=/usr/bin/dcgm-exporter -f {counters} -a [::]:9400\n")
    config = YAML(typ="safe").load(files["/etc/prometheus/prometheus.yml"])
    assert config["rule_files"] == ["/etc/prometheus/provision-gpu.rules.yml"]
    assert {c["job_name"]: c["static_configs"][0]["targets"] for c in config["scrape_configs"]} == {
        "dcgm": ["localhost:9400", "gpu2.example.org:9400", "gpu3:9400"],
        "node": ["localhost:9100", "gpu2.example.org:9100", "gpu3:9100"],
        "prometheus": ["127.0.0.1:9090"],
    }


def test_fleet_plan_scrapes_every_monitored_host_from_the_monitoring_server() -> None:
    s = monitored()
    plan = make_plan(s, machine(host="mon"), CATALOG, fleet_monitored=("mon", "gpu1", "gpu2"))
    files = {f["dest"]: f.get("content", "") for f in plan.role_vars("monitoring")["monitoring_files"]}
    assert "- gpu1:9400\n    - gpu2:9400" in files["/etc/prometheus/prometheus.yml"]
    assert "- mon:9400" not in files["/etc/prometheus/prometheus.yml"]


# --- Shipped rules and counters ---------------------------------------------------------------------


def _counter_fields() -> list[str]:
    text = role_file("dcgm-counters.csv")
    rows = csv.reader(io.StringIO(text), skipinitialspace=True)
    return [row[0] for row in rows if row and not row[0].startswith("#")]


def test_counters_file_rows_have_three_fields_and_cover_what_the_rules_read() -> None:
    text = role_file("dcgm-counters.csv")
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            assert line.count(",") >= 2 and line.split(",")[1].strip() in ("gauge", "counter", "label"), line
    fields = _counter_fields()
    assert len(fields) == len(set(fields))
    exprs = " ".join(
        r["expr"] for g in YAML(typ="safe").load(RULES.read_text())["groups"] for r in g["rules"]
    )
    read_by_rules = set(re.findall(r"DCGM_FI_\w+", exprs))
    assert read_by_rules <= set(RULE_FAMILIES) <= set(fields)


def test_every_alert_has_severity_summary_and_a_public_source() -> None:
    groups = YAML(typ="safe").load(RULES.read_text(encoding="utf-8"))["groups"]
    alerts = [r for g in groups for r in g["rules"]]
    assert len(alerts) >= 12
    for alert in alerts:
        assert alert["labels"]["severity"] in ("info", "warning", "critical"), alert["alert"]
        assert alert["annotations"]["summary"] and alert["annotations"]["source"], alert["alert"]


def test_every_alert_is_exercised_by_the_promtool_tests() -> None:
    groups = YAML(typ="safe").load(RULES.read_text(encoding="utf-8"))["groups"]
    names = {r["alert"] for g in groups for r in g["rules"]}
    tests = YAML(typ="safe").load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]
    firing = {t["alertname"] for case in tests for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert firing == names


@needs_promtool
def test_promtool_checks_the_shipped_rules() -> None:
    done = subprocess.run([str(PROMTOOL), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 13 rules found" in done.stdout


@needs_promtool
def test_promtool_unit_tests_fire_and_do_not_fire_each_alert() -> None:
    done = subprocess.run([str(PROMTOOL), "test", "rules", str(RULE_TESTS)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


# --- verify: textfile -------------------------------------------------------------------------------


def _report() -> Report:
    return Report(
        host="gpu1",
        spec="specs/h200-monitoring.yaml",
        started_at=datetime(2026, 12, 1, 10, 0, tzinfo=UTC),
        seconds=11.5,
        results=(
            CheckResult(
                id="memory-temperature",
                subject="gpu0",
                title="HBM",
                status="pass",
                measured=Measured(value=46.0, unit="C"),
                threshold=Threshold(op="<=", value=95.0, unit="C", source="verify.yaml"),
            ),
            CheckResult(
                id="pcie-h2d",
                subject="gpu0",
                title="h2d",
                status="fail",
                measured=Measured(value=20.5, unit="GB/s"),
                threshold=Threshold(op=">=", value=50.0, unit="GB/s", source="verify.yaml"),
            ),
            CheckResult(
                id="driver-branch", title="branch", status="pass", measured=Measured(value="580.95.05")
            ),
        ),
    )


def test_textfile_names_carry_base_units_and_every_status() -> None:
    text = render({"gpu1": _report()}).decode()
    assert (
        'provision_verify_measured_celsius{check="memory-temperature",host="gpu1",subject="gpu0"} 46.0'
        in text
    )
    # Compared as a parsed sample: prometheus-client writes 2.05e+10 (0.26) or 20500000000.0 (0.20).
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    labels = (("check", "pcie-h2d"), ("host", "gpu1"), ("subject", "gpu0"))
    assert samples[("provision_verify_measured_bytes_per_second", labels)] == 20.5e9
    assert (
        'provision_verify_threshold_celsius{check="memory-temperature",host="gpu1",op="<=",subject="gpu0"} '
        "95.0" in text
    )
    assert (
        'provision_verify_check_status{check="pcie-h2d",host="gpu1",status="fail",subject="gpu0"} 1.0' in text
    )
    assert (
        'provision_verify_check_status{check="pcie-h2d",host="gpu1",status="pass",subject="gpu0"} 0.0' in text
    )
    assert 'provision_verify_checks{host="gpu1",status="fail"} 1.0' in text
    assert 'provision_verify_duration_seconds{host="gpu1"} 11.5' in text
    assert "580.95.05" not in text  # a text value has no number to export; its status is there


def test_textfile_is_written_atomically_world_readable(tmp_path: Path) -> None:
    target = tmp_path / "provision-verify.prom"
    target.write_text("old\n")
    write_textfile(target, {"gpu1": _report()})
    assert target.read_bytes() == render({"gpu1": _report()})
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["provision-verify.prom"]  # no temporary left behind


@pytest.mark.parametrize(
    ("name", "why"), [("verify.txt", "only \\*.prom"), ("absent/v.prom", "does not exist")]
)
def test_textfile_path_is_refused_before_verify_runs(tmp_path: Path, name: str, why: str) -> None:
    with pytest.raises(ProvisionError, match=why):
        check_path(tmp_path / name)


@needs_promtool
def test_promtool_accepts_the_textfile_of_the_real_h200_run(tmp_path: Path) -> None:
    from provision.verify.command import run_verify

    report = run_verify(
        ROOT / "specs" / "h200-ubuntu2404.yaml",
        inputs_file=ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json",
    ).report
    target = tmp_path / "provision-verify.prom"
    write_textfile(target, {report.host: report})
    done = subprocess.run(
        [str(PROMTOOL), "check", "metrics"], input=target.read_text(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "provision_verify_measured_flop_per_second" in target.read_text()


# --- verify: monitoring checks and probe ------------------------------------------------------------


def _evaluate(s: Spec, run: MonitoringRun | None) -> dict[str, CheckResult]:
    inputs = VerifyInputs(
        facts=machine(), gpu_run=Unknown(unknown="no GPU work"), observed={"monitoring": run}
    )
    results = evaluate(s, inputs, CATALOG, shipped_limits())
    ids = ("monitoring-services", "dcgm-exporter-metrics", "node-exporter-metrics", "prometheus-targets")
    return {r.name: r for r in results if r.id in ids}


def _healthy() -> MonitoringRun:
    return MonitoringRun(
        services={
            u: "active"
            for u in ("nvidia-dcgm", "nvidia-dcgm-exporter", "prometheus-node-exporter", "prometheus")
        },
        exporter=Scrape(url="http://localhost:9400/metrics", names=RULE_FAMILIES),
        node_exporter=Scrape(url="http://localhost:9100/metrics", names=NODE_FAMILIES),
        targets=(
            Target(job="dcgm", instance="localhost:9400", health="up"),
            Target(job="node", instance="localhost:9100", health="up"),
            Target(job="prometheus", instance="127.0.0.1:9090", health="up"),
        ),
    )


def test_healthy_monitoring_passes_every_check() -> None:
    got = _evaluate(monitored(), _healthy())
    assert {n: r.status for n, r in got.items()} == {
        "monitoring-services[nvidia-dcgm]": "pass",
        "monitoring-services[nvidia-dcgm-exporter]": "pass",
        "monitoring-services[prometheus-node-exporter]": "pass",
        "monitoring-services[prometheus]": "pass",
        "dcgm-exporter-metrics": "pass",
        "node-exporter-metrics": "pass",
        "prometheus-targets[dcgm/localhost:9400]": "pass",
        "prometheus-targets[node/localhost:9100]": "pass",
        "prometheus-targets[prometheus/127.0.0.1:9090]": "pass",
    }


def test_broken_monitoring_fails_with_reasons() -> None:
    run = _healthy().model_copy(
        update={
            "services": {"nvidia-dcgm": "active", "nvidia-dcgm-exporter": "failed"},
            "exporter": Scrape(
                url="http://localhost:9400/metrics", error="not answering (Connection refused)"
            ),
            "node_exporter": Scrape(url="http://localhost:9100/metrics", names=("node_exporter_build_info",)),
            "targets": (
                Target(job="dcgm", instance="localhost:9400", health="down", last_error="connection refused"),
            ),
        }
    )
    got = _evaluate(monitored(), run)
    assert got["monitoring-services[nvidia-dcgm-exporter]"].status == "fail"
    assert got["monitoring-services[prometheus]"].measured == Measured(value="not reported")
    assert got["dcgm-exporter-metrics"].status == "fail"
    assert "Connection refused" in got["dcgm-exporter-metrics"].detail
    assert got["node-exporter-metrics"].status == "fail"
    assert got["prometheus-targets[dcgm/localhost:9400]"].detail == "connection refused"
    assert got["prometheus-targets[node/localhost:9100]"].detail == "Prometheus does not scrape it"


def test_a_gpu_without_some_fields_is_a_warning_naming_them() -> None:
    run = _healthy().model_copy(
        update={"exporter": Scrape(url="u", names=tuple(n for n in RULE_FAMILIES if "ROW_REMAP" not in n))}
    )
    result = _evaluate(monitored(), run)["dcgm-exporter-metrics"]
    assert result.status == "warn"
    assert "missing DCGM_FI_DEV_ROW_REMAP_FAILURE, DCGM_FI_DEV_ROW_REMAP_PENDING" in result.detail


def test_no_section_no_rows_and_unread_monitoring_skips() -> None:
    assert _evaluate(spec(), None) == {}
    got = _evaluate(monitored(), None)
    assert {r.status for r in got.values()} == {"skip"}
    assert "saved without it" in got["monitoring-services"].detail


def test_a_probe_that_gave_no_answer_fails_every_monitoring_check_with_its_reason() -> None:
    why = "host probe: The command action failed to execute in the expected time frame (50)"
    got = _evaluate(monitored(), Unknown(unknown=why))  # type: ignore[arg-type]
    assert {(r.status, r.detail) for r in got.values()} == {("fail", why)}
    assert len(got) == 4


def test_systemctl_states_parse_in_order_or_give_the_reason() -> None:
    assert parse_states(("a", "b"), "active\nfailed\n") == {"a": "active", "b": "failed"}
    assert parse_states(("a",), "", "System has not been booted with systemd") == Unknown(
        unknown="systemctl is-active: System has not been booted with systemd"
    )


def test_prometheus_targets_document_parses() -> None:
    doc = {
        "status": "success",
        "data": {
            "activeTargets": [
                {"labels": {"job": "dcgm", "instance": "h:9400"}, "health": "up", "lastError": ""},
            ],
            "droppedTargets": [],
        },
    }
    assert parse_targets(doc) == (Target(job="dcgm", instance="h:9400", health="up"),)
    assert isinstance(parse_targets({"status": "error"}), Unknown)


@pytest.fixture
def exporter_server() -> Iterator[str]:
    """A loopback HTTP server serving the stand-in exporter's page at /metrics."""
    body = EXPORTER_PAGE.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body if self.path == "/metrics" else b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_scrape_reads_the_exporter_format_and_reports_a_closed_port(exporter_server: str) -> None:
    page = scrape(f"{exporter_server}/metrics")
    assert page.error is None
    assert set(RULE_FAMILIES) <= set(page.names)
    closed = scrape("http://127.0.0.1:9/metrics")
    assert closed.error is not None and closed.error.startswith("not answering")


def test_cli_verify_writes_the_textfile_and_still_prints_one_json_document(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from provision.cli import cli

    target = tmp_path / "provision-verify.prom"
    inputs = ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json"
    spec_file = str(ROOT / "specs" / "h200-ubuntu2404.yaml")
    args = ["verify", spec_file, "--inputs", str(inputs), "--json", "--prometheus", str(target)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert one_report(json.loads(result.stdout))["counts"]["fail"] == 0
    replayed = f"inputs replayed from {inputs}"  # a replay is not this machine's result
    assert f'provision_verify_checks{{host="{replayed}",status="fail"}} 0.0' in target.read_text()


def test_cli_refuses_a_textfile_path_before_verifying(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from provision.cli import cli

    spec_file = str(ROOT / "specs" / "h200-ubuntu2404.yaml")
    result = CliRunner().invoke(cli, ["verify", spec_file, "--prometheus", str(tmp_path / "v.txt")])
    assert result.exit_code == 1
    assert "reads only *.prom files" in result.output
    assert not list(tmp_path.iterdir())


def test_fleet_textfile_labels_each_host() -> None:
    text = render({"gpu1": _report(), "gpu2": _report().model_copy(update={"host": "gpu2"})}).decode()
    assert 'provision_verify_checks{host="gpu1",status="fail"} 1.0' in text
    assert 'provision_verify_checks{host="gpu2",status="fail"} 1.0' in text


def test_fleet_planning_hands_the_monitored_inventory_hosts_to_the_monitoring_server() -> None:
    from provision.hosts import Hosts, HostSpec, plan_facts

    server, worker = monitored(), monitored(prometheus=False)
    hosts = Hosts(
        Path("hosts.ini"),
        {"mon": HostSpec(server, None), "gpu1": HostSpec(worker, None), "cpu1": HostSpec(spec(), None)},
    )
    facts = {h: machine(host=h) for h in hosts.specs}
    plans = plan_facts(hosts, facts, CATALOG).hosts
    config = next(
        f["content"]
        for f in plans["mon"].plan.role_vars("monitoring")["monitoring_files"]
        if f["dest"] == "/etc/prometheus/prometheus.yml"
    )
    jobs = {
        c["job_name"]: c["static_configs"][0]["targets"]
        for c in YAML(typ="safe").load(config)["scrape_configs"]
    }
    assert jobs["dcgm"] == [
        "localhost:9400",
        "gpu1:9400",
    ]  # not itself twice, not the host without monitoring
    worker_files = [f["dest"] for f in plans["gpu1"].plan.role_vars("monitoring")["monitoring_files"]]
    assert "/etc/prometheus/prometheus.yml" not in worker_files
