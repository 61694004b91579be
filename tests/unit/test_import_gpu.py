"""``provision import`` of the GPUs' runtime state (``gpu:``) over real H200 captures edited into
each state (tests/fixtures/imports/gpu-*.yaml, mig-*.yaml): a power limit below the default, a
non-Default compute mode, application clocks, ECC off or pending, the persistence daemon's unit
states, MIG mode with GPU instances.

A case is a capture with edits (``tests/unit/captures.py``), plus, in the probes' own formats
built here: ``gpu_edits`` (edits within one GPU's block of ``nvidia-smi -q``, by index),
``services`` (``systemctl show`` of the GPU units, unit -> ``active/enabled`` or ``absent``) and
``lgi`` (``nvidia-smi mig -lgi`` rows: gpu, profile, profile id, start, size). It names the
``gpu:`` section import must write (null: none), words its notes must contain (``notes``) and must
not (``absent_notes``), the rule ids of
the warnings the plan may keep (the machine's, not the spec's), and the GPU steps that change.

The property: the imported spec plans no drift finding and no GPU change against the same facts
but writing provision's boot unit, which the spec implies wherever a setting or MIG layout must be
set again at every boot (none survives a reboot); fed back as on disk and enabled, the same import
plans no change at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.catalog import load_catalog
from provision.components.gpu_settings import unit_text
from provision.detect.facts import Facts, Unknown
from provision.detect.raw import ProbeOutput, read_raw, write_raw
from provision.importing.draft import Draft, updated
from provision.importing.gpu import gpu_section
from provision.importing.settle import plan_of
from provision.importing.workflow import import_one
from provision.plan.models import Plan
from provision.plan.planner import context
from provision.spec.models import Spec
from provision.verify.checks_gpu_settings import CHECKS
from provision.verify.limits import shipped_limits
from provision.verify.runs import VerifyInputs
from provision.verify.workflow import evaluate
from tests.unit.captures import CAPTURE, FIXTURES, edited_facts, read_case
from tests.unit.factories import invoke

CATALOG = load_catalog()
CASES = sorted((FIXTURES / "imports").glob("*.yaml"))
BOOT_UNIT = "provision-gpu-settings.service"
UNITS = (
    "nvidia-persistenced.service",
    "nvidia-fabricmanager.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    BOOT_UNIT,
)
GPU_COMPONENTS = ("gpu_settings", "mig")


def _services(states: dict[str, str]) -> dict[str, Any]:
    """``systemctl show -p Id,LoadState,ActiveState,UnitFileState,Result`` of the GPU units."""

    def block(name: str) -> str:
        state = states.get(name, "absent")
        if state == "absent":
            return f"Id={name}\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\nResult=success\n"
        active, enabled = state.split("/")
        return f"Id={name}\nLoadState=loaded\nActiveState={active}\nUnitFileState={enabled}\nResult=success\n"

    command = "systemctl show -p Id,LoadState,ActiveState,UnitFileState,Result " + " ".join(UNITS)
    return {"command": command, "output": "\n".join(block(n) for n in UNITS), "rc": 0}


def _lgi(rows: list[list[Any]]) -> dict[str, Any]:
    """``nvidia-smi mig -lgi`` in its table format (MIG User Guide, Getting Started with MIG)."""
    if not rows:
        return {"command": "nvidia-smi mig -lgi", "output": "No GPU instances found: Not Found\n", "rc": 6}
    rule = "+" + "-" * 57 + "+\n"
    head = (
        rule
        + "| GPU instances:                                          |\n"
        + "| GPU   Name               Profile  Instance   Placement  |\n"
        + "|                            ID       ID       Start:Size |\n"
        + "|"
        + "=" * 57
        + "|\n"
    )
    body = "".join(
        f"|  {gpu:>2}  MIG {profile:<16}{pid:>4}{7 + i:>9}{start:>11}:{size}     |\n" + rule
        for i, (gpu, profile, pid, start, size) in enumerate(rows)
    )
    return {"command": "nvidia-smi mig -lgi", "output": head + body, "rc": 0}


def _block_edits(capture: str, per_gpu: dict[int, list[list[str]]]) -> list[list[str]]:
    """Edits within one GPU's block of ``nvidia-smi -q`` (blocks start at ``GPU <bus id>``), as
    whole-block edits of the output."""
    text = read_raw(FIXTURES / "raw" / capture)["nvidia-smi-q"].output
    starts = [i for i, line in enumerate(text.splitlines(keepends=True)) if line.startswith("GPU ")]
    lines = text.splitlines(keepends=True)
    blocks = ["".join(lines[a:b]) for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
    out = []
    for index, edits in per_gpu.items():
        block = blocks[int(index)]
        new = block
        for old, replacement in edits:
            assert old in new, f"edit of GPU {index} matches nothing: {old[:60]!r}"
            new = new.replace(old, replacement)
        out.append([block, new])
    return out


def _facts(case: dict[str, Any], **more: Any) -> Facts:
    """The case's facts: its capture and edits, with the probes built here."""
    built = dict(case)
    edits = {k: list(v) for k, v in (case.get("edits") or {}).items()}
    if case.get("gpu_edits"):
        edits["nvidia-smi-q"] = [  # first: the blocks as the capture has them
            *_block_edits(case.get("capture", CAPTURE), case["gpu_edits"]),
            *edits.get("nvidia-smi-q", []),
        ]
    add = dict(case.get("add") or {})
    if "services" in case or "services" in more:
        add["gpu-services"] = _services({**(case.get("services") or {}), **more.get("services", {})})
    if "lgi" in case:
        add["mig-lgi"] = _lgi(case["lgi"])
    if "unit" in more:
        add["gpu-settings-unit"] = {"command": "cat", "output": more["unit"], "rc": 0}
    built.update(edits=edits, add=add)
    return edited_facts(built)


