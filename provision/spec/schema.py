"""The spec's JSON Schema, as ``provision schema`` prints it for editors."""

from __future__ import annotations

from typing import Any

from provision.spec.models import Spec


def spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a spec file."""
    return Spec.model_json_schema()
