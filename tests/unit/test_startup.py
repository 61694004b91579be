"""What each command loads: start-up is most of a command's time (benchmarks/bench_startup.py), so
a command imports only what it uses. The figures are benchmarks; these tests hold the boundaries
that make them: ``--help`` loads no model, ``validate`` no detector and no planner, the offline
plan no Ansible, and no command the HTTP client or rich's Markdown and syntax highlighting.

Each command runs in a fresh interpreter (``python3 -m provision``), which reports ``sys.modules``
at exit.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import provision

ROOT = Path(__file__).resolve().parents[2]
SPEC = "specs/h200-ubuntu2404.yaml"
RAW = "tests/fixtures/raw/h200-ubuntu2404-spec"

_REPORT = (
    "import atexit, json, runpy, sys\n"
    "atexit.register(lambda: sys.__stderr__.write('MODULES ' + json.dumps(sorted(sys.modules)) + '\\n'))\n"
    "sys.argv = ['provision', *sys.argv[1:]]\n"
    "runpy.run_module('provision', run_name='__main__')\n"
)

_NEVER = {"ansible_runner", "markdown_it", "pygments", "http.client", "urllib.request"}


def _modules(program: str, *args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", program, *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


FLOOR = _modules(
    _REPORT.replace(
        "runpy.run_module('provision', run_name='__main__')", "import pydantic, typer, rich.console"
    )
)
"""What the libraries every command needs load by themselves (typer before 0.17 loads rich's
Markdown on import): the floor of benchmarks/bench_startup.py."""

NEVER = _NEVER - FLOOR
"""Not for any of the commands below, beyond the floor: Ansible (apply), rich's Markdown
(checklist), the HTTP client."""


def loaded(*args: str) -> set[str]:
    """The modules ``provision ARGS`` has imported when it exits (its exit status checked: 0)."""
    return _modules(_REPORT, *args)


def test_help_loads_no_model_and_no_catalog() -> None:
    modules = loaded("--help")
    assert not {"pydantic.main", "provision.catalog", "provision.spec.models"} & modules
    assert not NEVER & modules


def test_validate_loads_no_detector_planner_or_ansible() -> None:
    modules = loaded("validate", SPEC)
    assert {"provision.spec.models", "provision.components.registry"} <= modules  # it did validate
    unwanted = {"provision.detect.facts", "provision.detect.registry", "provision.plan.planner"}
    unwanted |= {"provision.catalog.serving", "provision.catalog.monitoring"}  # no serve:, no monitoring:
    assert not (unwanted | NEVER) & modules
    assert "packaging.requirements" not in modules  # the spec lists no python.packages
    assert not {"importlib.metadata"} - FLOOR & modules  # pydantic's plugin loader not imported
    # Neither serves nor monitors: the serving arithmetic, the unit and the monitoring files wait.
    assert (
        not {"provision.serving.fit", "provision.serving.unit", "provision.components.monitoring_files"}
        & modules
    )


@pytest.mark.parametrize(
    ("spec", "family", "other"),
    [(SPEC, "debian.apt", "redhat"), ("specs/rocky9-dual-a100x.yaml", "redhat.dnf", "debian")],
)
def test_validate_loads_only_its_own_os_familys_package_manager(spec: str, family: str, other: str) -> None:
    """The spec check names the package format and the repository code of its own family only;
    the other family's manager, parsers and probes wait (provision.os.select.package_manager)."""
    modules = loaded("validate", spec)
    assert f"provision.os.{family}" in modules
    assert not {m for m in modules if m.startswith(f"provision.os.{other}.") and not m.endswith(".releases")}


@pytest.mark.parametrize("as_json", [False, True])
def test_offline_plan_loads_no_ansible_and_no_http_client(as_json: bool) -> None:
    modules = loaded("plan", SPEC, "--from-raw", RAW, *(["--json"] if as_json else []))
    assert {"provision.plan.planner", "provision.detect.facts"} <= modules
    assert not NEVER & modules
    # Neither is needed for this spec (no python.packages; no Debian version ordered), and each
    # costs 6-60 ms to import; pydantic.networks brings importlib.metadata and email.
    assert not {"packaging.requirements", "debian.debian_support", "pydantic.networks"} & modules
    assert not {"importlib.metadata"} - FLOOR & modules  # plugins are off: nothing to look up


