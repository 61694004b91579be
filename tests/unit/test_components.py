"""Components are declared once: the registry, their roles, catalog data and verify checks agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from provision.catalog import package_name_patterns
from provision.components.base import Component
from provision.components.registry import COMPONENTS, roles
from provision.invariants.registry import INVARIANTS
from provision.plan.planner import make_plan
from tests.unit.factories import CATALOG, ROOT, fresh_ubuntu, pkg, spec

PLAYBOOKS = ROOT / "playbooks"
VERIFY_SOURCES = "".join(p.read_text() for p in (ROOT / "provision" / "verify").glob("*.py"))


def _site_roles() -> list[dict[str, object]]:
    play = YAML(typ="safe", pure=True).load((PLAYBOOKS / "site.yml").read_text())[0]
    return list(play["roles"])


def test_registry_lists_each_component_once_in_plan_order() -> None:
    names = [c.name for c in COMPONENTS]
    order = list(Component)
    assert len(set(names)) == len(names)
    assert names == sorted(names, key=order.index)


def test_site_yml_runs_the_registry_roles_in_order_with_their_tags() -> None:
    site = _site_roles()
    assert [r["role"] for r in site] == list(roles())
    for entry in site:
        tags = {t for c in COMPONENTS if c.role == entry["role"] for t in c.tags}
        assert set(entry["tags"]) <= tags, entry["role"]  # type: ignore[call-overload]


def test_site_yml_renames_no_variable_and_runs_a_role_only_where_the_plan_has_work_for_it() -> None:
    # Every role reads its own variables from the host's file (one dict per role, planned); an
    # entry carries only its name, its tags and the one condition.
    for entry in _site_roles():
        assert set(entry) == {"role", "when", "tags"}, entry
        assert entry["when"] == f"'{entry['role']}' in provision_roles"


def test_components_name_observers_whose_key_is_their_spec_section() -> None:
    from provision.verify.observe import observers, resolve
    from provision.verify.workflow import CHECKS, MACHINE_CHECKS

    named = [c for c in COMPONENTS if c.observer is not None]
    assert {c.name for c in named} >= {Component.SERVE, Component.MONITORING}
    for component in named:
        assert component.observer is not None
        assert resolve(component.observer).key == component.spec_section
    # The report's checks: the machine's, then each observer's, derived from the registry.
    assert (*MACHINE_CHECKS, *(c for o in observers() for c in o.checks)) == CHECKS


FAMILIES = ("Debian", "RedHat")
"""The OS families provision supports (provision.os.select.FAMILIES)."""
PACKAGE_MODULES = re.compile(
    r"ansible\.builtin\.(apt|dnf|yum|dpkg_selections|package)\b|argv: \[(apt-get|dpkg|dnf|rpm)"
)


@pytest.mark.parametrize("role", roles())
def test_each_role_keeps_package_manager_tasks_in_its_family_files(role: str) -> None:
    """A role that installs packages dispatches on the OS family and has a task file for every
    family; its main.yml holds no package-manager task. A role without one has no family file."""
    from provision.os.select import managers

    assert set(managers()) == set(FAMILIES)
    tasks = PLAYBOOKS / "roles" / role / "tasks"
    main = (tasks / "main.yml").read_text()
    assert not PACKAGE_MODULES.search(main), f"{role}/tasks/main.yml runs the package manager"
    if "{{ ansible_os_family }}.yml" in main:
        for family in FAMILIES:
            assert (tasks / f"{family}.yml").is_file(), f"{role} has no tasks/{family}.yml"
    else:
        assert not any((tasks / f"{family}.yml").exists() for family in FAMILIES), role


def test_transaction_components_have_catalog_data_and_data_names_components() -> None:
    names = {c.name.value for c in COMPONENTS}
    assert set(CATALOG.components) <= names
    assert {c.name.value for c in COMPONENTS if c.transaction} <= set(CATALOG.components)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"gpus__model": "h100-sxm", "gpus__count": 8},
        {"driver__flavor": "proprietary", "gpus__model": "h100-sxm"},
    ],
)
def test_detection_keeps_every_package_a_plan_installs(changes: dict[str, object]) -> None:
    # A package the filter dropped would look absent on the next plan and be installed forever.
    kernel = fresh_ubuntu().kernel.model_copy(update={"compiler": "gcc-13 (Ubuntu) 13.2.0"})
    images = (pkg("linux-image-6.8.0-60-generic", "6.8.0-60.63"), pkg("linux-image-generic", "6.8.0-60.63"))
    facts = fresh_ubuntu(kernel=kernel, packages=images)
    plan = make_plan(spec(**changes), facts, CATALOG)
    keep = re.compile("|".join(package_name_patterns()))
    requested = {
        p.split("=")[0]
        for s in plan.changes
        if s.component is not Component.PYTHON_WHEELS
        for p in s.packages
    }
    assert {"dkms", "gcc-13", "linux-headers-generic"} <= requested
    assert sorted(n for n in requested if not keep.search(n)) == []


def test_steps_carry_their_components_tags() -> None:
    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    declared = {c.name: set(c.tags) for c in COMPONENTS} | {Component.PYTHON_WHEELS: {"python"}}
    for step in plan.changes:
        assert set(step.tags) <= declared[step.component], step.component


@pytest.mark.parametrize("check_id", sorted({i for c in COMPONENTS for i in c.verify_checks}))
def test_declared_verify_checks_exist(check_id: str) -> None:
    invariant_checks = {i.check_id for i in INVARIANTS}
    assert f'"{check_id}"' in VERIFY_SOURCES or check_id in invariant_checks


def test_roles_exist() -> None:
    assert all((PLAYBOOKS / "roles" / role / "tasks" / "main.yml").is_file() for role in roles())
    assert Path(PLAYBOOKS / "site.yml").is_file()