def _gpu_changes(plan: Plan) -> list[str | None]:
    return [s.target for s in plan.changes if s.component.value in GPU_COMPONENTS]


def _gpu_notes(notes: dict[str, list[str]]) -> str:
    return " ".join(n for path, ns in notes.items() if path == "gpu" or path.startswith("gpu.") for n in ns)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_imported_gpu_section_keeps_the_machine_as_it_is(path: Path) -> None:
    case = read_case(path)
    assert case["description"].startswith("The real "), "say which real capture it was edited from"
    facts = _facts(case)
    settled = import_one(facts, CATALOG)
    assert settled.data.get("gpu") == case["gpu"]
    said = _gpu_notes(settled.notes)
    for words in case["notes"]:
        assert words in said, said
    for words in case.get("absent_notes", []):
        assert words not in said, said
    plan = plan_of(settled.data, facts, CATALOG)
    assert not plan.blockers, plan.blockers
    gpu_warnings = {w.rule for w in plan.warnings if w.rule.startswith(("gpu-", "mig-"))}
    assert gpu_warnings == set(case.get("warnings", [])), plan.warnings
    assert [s.component.value for s in plan.changes if s.component.value not in GPU_COMPONENTS] == []
    assert _gpu_changes(plan) == case["changes"], [s.reason for s in plan.changes]


@pytest.mark.parametrize(
    "path",
    [p for p in CASES if read_case(p)["changes"]],
    ids=lambda p: p.stem,
)
def test_with_the_boot_unit_the_spec_implies_on_disk_the_import_is_the_same_plans_nothing_and_verifies(
    path: Path,
) -> None:
    # A machine provision set up: the unit it writes for this spec is on disk and enabled.
    case = read_case(path)
    first = import_one(_facts(case), CATALOG)
    text = unit_text(context(Spec.model_validate(first.data), _facts(case), CATALOG))
    assert text
    facts = _facts(case, unit=text, services={BOOT_UNIT: "active/enabled"})
    again = import_one(facts, CATALOG)
    assert again.data.get("gpu") == first.data.get("gpu")
    assert not again.plan.changes and not again.plan.blockers, [s.reason for s in again.plan.changes]
    inputs = VerifyInputs(facts=facts, gpu_run=Unknown(unknown="not run"))
    checks = evaluate(Spec.model_validate(again.data), inputs, CATALOG, shipped_limits(), CHECKS)
    assert checks and {c.status for c in checks} == {"pass"}, [(c.id, c.status, c.detail) for c in checks]


LOCKED = {
    "locked_gpu_clocks": {"min_mhz": 1200, "max_mhz": 1980},
    "locked_memory_clocks": {"min_mhz": 3201, "max_mhz": 3201},
}


@pytest.mark.parametrize(
    ("name", "applied"),
    [
        ("gpu-power-limit-650-on-the-h200", {"settings": [{"gpus": "all", "power_limit_w": 650, **LOCKED}]}),
        (
            "gpu-compute-mode-exclusive-process",
            {"settings": [{"gpus": "all", "compute_mode": "Exclusive_Process", **LOCKED}]},
        ),
        (
            "gpu-power-limit-500-on-one-of-two",
            {"settings": [{"gpus": "all", **LOCKED}, {"gpus": [0], "power_limit_w": 500}]},
        ),
        (  # the groups in another order than the import's own: GPU 1 first in the unit
            "gpu-mixed-settings-on-two",
            {
                "settings": [
                    {"gpus": [1], "power_limit_w": 500},
                    {"gpus": "all", "compute_mode": "Exclusive_Process"},
                ]
            },
        ),
        (
            "mig-different-layouts-on-two",
            {"mig": [{"gpus": [1], "layout": {"7g.141gb": 1}}, {"gpus": [0], "layout": {"1g.18gb": 7}}]},
        ),
    ],
)
def test_a_gpu_section_provision_applied_imports_back_from_its_boot_unit_and_plans_nothing(
    name: str, applied: dict[str, Any]
) -> None:
    # Locked clocks, which nvidia-smi does not show, are read from provision's unit on disk; the
    # groups come in the unit's order (the plan compares the unit's whole text).
    case = read_case(FIXTURES / "imports" / f"{name}.yaml")
    first = import_one(_facts(case), CATALOG)
    data = updated(first.data, {f"gpu.{k}": v for k, v in applied.items()})  # the spec provision applied
    text = unit_text(context(Spec.model_validate(data), _facts(case), CATALOG))
    facts = _facts(case, unit=text, services={BOOT_UNIT: "active/enabled"})
    again = import_one(facts, CATALOG)
    assert {k: again.data["gpu"][k] for k in applied} == applied
    if "-lgc 1200,1980" in text:
        assert "read from /etc/systemd/system/provision-gpu-settings.service" in _gpu_notes(again.notes)
    assert not again.plan.changes and not again.plan.blockers, [s.reason for s in again.plan.changes]


