"""Model names litellm could not route, refused by name before anything runs. Pure.

A model of the run is called through litellm unless its config sends it straight over HTTP
(``transport = "direct"``). litellm finds a model's provider in the name's prefix
(``anthropic/claude-sonnet-4-5``, ``openai/gpt-5``) or, for a bare name, in its model table
(``gpt-4o``). A bare name the table does not list (``notamodel``) would pass every check and
fail only at the workers' model check, as litellm's "LLM Provider NOT provided"; ``validate
--model``, ``--dry-run`` and ``run`` refuse it here instead, saying how to spell a model.

A prefix itself is not checked: litellm's list of providers is known only by importing it
(seconds of CPU), and a prefix it does not know is named by the workers' model check.
Harness executors refuse a bare name anyway (producer/plan/harnesses.py), and an external
``cmd:`` agent calls its model on its own, so only the built-in agent's models and the judges
are checked.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from harnesses.providers import provider_of
from schemas.constants import BUILTIN_EXECUTOR
from schemas.errors import ConfigError
from schemas.words import noun

SPELLING = (
    "name it <provider>/<model> as litellm does (anthropic/claude-sonnet-4-5, openai/gpt-5; "
    "openai/<name> for an OpenAI-compatible server at --api-base)"
)


def check_model_names(
    executors: Sequence[str],
    models: Sequence[str],
    judges: Sequence[str],
    known: Collection[str],
    direct: Callable[[str], bool],
) -> None:
    """Raise ``ConfigError`` naming the first ``--model`` (run by the built-in agent) or ``--judge``
    whose provider litellm cannot tell: no ``<provider>/`` prefix, not in ``known`` (litellm's
    model table) and not sent ``direct`` by the model config. An empty ``known`` (litellm's table
    not found) checks nothing."""
    if not known:
        return
    ours = [("--model", m) for m in models] if BUILTIN_EXECUTOR in executors else []
    for flag, model in [*ours, *(("--judge", j) for j in judges)]:
        if provider_of(model) is None and model not in known and not direct(model):
            raise ConfigError(f"{flag} {model}: litellm cannot tell which provider serves it; {SPELLING}")


def check_cost_cap(max_cost: float | None, models: Sequence[str], table: Mapping[str, Any]) -> None:
    """Refuse ``--max-cost`` when a model of the run has no price in litellm's model ``table``:
    that model's calls cost "unknown", the cap never counts them, and it would never stop the run.

    A model is priced as the workers price it (worker/models/prices.py): its entry by the name
    given, else without its provider prefix, with a non-zero input or output price per token.
    The model config has no price of its own, so the way to cap such a run is ``--max-tokens``.
    """
    if not max_cost:  # no cap (0 is none too: RunSettings.max_cost_usd)
        return
    unpriced = [m for m in dict.fromkeys(models) if not _priced(table.get(m) or table.get(m.split("/", 1)[-1]))]
    if unpriced:
        names, whose = ", ".join(unpriced), "its" if len(unpriced) == 1 else "their"
        raise ConfigError(
            f"--max-cost {max_cost:g}: litellm has no price for {noun(len(unpriced), 'model')} {names}, so {whose} "
            "spend cannot be counted and the cap would never stop the run; cap the run with --max-tokens N "
            "instead (or drop --max-cost)"
        )


def _priced(entry: Any) -> bool:
    if not isinstance(entry, Mapping):
        return False
    prices = (entry.get("input_cost_per_token"), entry.get("output_cost_per_token"))
    return any(isinstance(p, int | float) and not isinstance(p, bool) and p > 0 for p in prices)
