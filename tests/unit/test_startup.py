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


@pytest.mark.parametrize("as_json", [False, True])
def test_offline_plan_loads_no_ansible_and_no_http_client(as_json: bool) -> None:
    modules = loaded("plan", SPEC, "--from-raw", RAW, *(["--json"] if as_json else []))
    assert {"provision.plan.planner", "provision.detect.facts"} <= modules
    assert not NEVER & modules


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