def test_a_boot_unit_someone_else_wrote_is_not_read_for_locked_clocks() -> None:
    case = read_case(FIXTURES / "imports" / "gpu-compute-mode-exclusive-process.yaml")
    unit = "[Service]\nExecStart=nvidia-smi -i GPU-00000000-1111-2222-3333-444444444444 -lgc 1200,1980\n"
    settled = import_one(_facts(case, unit=unit), CATALOG)
    assert settled.data["gpu"]["settings"] == [{"gpus": "all", "compute_mode": "Exclusive_Process"}]


@pytest.mark.parametrize("capture", ["h200-ubuntu2404-2026-12-01", "h200x2-ubuntu2404-2026-12-01"])
def test_the_real_captures_at_their_defaults_get_no_gpu_section_and_say_why(capture: str) -> None:
    facts = edited_facts({"capture": capture})
    settled = import_one(facts, CATALOG)
    assert "gpu" not in settled.data
    assert settled.notes["gpu"] == [
        "gpu: every GPU setting nvidia-smi -q shows is the card's default (not managed)"
    ]
    every = "GPU 0" if capture.startswith("h200-") else "every GPU"
    assert settled.notes["gpu.persistence"] == [
        "gpu.persistence left out: nvidia-persistenced.service was not read: not probed; nvidia-smi -q "
        f"shows Persistence Mode Enabled on {every} (by the daemon or by nvidia-smi -pm 1)"
    ]
    assert not settled.plan.changes


def test_a_capture_without_nvidia_smi_q_gets_no_gpu_section() -> None:
    facts = edited_facts({"drop": ["nvidia-smi-q"]})
    settled = import_one(facts, CATALOG)
    assert "gpu" not in settled.data
    assert settled.notes["gpu"][0].startswith("gpu: not imported: the GPUs' settings were not read: ")


def test_the_command_writes_the_values_with_their_comments_and_exits_2_naming_the_boot_unit(
    tmp_path: Path,
) -> None:
    # The real H200 capture as a raw directory, nvidia-smi -q edited to 650 W and Exclusive_Process.
    outputs = read_raw(FIXTURES / "raw" / CAPTURE)
    smi = outputs["nvidia-smi-q"]
    text = smi.output
    for old, new in (
        (
            "Current Power Limit                            : 700.00 W",
            "Current Power Limit                            : 650.00 W",
        ),
        (
            "Requested Power Limit                          : 700.00 W",
            "Requested Power Limit                          : 650.00 W",
        ),
        (
            "Compute Mode                                       : Default",
            "Compute Mode                                       : Exclusive_Process",
        ),
    ):
        assert old in text
        text = text.replace(old, new)
    outputs["nvidia-smi-q"] = ProbeOutput(command=smi.command, output=text, rc=smi.rc)
    raw, out = tmp_path / "gpu01", tmp_path / "gpu01.yaml"
    write_raw(raw, outputs)
    result = invoke("import", "--from-raw", str(raw), "--out", str(out))
    assert result.exit_code == 2, result.output
    written = out.read_text()
    assert "power_limit_w: 650" in written and "compute_mode: Exclusive_Process" in written
    assert "# power_limit_w: GPU 0: Requested Power Limit 650 W, Current 650 W, Default 700 W" in written
    header = " ".join(line.lstrip("# ") for line in written.splitlines() if line.startswith("#"))
    assert (
        "still shows: gpu_settings: write and enable /etc/systemd/system/provision-gpu-settings.service"
        in (header)
    )
    planned = invoke("plan", str(out), "--from-raw", str(raw))
    assert planned.exit_code == 0 and "gpu-power-limit-drift" not in planned.output, planned.output


def test_mig_mode_on_a_card_the_mig_catalog_does_not_list_is_left_out_with_the_reason() -> None:
    # The A100X is not in the MIG catalog (docs/gpu-settings.md: no public source for its
    # profiles): the real H200 capture's state edited to MIG on with no device id read, under a
    # spec naming the A100X.
    case = read_case(FIXTURES / "imports" / "mig-seven-1g-18gb.yaml")
    facts = _facts(case)
    assert not isinstance(facts.gpu_state, Unknown)
    state = facts.gpu_state[0].model_copy(update={"device_id": None})
    facts = facts.model_copy(update={"gpu_state": (state,)})
    draft = Draft()
    draft.put("gpus.model", "a100x")
    gpu_section(draft, facts)
    assert "mig" not in draft.data.get("gpu", {})
    assert draft.notes["gpu.mig"] == [
        "gpu.mig left out for GPU 0: MIG mode on, but the catalog has no MIG profiles of this card"
    ]
