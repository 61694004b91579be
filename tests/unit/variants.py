"""Derived raw captures: a real capture under ``tests/fixtures/raw`` overlaid with the probe files
one failure changes, as ``tests/fixtures/ff-variants`` and ``tests/fixtures/heldout-variants``
hold them (each directory: ``variant.yaml`` with ``base`` and ``spec``, optionally its own
``spec.yaml``, and the changed ``*.txt`` probe outputs)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from provision.detect.runner import facts_from_raw
from provision.plan.models import Plan
from provision.plan.planner import make_plan
from provision.spec.loader import load_spec
from tests.unit.factories import CATALOG, ROOT

RAW = ROOT / "tests" / "fixtures" / "raw"


def variants(directory: Path) -> list[Path]:
    """The variant directories of ``directory``, sorted."""
    return sorted(p for p in directory.iterdir() if (p / "variant.yaml").is_file())


def meta(variant: Path) -> dict[str, Any]:
    """The variant's ``variant.yaml``."""
    loaded: dict[str, Any] = yaml.safe_load((variant / "variant.yaml").read_text())
    return loaded


def materialize(variant: Path, into: Path) -> Path:
    """The base capture with the variant's probe files in place of its own, under ``into``."""
    target = into / variant.name
    shutil.copytree(RAW / meta(variant)["base"], target)
    for probe in variant.glob("*.txt"):
        shutil.copyfile(probe, target / probe.name)
    return target


def plan_of(variant: Path, tmp_path: Path) -> Plan:
    """The variant's plan: its own ``spec.yaml`` or the shipped spec ``variant.yaml`` names,
    planned on the materialized capture."""
    spec_path = variant / "spec.yaml" if (variant / "spec.yaml").is_file() else ROOT / meta(variant)["spec"]
    spec = load_spec(spec_path)
    venv = spec.python.venv if spec.python else None
    facts = facts_from_raw(materialize(variant, tmp_path), venv=str(venv) if venv else None)
    return make_plan(spec, facts, CATALOG)
