"""The roles' own expressions, templated by Ansible's Templar on apt's real simulation format:
a transitional package that brings another driver branch is caught before anything installs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:  # ansible-core 2.19 templates only strings marked trusted; older releases template any string
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - ansible-core < 2.19

    def trust_as_template(value: str) -> str:  # type: ignore[misc]
        return value


from provision.components.driver import BRANCH_CARRIERS
from provision.os import name_regex

TASKS = Path(__file__).parents[2] / "playbooks" / "roles" / "nvidia_packages" / "tasks" / "Debian.yml"


def _task(name_start: str) -> dict[str, Any]:
    block = yaml.safe_load(TASKS.read_text())[0]["block"]
    return next(t for t in block if t["name"].startswith(name_start))


def _other_branch(lines: list[str], branch: str) -> Any:
    task = _task("Refuse a transaction that would install a driver package of another branch")
    variables = {
        "nvidia_packages_simulation": {"stdout_lines": lines},
        "nvidia_packages_driver_regex": name_regex(BRANCH_CARRIERS),
        "nvidia_packages_driver_branch": branch,
    }
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template(task["vars"]["nvidia_packages_other_branch"]))


# apt-get -s lines: "Inst NAME [OLD] (NEW ORIGIN [ARCH])" (apt-get(8) --simulate).
SAME = [
    "Inst libnvidia-compute (580.95.05-1 local [amd64])",
    "Inst nvidia-open [575.57.08-1] (580.95.05-1 local [amd64])",
    "Inst nvidia-driver-pinning-580 (580.95.05-1 local [all])",
    "Conf nvidia-open (580.95.05-1 local [amd64])",
]
# Ubuntu's transitional nvidia-driver-575 keeps its own version and depends on the 580 packages.
TRANSITIONAL = [
    "Inst nvidia-driver-575 (575.64.05-0ubuntu1 noble-updates [amd64])",
    "Inst libnvidia-compute-580 (580.95.05-0ubuntu1 noble-updates [amd64])",
]


@pytest.mark.parametrize(
    ("lines", "branch", "flagged"),
    [
        (SAME, "580", []),
        (TRANSITIONAL, "575", ["libnvidia-compute-580 580.95.05-0ubuntu1"]),
        (TRANSITIONAL, "580", ["nvidia-driver-575 575.64.05-0ubuntu1"]),
        (["Inst nvidia-open (590.48.01-1 local [amd64])"], "580", ["nvidia-open 590.48.01-1"]),
    ],
    ids=["same-branch", "transitional-575-to-580", "asked-580", "meta-of-590"],
)
def test_packages_of_another_branch_are_named(lines: list[str], branch: str, flagged: list[str]) -> None:
    assert _other_branch(lines, branch) == flagged


def _stop_message(simulation: dict[str, Any], update: dict[str, Any] | None = None) -> str:
    task = _task("Stop when apt cannot resolve the transaction")
    variables: dict[str, Any] = {"nvidia_packages_simulation": simulation}
    variables["nvidia_packages_update"] = update if update is not None else {"skipped": True}
    for name, expression in task["vars"].items():
        variables[name] = trust_as_template(expression)
    templar = Templar(loader=DataLoader(), variables=variables)
    return " ".join(str(templar.template(trust_as_template(task["ansible.builtin.fail"]["msg"]))).split())


def test_held_broken_packages_are_named_in_the_stop_message() -> None:
    # apt-get's resolver output when a held package blocks the request (apt-get(8)).
    simulation = {
        "msg": "E: Unable to correct problems, you have held broken packages.",
        "stdout_lines": [
            "Some packages could not be installed. This may mean that you have",
            "The following packages have unmet dependencies:",
            " libcudnn9-dev-cuda-13 : Depends: libcudnn9-headers-cuda-13 (= 9.20.0.48-1) "
            "but 9.14.0.64-1 is to be installed",
        ],
    }
    assert _stop_message(simulation) == (
        "apt cannot resolve the transaction: E: Unable to correct problems, you have held broken packages. "
        "libcudnn9-dev-cuda-13 : Depends: libcudnn9-headers-cuda-13 (= 9.20.0.48-1) but 9.14.0.64-1 is to "
        "be installed"
    )


def test_an_empty_cache_refresh_error_gets_apt_gets_own_lines() -> None:
    simulation = {"msg": "Failed to update apt cache after 5 retries: "}
    update = {
        "stdout_lines": ["Hit:1 http://deb.debian.org/debian bookworm InRelease"],
        "stderr_lines": [
            "E: Failed to fetch http://127.0.0.2:8080/repo/InRelease  Could not connect to 127.0.0.2:8080",
            "E: Some index files failed to download. They have been ignored, or old ones used instead.",
        ],
    }
    message = _stop_message(simulation, update)
    assert message.startswith(
        "apt cannot resolve the transaction: Failed to update apt cache after 5 retries: E: "
    )
    assert "Could not connect to 127.0.0.2:8080" in message


def _dkms_lines(stdout: str) -> Any:
    tasks = yaml.safe_load(TASKS.read_text())
    check = next(t for t in tasks if t.get("name", "").startswith("Check that DKMS installed the module"))
    variables = {"nvidia_packages_dkms_status": {"stdout_lines": stdout.splitlines()}}
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template(check["vars"]["nvidia_packages_dkms_lines"]))


def test_dkms_check_reads_nvidia_under_each_packaging_name_and_ignores_other_modules() -> None:
    # Debian's module is nvidia-current (real: tests/fixtures/facts/dkms-status/debian-nvidia-current.txt)
    debian = (
        "nvidia-current/535.309.01, 6.1.0-57-amd64, x86_64: installed\n"
        "zfs/2.2.2, 6.1.0-57-amd64, x86_64: added"
    )
    assert _dkms_lines(debian) == ["nvidia-current/535.309.01, 6.1.0-57-amd64, x86_64: installed"]
    nvidia = (
        "nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed\n"
        "nvidia-fs/2.20.5, 6.8.0-60-generic, x86_64: added"
    )
    assert _dkms_lines(nvidia) == ["nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed"]
    assert _dkms_lines("") == []


def _conditions(node: Any) -> list[Any]:
    """Every assert ``that`` item and ``when``/``failed_when``/``changed_when`` in a task tree."""
    found: list[Any] = []
    if isinstance(node, list):
        for item in node:
            found += _conditions(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("when", "failed_when", "changed_when", "that"):
                found += value if isinstance(value, list) else [value]
            found += _conditions(value)
    return found


def test_every_conditional_in_the_roles_is_a_string_or_a_bool() -> None:
    # ansible-core 2.19 refuses any other ("Conditional expressions must be strings"), at run time only:
    # an unquoted ": " in an assert item makes YAML read it as a mapping.
    roles = TASKS.parents[2]
    for path in sorted(roles.glob("*/tasks/*.yml")):
        for condition in _conditions(yaml.safe_load(path.read_text())):
            assert isinstance(condition, (str, bool)), (path, condition)


PYTHON_VARS = Path(__file__).parents[2] / "playbooks" / "roles" / "python_env" / "vars" / "main.yml"


@pytest.mark.parametrize(
    ("uv", "constraints", "expected"),
    [
        (
            {"rc": 1, "stdout": ""},
            ["torch==2.11.0+cu130"],
            [
                "/opt/v/bin/python",
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "-c",
                "/opt/v/provision-constraints.txt",
            ],
        ),
        (
            {"rc": 0, "stdout": "/usr/bin/uv"},
            ["torch==2.11.0+cu130"],
            [
                "/usr/bin/uv",
                "pip",
                "install",
                "--python",
                "/opt/v/bin/python",
                "-c",
                "/opt/v/provision-constraints.txt",
            ],
        ),
        (
            {"rc": 1, "stdout": ""},
            [],
            ["/opt/v/bin/python", "-m", "pip", "install", "--disable-pip-version-check"],
        ),
    ],
    ids=["pip", "uv", "no-torch-to-hold"],
)
def test_every_pip_call_of_the_python_role_holds_the_constraints(
    uv: dict[str, Any], constraints: list[str], expected: list[str]
) -> None:
    variables: dict[str, Any] = {
        name: trust_as_template(value) for name, value in yaml.safe_load(PYTHON_VARS.read_text()).items()
    }
    variables |= {
        "python_env_venv": "/opt/v",
        "python_env_uv": uv,
        "python_env_reinstall": False,
        "python_env_constraints": constraints,
    }
    templar = Templar(loader=DataLoader(), variables=variables)
    assert templar.template(trust_as_template("{{ python_env_constrained }}")) == expected
    tasks = (PYTHON_VARS.parents[1] / "tasks" / "main.yml").read_text()
    commands = [t["ansible.builtin.command"] for t in yaml.safe_load(tasks) if "ansible.builtin.command" in t]
    argvs = [str(c["argv"]) for c in commands]
    assert sum("python_env_constrained" in a for a in argvs) == 2  # torch and the extras
    assert not [a for a in argvs if "python_env_installer" in a]  # no install without the constraints
