"""Base classes shared by every pydantic model in the project."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, strict model: unknown keys are errors, instances are hashable values.

    ``defer_build``: pydantic builds a model's validator and serializer when the model is first
    used, not when its module is imported, so a command pays only for the models it uses (start-up
    is most of a command's time; benchmarks/bench_startup.py). Pydantic >= 2.8 defers models.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
