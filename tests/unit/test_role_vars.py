"""Each role gets one dict of variables from the plan, checked against its argument specs before
Ansible runs: every plan the planner builds fits; anything else is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.apply import runner
from provision.apply.rolevars import argument_specs, plan_problems, problems
from provision.components.registry import roles
from provision.errors import ApplyError
from provision.plan.planner import make_plan
from tests.unit.factories import CATALOG, fresh_ubuntu, spec

SPECS = [
    {},
    {"gpus__model": "h100-sxm", "gpus__count": 8},
    {"monitoring": {"dcgm": "4.5.3", "prometheus": True}},
    {"driver__hold": False, "python": None},
]


@pytest.mark.parametrize("changes", SPECS)
def test_every_planned_role_dict_fits_its_argument_specs(changes: dict[str, object]) -> None:
    plan = make_plan(spec(**changes), fresh_ubuntu(), CATALOG)
    assert plan.extravars["roles"] and plan_problems(plan.extravars["roles"]) == []
    assert list(plan.extravars["roles"]) == [r for r in roles() if r in plan.extravars["roles"]]


def test_a_role_runs_only_with_work_and_its_variables_carry_its_prefix() -> None:
    plan = make_plan(spec(driver__hold=False, python=None), fresh_ubuntu(), CATALOG)
    assert plan.role_vars("nvidia_holds") is None and plan.role_vars("python_env") is None
    for role, variables in plan.extravars["roles"].items():
        assert all(name.startswith(f"{role}_") for name in variables), role


@pytest.mark.parametrize(
    ("variables", "problem"),
    [
        (
            {"vllm_serve_venv": "/opt/v", "vllm_serve_requirement": "vllm==1", "vllm_serve_x": 1},
            "vllm_serve_x is not an option",
        ),
        ({"vllm_serve_venv": "/opt/v"}, "vllm_serve_requirement is required and missing"),
        ({"vllm_serve_venv": "/opt/v", "vllm_serve_requirement": ["vllm"]}, "vllm_serve_requirement is list"),
        (
            {"vllm_serve_venv": "/v", "vllm_serve_requirement": "v", "vllm_serve_constraints": [1]},
            "vllm_serve_constraints holds a int, its argument spec says str elements",
        ),
    ],
)
def test_variables_a_role_does_not_declare_or_of_the_wrong_type_are_named(
    variables: dict[str, object], problem: str
) -> None:
    assert any(problem in p for p in problems("vllm_serve", variables)), problems("vllm_serve", variables)


def test_optional_none_is_accepted_as_ansible_does() -> None:
    options = argument_specs("vllm_serve")
    assert not options["vllm_serve_index_url"].get("required")
    assert (
        problems(
            "vllm_serve",
            {"vllm_serve_venv": "/v", "vllm_serve_requirement": "v", "vllm_serve_index_url": None},
        )
        == []
    )


def test_a_plan_saved_with_flat_variables_is_refused_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    older = plan.model_copy(
        update={"extravars": {"provision_apt_packages": ["cuda-drivers"], "provision_dkms": False}}
    )
    with pytest.raises(
        ApplyError,
        match=r"^the plan for box does not fit the playbooks: its playbook variables are not one dict",
    ):
        runner.run_playbook({"box": older}, tmp_path / "inventory.ini", tmp_path)
    unknown = plan.model_copy(update={"extravars": {"roles": {"nvidia_gpu_burn": {}}, "keys": {}}})
    with pytest.raises(ApplyError, match="no such role: nvidia_gpu_burn"):
        runner.run_playbook({"box": unknown}, tmp_path / "inventory.ini", tmp_path)
    assert list(tmp_path.iterdir()) == []
