"""Builders for planner tests: a fresh Ubuntu box's facts, packages, specs with overrides.

Also the data-driven parser cases' machinery shared by test_parsers and test_hardware.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from typer.testing import CliRunner, Result

from provision.catalog import load_catalog
from provision.components.registry import pins
from provision.detect.facts import (
    CudaToolkits,
    Facts,
    Kernel,
    NoVenv,
    OsRelease,
    Package,
    PackageLocks,
    Unknown,
)
from provision.detect.raw import ProbeOutput, parse_raw
from provision.os.debian.apt import APT
from provision.plan.models import Component, Plan, Step
from provision.spec.loader import load_spec
from provision.spec.models import Spec
from provision.versions import DottedVersion

ROOT = Path(__file__).resolve().parents[2]
DETECT_FIXTURES = ROOT / "tests" / "fixtures" / "detect"
H200_RAW = DETECT_FIXTURES / "h200-ubuntu2404"
CATALOG = load_catalog()
SPECS = ROOT / "specs"
A100X = str(SPECS / "dual-a100x.yaml")
H200 = str(SPECS / "h200-ubuntu2404.yaml")
H200_SPEC_RAW = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec"
"""The H200 capture as ``detect --save-raw`` writes it (the probe ids of the spec's venv)."""


def fresh_ubuntu(**changes: object) -> Facts:
    """A fresh Ubuntu 24.04 box: no NVIDIA driver, no NVIDIA packages, no venv."""
    base = Facts(
        host="box",
        os=OsRelease(id="ubuntu", version_id="24.04", codename="noble"),
        kernel=Kernel(release="6.8.0-60-generic", machine="x86_64"),
        driver=Unknown(unknown="NVIDIA kernel module not loaded"),
        gpus=Unknown(unknown="nvidia-smi: not found"),
        topology=Unknown(unknown="nvidia-smi: not found"),
        packages=(),
        cuda=CudaToolkits(),
        torch=Unknown(unknown="torch: no virtual environment at /opt/provision/venv"),
        venv=NoVenv(path="/opt/provision/venv"),  # the venv probe ran and found none (spec()'s venv)
    )
    return base.model_copy(update=changes)


def pkg(name: str, version: str, status: str = "install ok installed") -> Package:
    return Package(name=name, version=version, status=status)


def locked(s: Spec) -> PackageLocks:
    """provision's pins and unattended-upgrades guard, as apply writes them."""
    return PackageLocks(
        pins=APT.pins_text(pins(s, APT)),
        upgrade_guard=APT.upgrade_guard_text(CATALOG.naming("deb").stack_patterns),
    )


# Llama 3.1 8B's published figures:
# https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json
LLAMA_31_8B: dict[str, int] = {
    "layers": 32,
    "attention_heads": 32,
    "kv_heads": 8,
    "head_dim": 128,
    "max_context": 131072,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
}


def spec(**changes: object) -> Spec:
    """The shipped dual-A100X spec with ``section__field=value`` changes."""
    return spec_from(ROOT / "specs" / "dual-a100x.yaml", **changes)


def spec_from(path: Path, **changes: object) -> Spec:
    """The spec at ``path`` with ``section__field=value`` changes (unset fields stay unset)."""
    data = load_spec(path).model_dump(mode="json", exclude_none=True)
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("__")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return Spec.model_validate(data)


def step(plan: Plan, component: Component) -> Step:
    return next(s for s in plan.steps if s.component is component)


# --- Data-driven parser cases: <cases>/<probe id>/<case>.txt with the expected parse in <case>.json ---

Parser = Callable[[str, int], Any]


def jsonable(value: Any) -> Any:
    """A parse result as plain JSON data (models dumped, versions as text)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return str(value) if isinstance(value, DottedVersion) else value


def probe(path: Path) -> ProbeOutput:
    """A raw probe file (``detect --save-raw`` format) as its ProbeOutput."""
    return parse_raw(path.read_text(encoding="utf-8"), str(path))


def case_files(cases: Path) -> list[Path]:
    """Every case of every probe id under ``cases``, sorted."""
    return sorted(cases.glob("*/*.txt"))


def case_id(case: Path) -> str:
    """``<probe id>/<case>``, the pytest id of a case."""
    return f"{case.parent.name}/{case.stem}"


def parse_case(case: Path, parsers: Mapping[str, Parser]) -> Any:
    """The case parsed by its probe id's parser, as JSON data."""
    out = probe(case)
    return jsonable(parsers[case.parent.name](out.output, out.rc))


def expected(case: Path) -> Any:
    """The case's expected parse (``<case>.json``)."""
    return json.loads(case.with_suffix(".json").read_text(encoding="utf-8"))


def write_missing_expectations(cases: Path, parsers: Mapping[str, Parser]) -> None:
    """Write ``<case>.json`` from the current parse where it is missing; read it before committing."""
    for case in case_files(cases):
        target = case.with_suffix(".json")
        if not target.exists():
            text = json.dumps(parse_case(case, parsers), indent=2, ensure_ascii=False)
            target.write_text(text + "\n", encoding="utf-8")
            print("wrote", target)


def systemd_analyze_verify(unit_file: Path) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze verify`` of one unit file (warnings and errors on stderr; rc 0 when clean)."""
    return subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit_file)],
        capture_output=True,
        text=True,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"},
        timeout=60,
        check=False,
    )


DOWN = "host unreachable: Failed to connect to the host via ssh: ssh: connect to host 192.0.2.7 port 22"
"""The reason :func:`mock_detection` gives host ``b`` in the ``detected`` fixture (conftest)."""


def two_host_inventory(directory: Path, spec_path: str) -> Path:
    """``hosts.ini`` with hosts ``a`` and ``b``, both mapped to ``spec_path``."""
    path = directory / "hosts.ini"
    path.write_text(f"a provision_spec={spec_path}\nb provision_spec={spec_path}\n")
    return path


def mock_detection(mocker: Any, unreachable_reason: str) -> Any:
    """Detection answers ``a`` as a fresh Ubuntu box and ``b`` as unreachable with the reason
    (honouring ``--limit``); returns the mock of :func:`provision.hosts.detect_hosts`."""
    from provision.detect.runner import unknown_facts

    facts = {
        "a": fresh_ubuntu().model_copy(update={"host": "a"}),
        "b": unknown_facts("b", unreachable_reason),
    }

    def detect(inventory: Path | None, limit: str | None, venv: str | None, *rest: Any) -> dict[str, Facts]:
        names = limit.split(",") if limit else list(facts)
        return {h: f for h, f in facts.items() if h in names}

    mocker.patch("provision.app.detect_hosts", side_effect=detect)
    return mocker.patch("provision.hosts.detect_hosts", side_effect=detect)


def invoke(*args: str) -> Result:
    """Run ``provision ARGS`` through typer's CliRunner (stdout and stderr kept apart)."""
    from provision.cli import cli

    return CliRunner().invoke(cli, list(args))


def by_host(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A hosts-form ``--json`` document's ``hosts`` list (format_version 2) keyed by ``host``."""
    return keyed(doc["hosts"])


def keyed(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per-host rows (each with ``host``) keyed by ``host``, refusing a host listed twice."""
    assert isinstance(rows, list), rows
    found = {h["host"]: h for h in rows}
    assert len(found) == len(rows), rows
    return found


def one_host(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The one entry of a hosts-form document of one machine (a list of one)."""
    assert doc["format_version"] == 2 and len(doc["hosts"]) == 1, doc
    return doc["hosts"][0]  # type: ignore[no-any-return]


def one_plan(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The one host's plan of a ``plan --json`` document, with its ``summary`` line beside the plan's keys."""
    host = one_host(doc)
    return host["plan"] | {"summary": host["summary"]}  # type: ignore[no-any-return]


def one_report(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The one host's report of a ``verify --json`` document, with ``counts``, ``failed`` and
    ``support_bundle`` beside the report's keys (as format 1's single-host document had them)."""
    host = one_host(doc)
    extra = {k: host[k] for k in ("counts", "failed", "support_bundle")}
    return host["report"] | extra  # type: ignore[no-any-return]
