"""Files users keep from earlier versions still load and mean the same: saved facts and verify inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from provision.detect.facts import Facts, Unknown
from provision.detect.runner import facts_from_raw
from provision.verify.runs import VerifyInputs

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.mark.parametrize("capture", ["h200-ubuntu2404-spec", "h200x2-ubuntu2404-spec"])
def test_facts_saved_by_0_1_load_with_every_value_they_had(capture: str) -> None:
    """Fields added since (GPU health, initramfs, ...) take their "not probed" defaults; every value
    the old file carries is the one detection reads from the same capture today."""
    text = (FIXTURES / "saved" / f"facts-{capture}-v0.1.json").read_text()
    saved = Facts.model_validate_json(text)
    fresh = facts_from_raw(FIXTURES / "raw" / capture).model_dump(mode="json")
    old = _renamed(json.loads(text))
    assert _subset(old, fresh), "a value saved by 0.1 reads differently today"
    assert _subset(old, saved.model_dump(mode="json")), "loading a 0.1 file changed one of its values"


_LOCK_FIELDS = {
    "preferences": "pins",
    "legacy_preferences": "legacy_pins",
    "unattended_guard": "upgrade_guard",
    "unattended_upgrades_installed": "upgrade_service_installed",
    "dpkg_journal": "unfinished_transactions",
}
"""The OS seam renamed the apt-named lock fields (``apt_locks`` is ``package_locks``)."""


def _renamed(old: dict[str, Any]) -> dict[str, Any]:
    """A 0.1 file in today's field names, its values as they were: dpkg's ``status`` words are the
    package's ``state``, the lock fields carry their OS-neutral names."""
    out = {k: v for k, v in old.items() if k not in ("apt_locks", "packages")}
    if isinstance(old.get("apt_locks"), dict):
        out["package_locks"] = {_LOCK_FIELDS.get(k, k): v for k, v in old["apt_locks"].items()}
    if isinstance(old.get("packages"), list):
        out["packages"] = [
            {("state" if k == "status" else k): v for k, v in p.items()} for p in old["packages"]
        ]
    return out


def _subset(old: Any, new: Any) -> bool:
    """Every key of ``old`` is in ``new`` with an equal value (recursively); lists item by item."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _subset(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(map(_subset, old, new))
    return bool(old == new)


@pytest.mark.parametrize("run", ["h200-ubuntu2404", "h200x2-ubuntu2404"])
def test_verify_inputs_saved_by_0_1_load_and_read_the_same_fabric(run: str) -> None:
    inputs = VerifyInputs.model_validate_json((FIXTURES / "verify" / run / "inputs.json").read_text())
    states = inputs.fabric_states()
    assert not isinstance(states, Unknown) and states
    if not isinstance(inputs.fabric, Unknown):
        assert states == inputs.fabric


def _detect_documents(facts: dict[str, Any]) -> dict[str, Any]:
    """The same one host's facts in every shape ``detect --json`` has written."""
    return {
        "format 2 (every form)": {"format_version": 2, "hosts": [facts], "unreachable": {}},
        "format 1, -i/--fleet": {"format_version": 1, "hosts": [facts], "unreachable": {}},
        "format 1, one host": facts,
        "0.1, a bare list": [facts],
    }


@pytest.mark.parametrize("shape", list(_detect_documents({})))
def test_every_detect_json_shape_reads_back_as_the_same_facts(shape: str, tmp_path: Path) -> None:
    from provision.app import read_facts
    from provision.checklist.sources import read_facts_documents

    fresh = facts_from_raw(FIXTURES / "raw" / "h200-ubuntu2404-spec", host="gpu01")
    saved = tmp_path / "facts.json"
    saved.write_text(json.dumps(_detect_documents(fresh.model_dump(mode="json"))[shape]))
    assert read_facts(saved) == fresh  # plan --facts, import --facts
    assert read_facts_documents(saved) == [fresh]  # checklist --facts


def test_facts_of_several_hosts_are_refused_by_a_one_host_reader_with_their_names(tmp_path: Path) -> None:
    from provision.app import read_facts
    from provision.errors import FactsError

    fresh = facts_from_raw(FIXTURES / "raw" / "h200-ubuntu2404-spec").model_dump(mode="json")
    saved = tmp_path / "facts.json"
    two = [fresh | {"host": "a"}, fresh | {"host": "b"}]
    saved.write_text(json.dumps({"format_version": 2, "hosts": two, "unreachable": {}}))
    with pytest.raises(FactsError, match=r"facts of 2 hosts \(a, b\); --facts reads one host's"):
        read_facts(saved)
    saved.write_text(json.dumps({"format_version": 2, "hosts": [], "unreachable": {"a": "down"}}))
    with pytest.raises(FactsError, match=r"facts of 0 hosts \(none\)"):
        read_facts(saved)
