"""The spec's JSON Schema helps an editor: $id, the catalog's GPU ids, descriptions and examples
everywhere, the shipped copy in step, modelines in the shipped specs, and no made-up commands."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from provision.catalog import load_catalog
from provision.cli import cli
from provision.spec.loader import load_spec
from provision.spec.models import Spec
from provision.spec.schema import SCHEMA_FILE, SCHEMA_ID, properties, spec_schema
from tests.unit.factories import LLAMA_31_8B

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").rglob("*.yaml"))


def _meaning(schema: dict[str, Any]) -> dict[str, Any]:
    # What an editor shows; pydantic versions differ in how they wrap a $ref (allOf or not) and
    # write a Literal (enum or const).
    keys = ("description", "examples", "default")
    return {where: {k: prop.get(k) for k in keys} for where, prop in properties(schema)} | {
        "$id": schema["$id"],
        "gpus": schema["$defs"]["GpuSpec"]["properties"]["model"]["enum"],
    }


def test_the_shipped_schema_says_what_provision_schema_prints() -> None:
    printed = json.loads(CliRunner().invoke(cli, ["schema"]).stdout)
    shipped = json.loads((ROOT / "specs" / SCHEMA_FILE).read_text())
    assert _meaning(printed) == _meaning(shipped), "run: provision schema > specs/spec.schema.json"


def test_schema_has_id_gpu_enum_and_describes_every_property() -> None:
    schema = spec_schema()
    assert schema["$id"] == SCHEMA_ID and schema["$schema"].endswith("2020-12/schema")
    assert schema["$defs"]["GpuSpec"]["properties"]["model"]["enum"] == list(load_catalog().gpus)
    missing = [w for w, p in properties(schema) if not p.get("description") or not p.get("examples")]
    assert not missing, missing


SERVE_BASE = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "vllm": "0.26.0",
    "architecture": LLAMA_31_8B,
}


GPU_NESTED = {
    "GpuSettings": lambda f, v: {"settings": [{f: v}]},
    "MigLayout": lambda f, v: {"mig": [{f: v}]},
    "ClockRange": lambda f, v: {"settings": [{"locked_gpu_clocks": {"min_mhz": 1, "max_mhz": 5000, f: v}}]},
    "ApplicationClocks": lambda f, v: {
        "settings": [{"application_clocks": {"memory_mhz": 1, "graphics_mhz": 1, f: v}}]
    },
}
"""The ``gpu:`` section's nested models: one example of a field wrapped into a whole section."""


def test_examples_are_valid_spec_values() -> None:
    base = json.loads(load_spec(ROOT / "specs" / "dual-a100x.yaml").model_dump_json(exclude_unset=True))
    for where, prop in properties(spec_schema()):
        model, field = where.split(".")
        if model in ("Spec", "BiosItem"):
            continue  # whole sections; BiosItem rows are checked through bios.items below
        section = {
            "OsSpec": "os",
            "GpuSpec": "gpus",
            "DriverSpec": "driver",
            "CudaSpec": "cuda",
            "PythonSpec": "python",
            "RepositorySpec": "repository",
            "BiosSpec": "bios",
            "VerifySpec": "verify",
            "ServeSpec": "serve",
            "ModelArchitecture": "serve",
            "MonitoringSpec": "monitoring",
            "ContainersSpec": "containers",
            "GpuSection": "gpu",
            "GpuSettings": "gpu",
            "MigLayout": "gpu",
            "ClockRange": "gpu",
            "ApplicationClocks": "gpu",
        }[model]
        for example in prop["examples"]:
            data = json.loads(json.dumps(base))
            if model in GPU_NESTED:
                data["gpu"] = GPU_NESTED[model](field, example)
                Spec.model_validate(data)
                continue
            data.setdefault(section, {})
            if section == "serve":
                data[section] = json.loads(json.dumps(SERVE_BASE))
                if model == "ModelArchitecture":
                    data[section]["architecture"][field] = example
                    Spec.model_validate(data)
                    continue
                if field == "config_json":
                    del data[section]["architecture"]
            if section == "repository":
                data[section] = {
                    "url": "https://example.invalid/",
                    "key_url": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/k.pub",
                    "fingerprint": "0" * 40,
                }
                if field == "key_file":
                    del data[section]["key_url"]
            if section == "monitoring":
                data[section] = {"dcgm": "4.5.3"}
            if section == "containers":
                data[section] = {"runtime": "podman", "toolkit": "1.18.2"}
            if section == "driver" and field == "version":
                data[section]["branch"] = int(example.split(".")[0])
            if section == "os" and field == "distro" and example in ("rocky", "rhel"):
                data[section]["version"] = "9"  # the RHEL family's releases are 9 and 10
            data[section][field] = example
            Spec.model_validate(data)


def test_schema_text_names_only_commands_that_exist() -> None:
    text = json.dumps(spec_schema())
    commands = {c.name or c.callback.__name__ for c in cli.registered_commands if c.callback}
    named = set(re.findall(r"provision[ `]+([a-z]+)", text))
    assert named and named <= commands, named - commands


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_shipped_specs_carry_the_modeline(spec: Path) -> None:
    first = spec.read_text().splitlines()[0]
    target = Path(first.removeprefix("# yaml-language-server: $schema="))
    assert first.startswith("# yaml-language-server: $schema=")
    assert (spec.parent / target).resolve() == (ROOT / "specs" / SCHEMA_FILE)
