"""The harness as a dimension of a sweep: which given executor runs which given model. Pure.

``--executor`` may be given several times; each executor runs the given models it can speak
(:func:`harnesses.registry.speaks`). What cannot run is refused before anything runs, by
name: with one executor, any model it cannot speak; with several, a model none of them
speaks, and an executor given no model it speaks. ``validate``, ``--dry-run`` and ``run``
all call :func:`pair_harnesses` (docs/design/harnesses.md, "The harness as a dimension").
"""

from __future__ import annotations

from collections.abc import Sequence

from harnesses.registry import check_executor, speaks, spoken
from producer.plan.prechecks import check_repeats
from schemas.errors import UnspokenModel

UNSPECIFIED = "(unspecified)"
"""The model name a plan without ``--model`` counts its shards for."""


def pair_harnesses(executors: Sequence[str], models: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each executor -> the models it runs, in the order given; empty for a run of one executor (its
    shards keep the ids and rows they had before the harness was a dimension).

    Raises :class:`UnspokenModel` naming the executor and the model, ``ConfigError`` for an executor
    unknown, or an executor or a model given twice.
    """
    for executor in executors:
        check_executor(executor)
    check_repeats("--executor", executors)
    check_repeats("--model", models)
    if len(executors) == 1:
        [executor] = executors
        for model in models:
            if not speaks(executor, model):
                raise UnspokenModel(f"--executor {executor} cannot run --model {model}: it runs {spoken(executor)}")
        return {}
    for model in models:
        if not any(speaks(e, model) for e in executors):
            able = "; ".join(f"{e} runs {spoken(e)}" for e in executors)
            raise UnspokenModel(f"--model {model}: no given executor can run it ({able})")
    paired = {e: tuple(m for m in models if speaks(e, m)) for e in executors}
    for executor, runs in paired.items():
        if models and not runs:
            raise UnspokenModel(
                f"--executor {executor}: none of the given models ({', '.join(models)}) is one it can run; "
                f"it runs {spoken(executor)}"
            )
    return paired


def planned_harnesses(
    executors: Sequence[str], models: Sequence[str], paired: dict[str, tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """What a dry run plans: the pairs, or, with no ``--model`` yet, each executor with the one
    unnamed model its shards are counted for (a run of one executor: none)."""
    if len(executors) < 2 or models:
        return paired
    return {e: (UNSPECIFIED,) for e in executors}
