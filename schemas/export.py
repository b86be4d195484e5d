"""JSON Schema export of every model that crosses a queue or lands in the store."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from schemas.corpus import Corpus
from schemas.shard import RunPlan, Shard
from schemas.trajectory import Trajectory
from schemas.triggers import TriggerSet
from schemas.verdict import ShardGrade

EXPORTED: dict[str, type[BaseModel]] = {
    "corpus": Corpus,
    "shard": Shard,
    "run-plan": RunPlan,
    "trajectory": Trajectory,
    "shard-grade": ShardGrade,
    "trigger-set": TriggerSet,
}


def json_schemas() -> dict[str, dict[str, Any]]:
    """Name -> JSON Schema (draft 2020-12, as pydantic emits it)."""
    return {name: model.model_json_schema() for name, model in EXPORTED.items()}
