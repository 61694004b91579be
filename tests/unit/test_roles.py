"""The roles' argument specs say the truth: required means no default; every default is declared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROLES = sorted((Path(__file__).parents[2] / "playbooks" / "roles").iterdir())


def load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8")) or {}


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_required_options_have_no_default_and_defaults_match_the_spec(role: Path) -> None:
    options = load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load(role / "defaults" / "main.yml")
    for name, option in options.items():
        assert name.startswith(role.name + "_"), name
        if option.get("required"):
            # Ansible validates after defaults are merged: a default would keep the check from firing.
            assert name not in defaults and "default" not in option, name
        else:
            assert name in defaults and option.get("default") == defaults[name], name
    assert set(defaults) <= set(options), set(defaults) - set(options)


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_every_role_has_galaxy_metadata(role: Path) -> None:
    meta = load(role / "meta" / "main.yml")
    assert meta["galaxy_info"]["role_name"] == role.name
    assert meta["galaxy_info"]["license"] == "Apache-2.0" and meta["dependencies"] == []