def _subclasses(cls: type[BaseModel]) -> Iterator[type[BaseModel]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_model_builds_its_validator() -> None:
    """``defer_build`` (provision.models.Frozen) moves a model's schema errors from import to its
    first use; this builds every model of every module, so the suite still finds them all."""
    for info in pkgutil.walk_packages(provision.__path__, "provision."):
        if not info.name.endswith("__main__"):  # that one runs the CLI
            importlib.import_module(info.name)
    models = [c for c in _subclasses(BaseModel) if c.__module__.startswith("provision.")]
    assert len(models) > 100
    for model in models:
        assert model.model_rebuild(force=True), model


@pytest.mark.parametrize(
    "version",
    [
        *("580.95.05-0ubuntu1", "1:2.3-4", "9.14.0.64-1", "2.28.9-1+cuda13.0", "1.0", "1:1.0-2:3-4"),
        *("1.0~rc1-1", "a-b-c", "-1", "1.0-", "1:", "", "1.0:2", "1.0 2", "1:2:3", "x:1.0"),
    ],
)
def test_apt_upstream_splits_as_python_debian(version: str) -> None:
    """Apt.upstream parses without importing python-debian; its answer, or its refusal, is
    python-debian's."""
    from debian.debian_support import Version as DebVersion

    from provision.os.debian.apt import Apt

    try:
        expected = DebVersion(version).upstream_version or version
    except ValueError:
        with pytest.raises(ValueError, match="Invalid version string"):
            Apt().upstream(version)
    else:
        assert Apt().upstream(version) == expected


@pytest.mark.parametrize(
    "installed",
    ["2.11.0+cu130", "2.11.0", "2.11.0+cu128", "2.11+cu130", "2.11.0.0+cu130", "2.11.1+cu130", "x", None],
)
def test_the_torch_pin_is_matched_as_pip_matches_it(installed: str | None) -> None:
    """The wheels step compares the torch pin as versions, without packaging.requirements; the
    answer is packaging's specifier match (PEP 440, local label included when pinned)."""
    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion, Version

    from provision.components.python_env import _unsatisfied
    from provision.spec.models import PythonSpec

    py = PythonSpec.model_validate(
        {"interpreter": "3.12", "venv": "/opt/venv", "torch": "2.11.0", "cuda_variant": "cu130"}
    )
    have = {} if installed is None else {"torch": installed}
    try:
        expected = installed is not None and Requirement("torch==2.11.0+cu130").specifier.contains(
            Version(installed), prereleases=True
        )
    except InvalidVersion:
        expected = False
    assert _unsatisfied(py, have) == (() if expected else ("torch==2.11.0+cu130",))


def test_extra_packages_are_checked_after_torch_in_spec_order() -> None:
    from provision.components.python_env import _unsatisfied
    from provision.spec.models import PythonSpec

    py = PythonSpec.model_validate(
        {
            "interpreter": "3.12",
            "venv": "/opt/venv",
            "torch": "2.11.0",
            "cuda_variant": "cu130",
            "packages": ["Numpy>=2", "einops"],
        }
    )
    assert _unsatisfied(py, {"torch": "2.11.0+cu130", "numpy": "2.1.0", "einops": "0.8"}) == ()
    assert _unsatisfied(py, {"numpy": "1.26"}) == ("torch==2.11.0+cu130", "Numpy>=2", "einops")


def test_only_the_named_command_is_built_and_runs_as_in_the_whole_app() -> None:
    """main() hands typer an app holding only the command argv names (typer builds every
    registered command before parsing); anything else gets the whole app."""
    from typer.testing import CliRunner

    from provision.cli import cli, invoked_only

    assert [c.callback.__name__ for c in invoked_only(cli, ["validate", SPEC]).registered_commands] == [
        "validate"
    ]
    lock = invoked_only(cli, ["lock", "show"])
    assert (lock.registered_commands, len(lock.registered_groups)) == ([], 1)
    for whole in (["--help"], [], ["vlidate"], ["--version"], ["-x"]):
        assert invoked_only(cli, whole) is cli
    runner = CliRunner()
    for args in (["validate", SPEC], ["validate", "--help"], ["lock", "--help"], ["catalog", "gpus"]):
        narrowed = runner.invoke(invoked_only(cli, args), args)
        whole = runner.invoke(cli, args)
        assert (narrowed.exit_code, narrowed.output) == (whole.exit_code, whole.output), args


def _validate_reporting(program: str, given: str | None) -> Any:
    """What ``program`` (a ``_REPORT`` variant) reports after ``validate SPEC``, run with
    PYDANTIC_DISABLE_PLUGINS set to ``given`` (None: unset)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if given is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = given
    done = subprocess.run(
        [sys.executable, "-c", program, "validate", SPEC], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return json.loads(line.removeprefix("MODULES "))


@pytest.mark.parametrize(("given", "seen"), [(None, "__all__"), ("", ""), ("logfire", "logfire")])
def test_pydantic_plugins_are_off_unless_the_user_chose(given: str | None, seen: str) -> None:
    """The console entry point skips pydantic's plugin lookup (an entry-point scan of every
    installed distribution) unless PYDANTIC_DISABLE_PLUGINS is set: an empty value keeps plugins on."""

    program = _REPORT.replace(
        "json.dumps(sorted(sys.modules))", "json.dumps(os.environ.get('PYDANTIC_DISABLE_PLUGINS'))"
    ).replace("import atexit, json, runpy, sys", "import atexit, json, os, runpy, sys")
    assert _validate_reporting(program, given) == seen


@pytest.mark.parametrize(("given", "stand_in"), [(None, True), ("1", True), ("", False), ("logfire", False)])
def test_the_plugin_loader_is_imported_only_when_plugins_are_on(given: str | None, stand_in: bool) -> None:
    """While every plugin is off, pydantic's answer (no plugins) is given without its loader, which
    imports importlib.metadata (provision/pydanticplugins.py); with plugins on, pydantic's loader
    runs as it does without provision."""

    program = _REPORT.replace(
        "json.dumps(sorted(sys.modules))",
        "json.dumps([type(sys.modules['pydantic.plugin._loader']).__name__, "
        "'importlib.metadata' in sys.modules])",
    )
    kind, metadata = _validate_reporting(program, given)
    if stand_in:
        assert kind == "_StandIn"
        assert not metadata or "importlib.metadata" in FLOOR
    else:
        assert (kind, metadata) == ("module", True)
