"""GPU settings and MIG (spec ``gpu:``) over the real H200 captures: the argv lists and the boot
unit, convergence (apply's outcome fed back as facts plans no change), verify's checks, and the
parser's older ``Power Readings`` layout. The plan's refusals and warnings are data cases in
tests/fixtures/plans/ (gpu-*.yaml, mig-*.yaml).
"""

from __future__ import annotations

from typing import Any

from provision.catalog import load_catalog
from provision.catalog.mig import load_mig
from provision.components.gpu_settings import unit_text
from provision.components.gpu_unit import render
from provision.components.mig import layout_argvs, wanted
from provision.detect.domains.gpu_state import parse_state
from provision.detect.unknown import Unknown
from provision.plan.planner import context, make_plan
from provision.verify.checks_gpu_settings import CHECKS
from provision.verify.limits import shipped_limits
from provision.verify.runs import VerifyInputs
from provision.verify.workflow import evaluate
from tests.unit.captures import edited_facts, edited_spec

CATALOG = load_catalog()
UUID = "GPU-00000000-1111-2222-3333-444444444444"
SVC = (
    "systemctl show -p Id,LoadState,ActiveState,UnitFileState,Result nvidia-persistenced.service "
    "nvidia-fabricmanager.service nvidia-dcgm.service dcgm.service provision-gpu-settings.service"
)
MIG_ON = [
    "    MIG Mode\n        Current                                        : Disabled\n"
    "        Pending                                        : Disabled",
    "    MIG Mode\n        Current                                        : Enabled\n"
    "        Pending                                        : Enabled",
]
SETTINGS = {"gpus": "all", "power_limit_w": 450, "locked_gpu_clocks": {"min_mhz": 1200, "max_mhz": 1980}}


def _services(persistenced: str, unit: str) -> dict[str, Any]:
    def block(name: str, state: str) -> str:
        if state == "absent":
            return f"Id={name}\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\nResult=success\n"
        active, enabled = state.split("/")
        return f"Id={name}\nLoadState=loaded\nActiveState={active}\nUnitFileState={enabled}\nResult=success\n"

    names = (
        "nvidia-persistenced.service",
        "nvidia-fabricmanager.service",
        "nvidia-dcgm.service",
        "dcgm.service",
    )
    states = (persistenced, "absent", "absent", "absent")
    text = "\n".join(
        [
            *(block(n, s) for n, s in zip(names, states, strict=True)),
            block("provision-gpu-settings.service", unit),
        ]
    )
    return {"command": SVC, "output": text, "rc": 0}


def _case(gpu: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"spec": {"gpu": gpu}, **more}


def test_the_role_gets_argv_lists_of_plain_words_addressed_by_uuid() -> None:
    case = _case(
        {
            "settings": {
                **SETTINGS,
                "compute_mode": "Prohibited",
                "application_clocks": {"memory_mhz": 3201, "graphics_mhz": 1755},
            }
        }
    )
    plan = make_plan(edited_spec(case), edited_facts(case), CATALOG)
    commands = plan.extravars["roles"]["gpu_settings"]["gpu_settings_commands"]
    assert commands == [
        ["nvidia-smi", "-i", UUID, "-pl", "450"],
        ["nvidia-smi", "-i", UUID, "-ac", "3201,1755"],
        ["nvidia-smi", "-i", UUID, "-lgc", "1200,1980"],
        ["nvidia-smi", "-i", UUID, "-c", "PROHIBITED"],
    ]
    assert all(" " not in word and "{" not in word for argv in commands for word in argv)


def test_the_boot_unit_runs_after_the_persistence_daemon_and_may_fail_only_to_destroy() -> None:
    case = _case({"settings": SETTINGS, "mig": {"gpus": [0], "layout": {"1g.18gb": 2, "3g.71gb": 1}}})
    text = unit_text(context(edited_spec(case), edited_facts(case), CATALOG))
    assert "After=nvidia-persistenced.service nvidia-fabricmanager.service\n" in text
    assert "Type=oneshot\nRemainAfterExit=yes\n" in text and "WantedBy=multi-user.target" in text
    execs = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    assert execs == [
        f"ExecStart=nvidia-smi -i {UUID} -pl 450",
        f"ExecStart=nvidia-smi -i {UUID} -lgc 1200,1980",
        "ExecStart=-nvidia-smi mig -i 0 -dci",
        "ExecStart=-nvidia-smi mig -i 0 -dgi",
        "ExecStart=nvidia-smi mig -i 0 -cgi 3g.71gb,1g.18gb,1g.18gb -C",  # largest first
    ]


