"""Each role's variables, checked against its ``meta/argument_specs.yml`` before Ansible runs.

A plan hands every role one dict (:func:`provision.plan.planner.extravars`); apply writes one file
per host holding them, which site.yml's pre-task reads with ``ansible.builtin.include_vars``, so
site.yml renames nothing. Ansible validates a role's arguments only when the role starts, halfway
through a run; this check refuses a plan whose variables a role does not declare, lack a required
one or have the wrong type before anything runs (a saved plan of an older release, or a bug).

The rules are Ansible's (Role argument validation,
https://docs.ansible.com/ansible/latest/playbook_guide/playbooks_reuse_roles.html#role-argument-validation):
``required`` options must be given, ``type`` is one of str, path, bool, int, float, list, dict,
raw; ``elements`` types a list's items; an optional option may be None (Ansible skips its check).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from provision.resources import data_dir

_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "path": (str,),
    "bool": (bool,),
    "int": (int,),
    "float": (float, int),
    "list": (list, tuple),
    "dict": (dict,),
}


@cache
def argument_specs(role: str, roles_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """The ``main`` entry point's options of ``role`` (option name -> its spec).

    Raises:
        FileNotFoundError: The role has no ``meta/argument_specs.yml``.
    """
    root = roles_dir or data_dir("playbooks") / "roles"
    text = (root / role / "meta" / "argument_specs.yml").read_text(encoding="utf-8")
    doc = YAML(typ="safe", pure=True).load(text) or {}
    return dict(doc["argument_specs"]["main"]["options"])


def _type_problem(name: str, value: Any, option: Mapping[str, Any]) -> str | None:
    kind = str(option.get("type", "str"))
    if kind == "raw" or value is None:
        return None
    wanted = _TYPES.get(kind, ())
    if isinstance(value, bool) and kind in ("int", "float"):
        return f"{name} is a bool, its argument spec says {kind}"
    if not isinstance(value, wanted):
        return f"{name} is {type(value).__name__}, its argument spec says {kind}"
    elements = option.get("elements")
    if kind == "list" and elements and elements != "raw":
        items: list[Any] = list(value) if isinstance(value, list | tuple) else []
        bad = next((v for v in items if not isinstance(v, _TYPES.get(str(elements), ()))), None)
        if bad is not None:
            return f"{name} holds a {type(bad).__name__}, its argument spec says {elements} elements"
    return None


def problems(role: str, variables: Mapping[str, Any], roles_dir: Path | None = None) -> list[str]:
    """Why ``variables`` do not fit ``role``'s argument specs (empty when they do)."""
    options = argument_specs(role, roles_dir)
    found = [f"{name} is not an option of the role" for name in variables if name not in options]
    found += [
        f"{name} is required and missing"
        for name, option in options.items()
        if option.get("required") and variables.get(name) is None
    ]
    found += [p for n, v in variables.items() if n in options and (p := _type_problem(n, v, options[n]))]
    return found


def plan_problems(roles: Any) -> list[str]:
    """Every problem of one plan's ``extravars["roles"]`` (keyrings already filled in), each
    ``role: problem``; an extravars of another shape (a plan saved by an older release) is one."""
    if not isinstance(roles, dict) or not all(isinstance(v, dict) for v in roles.values()):
        return ["its playbook variables are not one dict per role (saved by an older release?)"]
    try:
        return [f"{role}: {p}" for role, variables in roles.items() for p in problems(role, variables)]
    except FileNotFoundError as exc:
        return [f"no such role: {Path(exc.filename or '').parent.parent.name}"]
