"""Host -> spec mapping and fleet plan bookkeeping, without targets: Ansible reads the inventories."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.detect.runner import unknown_facts
from provision.fleet import FleetError, load_fleet
from provision.fleet.commands import fleet_mode
from provision.fleet.orchestrate import NO_RESULT, FleetPlan, HostPlan, HostState, unreachable_reason

INI = """\
[a100]
n1
n2 provision_spec=host.yaml

[h200]
n3

[gpu:children]
a100
h200
"""

YAML_INVENTORY = """\
all:
  children:
    a100:
      hosts:
        n1: {}
      vars:
        provision_spec: specs/a100.yaml
    h200:
      hosts:
        n3: {provision_spec: specs/h200.yaml}
"""


@pytest.fixture()
def ini(tmp_path: Path) -> Path:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "a100.yml").write_text("provision_spec: specs/a100.yaml\n")
    (tmp_path / "hosts.ini").write_text(INI)
    return tmp_path / "hosts.ini"


def test_group_vars_and_host_vars_map_specs_relative_to_the_inventory(ini: Path) -> None:
    fleet = load_fleet(ini, limit="a100")
    assert fleet.specs == {"n1": ini.parent / "specs/a100.yaml", "n2": ini.parent / "host.yaml"}


def test_yaml_inventory(tmp_path: Path) -> None:
    (tmp_path / "inv.yml").write_text(YAML_INVENTORY)
    fleet = load_fleet(tmp_path / "inv.yml")
    assert fleet.specs == {"n1": tmp_path / "specs/a100.yaml", "n3": tmp_path / "specs/h200.yaml"}


def test_limit_patterns_as_in_ansible(ini: Path) -> None:
    assert load_fleet(ini, limit="gpu:!n2", spec=Path("s.yaml")).hosts == ["n1", "n3"]
    assert load_fleet(ini, limit="n1,n3", spec=Path("s.yaml")).hosts == ["n1", "n3"]


def test_fleet_file_host_beats_group_beats_inventory_variable(ini: Path, tmp_path: Path) -> None:
    fleet_file = tmp_path / "conf" / "fleet.yaml"
    fleet_file.parent.mkdir()
    fleet_file.write_text("inventory: ../hosts.ini\nspecs:\n  gpu: g.yaml\n  n3: only-n3.yaml\n")
    fleet = load_fleet(None, fleet_file)
    base = fleet_file.parent
    assert fleet.specs == {"n1": base / "g.yaml", "n2": base / "g.yaml", "n3": base / "only-n3.yaml"}


def test_a_spec_argument_applies_to_every_host(ini: Path) -> None:
    assert set(load_fleet(ini, spec=Path("one.yaml")).specs.values()) == {Path("one.yaml")}


def test_hosts_without_a_spec_are_named(ini: Path) -> None:
    with pytest.raises(FleetError, match=r"no spec for n3: set provision_spec"):
        load_fleet(ini)


def test_groups_mapping_to_two_specs_are_ambiguous(ini: Path, tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text("inventory: hosts.ini\nspecs: {a100: a.yaml, gpu: g.yaml}\n")
    with pytest.raises(FleetError, match="n1: its groups map to different specs"):
        load_fleet(None, tmp_path / "f.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("specs: [a]\n", "f.yaml:1:1: specs: Input should be a valid dictionary"),
        ("nope: 1\n", r"f.yaml:1:1: nope: unknown key \(a fleet file has inventory:, rollout:, specs:\)$"),
        (
            "inventory: hosts.ini\nspec:\n  n1: a.yaml\n",
            "f.yaml:2:1: spec: unknown key .*; did you mean 'specs'\\?",
        ),
        ("- a\n", "f.yaml:1:1: a fleet file is a mapping"),
    ],
)
def test_bad_fleet_files_are_one_located_line(ini: Path, text: str, message: str) -> None:
    (ini.parent / "f.yaml").write_text(text)
    with pytest.raises(FleetError, match=message):
        load_fleet(ini, ini.parent / "f.yaml")


def test_a_specs_key_naming_no_host_or_group_is_refused(ini: Path) -> None:
    # A typo left n3 on no spec, or the group's hosts on their inventory variable, without a word.
    fleet_file = ini.parent / "f.yaml"
    fleet_file.write_text("inventory: hosts.ini\nspecs:\n  gpu: g.yaml\n  h20: h.yaml\n")
    names = r"\(its hosts: n1, n2, n3; groups: a100, h200, gpu\)"
    with pytest.raises(
        FleetError,
        match=rf"f.yaml:4:3: specs.h20: no host or group 'h20' in .*hosts.ini {names}; did you mean 'h200'",
    ):
        load_fleet(None, fleet_file, limit="n1")  # a key outside the limit is checked too


def test_no_host_matches_and_missing_inventory(ini: Path, tmp_path: Path) -> None:
    with pytest.raises(
        FleetError, match=r"--limit nothing: no host or group 'nothing' in .* \(its hosts: n1, n2, n3\)$"
    ):
        load_fleet(ini, limit="nothing")
    with pytest.raises(FleetError, match=r"no host or group 'n33' .*; did you mean 'n3'\?$"):
        load_fleet(ini, limit="n1,n33")  # Ansible would warn and run n1 alone
    with pytest.raises(FleetError, match="no host matches 'n1:&h200'"):
        load_fleet(ini, limit="n1:&h200")  # each part matches, together nothing
    with pytest.raises(FleetError, match="no such inventory"):
        load_fleet(tmp_path / "missing.ini")
    with pytest.raises(FleetError, match="no inventory"):
        load_fleet(None, None)


def test_fleet_mode_keeps_spec_with_inventory_single_spec() -> None:
    assert not fleet_mode(Path("s.yaml"), Path("inv"), None)
    assert fleet_mode(None, Path("inv"), None)
    assert fleet_mode(Path("s.yaml"), None, Path("fleet.yaml"))


def test_unreachable_hosts_are_recognised_from_their_facts() -> None:
    assert unreachable_reason(unknown_facts("n1", "host unreachable: refused")) == "host unreachable: refused"
    assert unreachable_reason(None) == NO_RESULT


def test_exit_codes_follow_plan() -> None:
    down = HostPlan("n1", Path("s.yaml"), None, "host unreachable: refused")
    assert down.state is HostState.UNREACHABLE
    assert FleetPlan({"n1": down}).exit_code() == 1
    assert FleetPlan({}).exit_code(detailed=True) == 0