def test_the_unit_quotes_every_word_and_is_empty_with_nothing_to_run() -> None:
    assert render([], []) == ""
    text = render([["nvidia-smi", "-i", "a b", "-pl", "100%"]], [])
    assert 'ExecStart=nvidia-smi -i "a b" -pl "100%%"\n' in text


def test_apply_then_plan_is_empty_the_observed_values_and_the_unit_are_the_specs() -> None:
    # Apply's outcome as detection would read it: the limit requested and enforced, the daemon
    # running, MIG on with the layout, the unit on disk with the planned text and enabled.
    gpu = {"persistence": True, "settings": SETTINGS, "mig": {"gpus": [0], "layout": {"1g.18gb": 7}}}
    before = _case(gpu)
    text = unit_text(context(edited_spec(before), edited_facts(before), CATALOG))
    rows = "".join(f"|   0  MIG 1g.18gb            19{7 + i:>9}{i:>11}:1     |\n+----+\n" for i in range(7))
    after = _case(
        gpu,
        edits={
            "nvidia-smi-q": [
                [
                    "Current Power Limit                            : 700.00 W",
                    "Current Power Limit                            : 450.00 W",
                ],
                [
                    "Requested Power Limit                          : 700.00 W",
                    "Requested Power Limit                          : 450.00 W",
                ],
                MIG_ON,
            ]
        },
        add={
            "gpu-services": _services("active/enabled", "active/enabled"),
            "gpu-settings-unit": {"command": "cat", "output": text, "rc": 0},
            "mig-lgi": {"command": "nvidia-smi mig -lgi", "output": f"| GPU instances: |\n{rows}", "rc": 0},
        },
    )
    plan = make_plan(edited_spec(after), edited_facts(after), CATALOG)
    assert not plan.changes, [(s.component, s.current) for s in plan.changes]
    assert not plan.blockers and not plan.reboot_required
    mine = [s for s in plan.steps if s.component.value in ("gpu_settings", "mig")]
    assert [s.reason for s in mine] == [
        "nvidia-persistenced.service active, enabled",
        "power limits, application clocks and compute modes as the spec sets them; locked clocks held "
        "by the boot unit",
        "ECC modes as the spec sets them",
        "/etc/systemd/system/provision-gpu-settings.service applies the spec's settings at boot, after "
        "nvidia-persistenced.service",
        "GPU 0 (NVIDIA H200, 0000:00:06.0): MIG mode enabled",
        "GPU 0 (NVIDIA H200, 0000:00:06.0): MIG instances {1g.18gb: 7} as the spec sets them",
    ]
    results = _verify(after)
    assert {r.id: r.status for r in results} == {
        "gpu-settings": "pass",
        "gpu-power-limit-drift": "pass",
        "gpu-persistenced": "pass",
        "mig-layout": "pass",
    }


def _verify(case: dict[str, Any]) -> tuple[Any, ...]:
    inputs = VerifyInputs(facts=edited_facts(case), gpu_run=Unknown(unknown="not run"))
    return evaluate(edited_spec(case), inputs, CATALOG, shipped_limits(), CHECKS)


def test_verify_fails_each_setting_the_machine_does_not_have_and_names_it() -> None:
    case = _case(
        {"persistence": True, "settings": SETTINGS, "mig": {"layout": {"2g.35gb": 3}}},
        add={"gpu-services": _services("inactive/disabled", "absent")},
    )
    results = {r.id: r for r in _verify(case)}
    assert results["gpu-settings"].status == "fail"
    assert "power limit 700 W -> 450 W" in str(results["gpu-settings"].measured)
    assert results["gpu-persistenced"].status == "fail"
    mig = results["mig-layout"]
    assert mig.status == "fail" and "target enabled" in mig.detail and mig.subject == "gpu0"


