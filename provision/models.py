"""Base classes shared by every pydantic model in the project."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, strict model: unknown keys are errors, instances are hashable values."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
