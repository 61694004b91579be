"""Saved plans are sealed: every edit of what apply uses is refused with the part named."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from typer.testing import CliRunner

from provision import hosts
from provision.app import check_drift
from provision.cli import cli
from provision.detect.raw import read_raw
from provision.detect.registry import facts_from_outputs
from provision.errors import DriftError
from provision.plan.models import Plan
from provision.plan.seal import (
    KEY_NAME,
    SEALED_PARTS,
    STATE_DIR_VAR,
    PlanEditedError,
    edited_parts,
    key_id,
    seal_key,
    sealed,
)
from tests.unit.factories import one_plan

ROOT = Path(__file__).resolve().parents[2]
H200_SPEC = str(ROOT / "specs" / "h200-ubuntu2404.yaml")
H200_RAW = str(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec")

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        *parents, key = path.split(".")
        node = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[key] = value

    return edit


def _call(fn: Callable[[dict[str, Any]], Any]) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        fn(doc)

    return edit


FINDING = {"rule": "x", "message": "m", "source": "s", "severity": "warning"}


# The edits of the 16 (versions, a pip package, the index URL, the mirror, holds off, the
# spec path, steps, extravars, host, blockers...), each with the part apply must name.
EDITS: list[tuple[str, Edit, str]] = [
    ("driver version", _set("spec.driver.version", "580.95.05"), "spec"),
    ("cuda toolkit", _set("spec.cuda.toolkit", "12.9"), "spec"),
    ("extra pip package", _call(lambda d: d["spec"]["python"]["packages"].append("requests")), "spec"),
    ("index url", _set("spec.python.index_url", "https://evil.example/whl/"), "spec"),
    ("holds off", _set("spec.driver.hold", True), "spec"),
    ("spec path", _set("spec_path", "/tmp/other.yaml"), "spec_path"),
    ("the plan's day", _set("as_of", "2020-01-01"), "as_of"),
    ("host", _set("host", "other-host"), "host"),
    ("facts fingerprint", _set("facts_fingerprint", "0" * 64), "facts_fingerprint"),
    ("a step's action", _set("steps.0.action", "install"), "steps"),
    ("a step dropped", _call(lambda d: d["steps"].pop()), "steps"),
    ("blocker added", _set("blockers", [FINDING | {"severity": "blocker"}]), "blockers"),
    ("warning added", _set("warnings", [FINDING]), "warnings"),
    ("reboot", _set("reboot_required", True), "reboot_required"),
    ("role packages", _set("extravars.roles.python_env.python_env_packages", ["evil"]), "extravars"),
    (
        "wheel index",
        _set("extravars.roles.python_env.python_env_torch_index_url", "http://evil.example/"),
        "extravars",
    ),
    (
        "role added",
        _set("extravars.roles.nvidia_packages", {"nvidia_packages_list": ["cuda-drivers"]}),
        "extravars",
    ),
    (
        "key",
        _set("extravars.keys", {"nvidia_repository": {"nvidia_repository_keyring_src": {}}}),
        "extravars",
    ),
    ("tool version", _set("seal.tool_version", "0.0.1"), "tool version"),
    ("digest", _set("seal.digest", "0" * 64), "seal"),
    ("seal removed", _set("seal", None), "seal (missing)"),
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    result = CliRunner().invoke(cli, ["plan", H200_SPEC, "--from-raw", H200_RAW, "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_plan_out_writes_a_seal_that_matches(saved: dict[str, Any]) -> None:
    plan = Plan.model_validate(saved)
    assert plan.seal is not None and set(plan.seal.parts) == set(SEALED_PARTS)
    assert edited_parts(plan) == []


def test_every_field_apply_reads_is_sealed() -> None:
    assert set(SEALED_PARTS) == set(Plan.model_fields) - {"seal"}


@pytest.mark.parametrize(("what", "edit", "part"), EDITS, ids=[e[0] for e in EDITS])
def test_every_edit_of_a_saved_plan_is_refused_naming_the_part(
    saved: dict[str, Any], tmp_path: Path, what: str, edit: Edit, part: str
) -> None:
    doc = json.loads(json.dumps(saved))
    edit(doc)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(cli, ["apply", str(path), "--dry-run"])
    assert result.exit_code == 1, result.output
    line = " ".join(result.output.split())
    assert "the saved plan was changed after `provision plan --out` wrote it" in line, line
    assert f"(changed: {part}" in line or f", {part}" in line, line
    assert "Traceback" not in result.output


def test_apply_runs_the_saved_plan_only_when_planning_again_gives_the_same(saved: dict[str, Any]) -> None:
    plan = Plan.model_validate(saved)
    check_drift(plan, plan.model_copy(update={"seal": None}))
    other_steps = plan.model_copy(update={"steps": plan.steps[:-1]})
    with pytest.raises(DriftError, match=r"another plan than the saved one \(differs: steps\)"):
        check_drift(plan, other_steps)
    moved = plan.model_copy(update={"facts_fingerprint": "f" * 64})
    with pytest.raises(DriftError, match=f"the machine {plan.host} changed since the plan was made"):
        check_drift(plan, moved)
    elsewhere = moved.model_copy(update={"host": "gpu07"})
    with pytest.raises(
        DriftError, match=f"the plan was made from the facts of {plan.host}, not of gpu07 \\(facts "
    ):
        check_drift(plan, elsewhere)
    twin = plan.model_copy(update={"host": "gpu07"})
    with pytest.raises(DriftError, match=r"not of gpu07 \(same facts\); plan gpu07 itself"):
        check_drift(plan, twin)


def test_sealing_is_stable_through_json(saved: dict[str, Any]) -> None:
    plan = Plan.model_validate_json(json.dumps(saved))
    assert sealed(plan.model_copy(update={"seal": None})).seal == plan.seal


def _today(monkeypatch: pytest.MonkeyPatch, day: date) -> None:
    class Day(date):
        @classmethod
        def today(cls) -> Day:
            return cls(day.year, day.month, day.day)

    monkeypatch.setattr(hosts, "date", Day)


def test_a_saved_plan_is_compared_as_of_its_own_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    # Saved seven months before R580's end of life, applied within six of it: planning on the apply's
    # day would add the near-end-of-life warning and refuse the plan as changed; as of its own day
    # (recorded in the plan) it is the same plan.
    raw = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01"
    out = tmp_path / "plan.json"
    _today(monkeypatch, date(2027, 12, 1))
    made = CliRunner().invoke(cli, ["plan", H200_SPEC, "--from-raw", str(raw), "--out", str(out)])
    assert made.exit_code == 0, made.output
    saved = Plan.model_validate_json(out.read_text())
    assert str(saved.as_of) == "2027-12-01" and not saved.warnings
    _today(monkeypatch, date(2028, 2, 10))
    now = CliRunner().invoke(cli, ["plan", H200_SPEC, "--from-raw", str(raw), "--json"])
    assert "driver-branch-near-end-of-life" in {
        w["rule"] for w in one_plan(json.loads(now.stdout))["warnings"]
    }
    facts = facts_from_outputs(read_raw(raw), host=saved.host)
    mocker.patch("provision.app.gather", return_value={saved.host: facts})
    applied = CliRunner().invoke(cli, ["apply", str(out), "--dry-run", "--json", "--runs-dir", str(tmp_path)])
    assert applied.exit_code == 0, applied.output
    assert json.loads(applied.stdout)["outcome"] == "nothing-to-do"


# The key: only a plan this user sealed is applied.


def _apply(doc: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(cli, ["apply", str(path), "--dry-run"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def test_a_plan_sealed_with_a_digest_anyone_can_recompute_is_refused(
    saved: dict[str, Any], tmp_path: Path
) -> None:
    # What a user other than root could make from a copy of root's facts: every part digest right,
    # the overall digest a plain SHA-256 as older releases wrote it.
    doc = json.loads(json.dumps(saved))
    del doc["seal"]["scheme"], doc["seal"]["key_id"]
    doc["seal"]["digest"] = hashlib.sha256(
        json.dumps(
            {"parts": doc["seal"]["parts"], "tool_version": doc["seal"]["tool_version"]},
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
    ).hexdigest()
    assert "an older release's seal (a plain SHA-256, which anyone could recompute)" in _apply(doc, tmp_path)


def test_a_plan_sealed_with_another_key_is_refused(
    saved: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_VAR, str(tmp_path / "elsewhere"))
    line = _apply(saved, tmp_path)
    assert "no plan seal key here" in line  # this user never sealed a plan
    seal_key(create=True)
    line = _apply(saved, tmp_path)
    assert (
        f"sealed with another key ({saved['seal']['key_id']}" in line
        and "another user or another machine" in line
    )
    doc = json.loads(json.dumps(saved))
    doc["seal"]["key_id"] = key_id(seal_key())  # claiming this key does not make the HMAC this key's
    assert "(changed: seal)" in _apply(doc, tmp_path)


def test_the_key_is_created_once_0600_and_refused_when_others_can_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_VAR, str(tmp_path / "state"))
    key = seal_key(create=True)
    path = tmp_path / "state" / KEY_NAME
    assert len(key) == 32 and (path.stat().st_mode & 0o777) == 0o600
    assert seal_key(create=True) == key  # never replaced
    path.chmod(0o640)
    with pytest.raises(PlanEditedError, match=r"readable by no one else \(found .*mode 0640\)"):
        seal_key()