def test_verify_warns_of_a_power_cap_nobody_declared_without_a_gpu_section() -> None:
    case = {
        "edits": {
            "nvidia-smi-q": [
                [
                    "Current Power Limit                            : 700.00 W",
                    "Current Power Limit                            : 300.00 W",
                ]
            ]
        }
    }
    results = {r.id: r for r in _verify(case)}
    drift = results["gpu-power-limit-drift"]
    assert drift.status == "warn" and "enforced power limit 300 W < default 700 W" in drift.detail
    assert set(results) == {"gpu-power-limit-drift"}  # nothing else asked, nothing else reported
    assert _verify({}) == ()  # no drift and no gpu: section: no result at all


OLD_LAYOUT = """00000000:41:00.0
    Product Name                          : Tesla V100-SXM2-32GB
    GPU UUID                              : GPU-11111111-2222-3333-4444-555555555555
    PCI
        Device Id                         : 0x1DB510DE
    Compute Mode                          : Exclusive_Process
    Power Readings
        Power Management                  : Supported
        Power Draw                        : 43.21 W
        Power Limit                       : 250.00 W
        Default Power Limit               : 300.00 W
        Enforced Power Limit              : 250.00 W
        Min Power Limit                   : 150.00 W
        Max Power Limit                   : 300.00 W
    Max Clocks
        Graphics                          : 1530 MHz
        SM                                : 1530 MHz
        Memory                            : 877 MHz
"""
"""The ``Power Readings`` section as drivers before R535 print it (nvidia-smi(1) of R470: ``Power
Limit``, ``Enforced Power Limit``), without MIG or ECC sections."""


def test_the_older_power_readings_layout_reads_enforced_and_requested_limits() -> None:
    state = parse_state("0000:41:00.0", 0, OLD_LAYOUT)
    assert state.power.enforced_w == 250 and state.power.requested_w == 250 and state.power.default_w == 300
    assert (state.power.min_w, state.power.max_w) == (150, 300)
    assert state.device_id == "1db5" and state.compute_mode == "Exclusive_Process"
    assert state.max_clocks.graphics_mhz == 1530 and state.ecc_current is None and state.mig_current is None


def test_a_truncated_gpu_block_reads_as_unknown_values_not_an_error() -> None:
    for cut in range(0, len(OLD_LAYOUT), 37):
        state = parse_state("0000:41:00.0", 0, OLD_LAYOUT[:cut])
        assert state.bdf == "0000:41:00.0"


def test_every_catalog_layout_of_mig_parted_fits_its_product() -> None:
    # NVIDIA/mig-parted config-default.yaml's all-balanced layouts, per product (MIG-PARTED).
    balanced = {
        "h200-141gb": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
        "a100-h100-80gb": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        "a100-40gb": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        "a30-24gb": {"1g.6gb": 2, "2g.12gb": 1},
        "h100-nvl": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    }
    mig = load_mig()
    for product in mig.products:
        assert product.layout_problem(balanced[product.id]) is None, product.id
        for profile in product.profiles:  # each all-<profile> layout of mig-parted
            assert product.layout_problem({profile.name: profile.max}) is None, (product.id, profile.name)
    assert mig.for_device("2335") is mig.for_model("h200-sxm")


def test_mig_commands_address_the_gpu_by_index_and_destroy_before_creating() -> None:
    case = _case({"mig": {"gpus": ["GPU-00000000-1111-2222-3333-444444444444"], "layout": {"7g.141gb": 1}}})
    ctx = context(edited_spec(case), edited_facts(case), CATALOG)
    (want,) = wanted(ctx)
    destroy, create = layout_argvs("0", want)
    assert destroy == [["nvidia-smi", "mig", "-i", "0", "-dci"], ["nvidia-smi", "mig", "-i", "0", "-dgi"]]
    assert create == [["nvidia-smi", "mig", "-i", "0", "-cgi", "7g.141gb", "-C"]]


def test_unread_facts_plan_the_settings_and_warn_that_limits_were_not_checked() -> None:
    case = _case({"settings": {"gpus": "all", "power_limit_w": 450}}, drop=["nvidia-smi-q"])
    plan = make_plan(edited_spec(case), edited_facts(case), CATALOG)
    assert [w.rule for w in plan.warnings if w.rule.startswith("gpu-")] == ["gpu-settings-unchecked"]
    assert plan.extravars["roles"]["gpu_settings"]["gpu_settings_commands"] == [
        ["nvidia-smi", "-i", "0", "-pl", "450"]
    ]


