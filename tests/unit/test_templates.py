"""Spec values reach Ansible as extravars, which Ansible templates: "{{ }}" must never get there."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from provision.apply import runner
from provision.errors import ApplyError
from provision.plan.planner import make_plan
from tests.unit.factories import CATALOG, fresh_ubuntu, spec

PIPE = "{{ lookup('pipe', 'touch /tmp/pwned') }}"


@pytest.mark.parametrize(
    "overrides",
    [
        {
            "repository": {
                "url": f"https://mirror.example/repo/?x={PIPE}",
                "key_url": "https://mirror.example/k.pub",
                "fingerprint": "EB693B3035CD5710E231E123A4B469963BF863CC",
            }
        },
        {
            "repository": {
                "url": "https://mirror.example/repo/",
                "key_url": f"https://mirror.example/k.pub#{PIPE}",
                "fingerprint": "EB693B3035CD5710E231E123A4B469963BF863CC",
            }
        },
        {"python__index_url": f"https://download.pytorch.org/whl/cu130?{PIPE}"},
        {"python__packages": [f'numpy; platform_release == "{PIPE}"']},
    ],
    ids=["repository.url", "repository.key_url", "python.index_url", "python.packages"],
)
def test_spec_refuses_template_syntax(overrides: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="may not contain '\\{' or '\\}'"):
        spec(**overrides)


def test_runner_refuses_template_syntax_before_anything_runs(tmp_path: Path) -> None:
    plan = make_plan(spec(), fresh_ubuntu(), CATALOG)
    roles = dict(plan.extravars["roles"])
    roles["python_env"] = {**roles["python_env"], "python_env_packages": [PIPE]}
    tampered = plan.model_copy(update={"extravars": {"roles": roles, "keys": {}}})
    with pytest.raises(
        ApplyError, match=r"box\.python_env\.python_env_packages holds Ansible template syntax"
    ):
        runner.run_playbook({"box": tampered}, tmp_path / "inventory.ini", tmp_path)
    assert list(tmp_path.iterdir()) == []