def test_probe_outputs_of_the_new_facts_round_trip_through_saved_facts() -> None:
    from provision.detect.facts import Facts

    case = {"add": {"gpu-services": _services("active/enabled", "absent")}}
    facts = edited_facts(case)
    assert facts.gpu_runtime is not None and facts.gpu_runtime.active("nvidia-persistenced.service")
    assert Facts.model_validate_json(facts.model_dump_json()) == facts


def test_validate_accepts_the_example_and_refuses_mig_on_the_a100x_and_an_index_past_count() -> None:
    from pathlib import Path

    from provision.plan.validate import validate_spec
    from provision.spec.loader import load_spec
    from provision.spec.models import Spec

    specs = Path(__file__).parents[2] / "specs"
    example = load_spec(specs / "dual-a100-mig.yaml")
    assert [f.rule for f in validate_spec(example, CATALOG) if f.severity == "blocker"] == []
    data = load_spec(specs / "dual-a100x.yaml").model_dump(mode="json", exclude_none=True)
    data["gpu"] = {"mig": {"gpus": [0], "layout": {"1g.10gb": 7}}, "settings": {"gpus": [2], "ecc": True}}
    found = {f.rule: f.message for f in validate_spec(Spec.model_validate(data), CATALOG)}
    assert "no public NVIDIA document found gives the A100X's MIG profiles" in found["mig-unsupported"]
    assert "GPU index 2 is beyond gpus.count 2" in found["gpu-settings-unknown-gpu"]


def test_the_planned_variables_fit_the_roles_argument_specs() -> None:
    from provision.apply.rolevars import plan_problems

    case = _case(
        {"persistence": True, "settings": {**SETTINGS, "ecc": False}, "mig": {"layout": {"1g.18gb": 7}}}
    )
    plan = make_plan(edited_spec(case), edited_facts(case), CATALOG)
    assert plan_problems(plan.extravars["roles"]) == []
    assert set(plan.tags) == {"gpu_settings", "gpu_ecc", "mig", "mig_reboot"}


def test_a_slow_gpu_hint_names_the_power_cap_and_the_active_slowdown() -> None:
    from provision.verify.hints import slow_hint

    pad = " " * 35
    capped = {
        "edits": {
            "nvidia-smi-q": [
                [f"Current Power Limit{pad[:28]}: 700.00 W", f"Current Power Limit{pad[:28]}: 400.00 W"],
                [f"SW Power Cap{pad}: Not Active", f"SW Power Cap{pad}: Active"],
            ]
        }
    }
    hint = slow_hint(edited_facts(capped), 0)
    assert (
        "enforced power limit of 400 W, below its default 700 W" in hint and "nvidia-smi -i 0 -pl 700" in hint
    )
    assert "clock event reasons active on GPU 0: SW Power Cap" in hint
    assert slow_hint(edited_facts({}), 0).startswith("Slow: check power limit and clocks")


def test_geforce_cards_are_refused_ecc_and_mig_with_the_reason() -> None:
    # The four-RTX-4090 nvidia-smi -q case (tests/fixtures/facts/nvidia-smi-q: ECC Mode and MIG Mode
    # N/A as nvidia-smi prints them for GeForce cards) in place of the H200's.
    from pathlib import Path

    text = (Path(__file__).parents[1] / "fixtures/facts/nvidia-smi-q/rtx4090x4.txt").read_text()
    body = text.split("\n", 2)[2].rsplit("[exit", 1)[0]
    case = {
        "drop": ["nvidia-smi-q"],
        "add": {"nvidia-smi-q": {"command": "nvidia-smi -q", "output": body, "rc": 0}},
        "spec": {
            "gpu": {"settings": {"gpus": [1], "ecc": True}, "mig": {"gpus": [2], "layout": {"1g.18gb": 1}}}
        },
    }
    spec = edited_spec(case)
    facts = edited_facts(case)
    found = {f.rule: f.message for f in make_plan(spec, facts, CATALOG).blockers}
    assert "GPU 1 (NVIDIA GeForce RTX 4090, 0000:" in found["gpu-setting-outside-limits"]
    assert "has no ECC mode (nvidia-smi -q ECC Mode: N/A)" in found["gpu-setting-outside-limits"]
    assert "GPU 2 (NVIDIA GeForce RTX 4090" in found["mig-unsupported"]
    assert "MIG Mode N/A" in found["mig-unsupported"]
