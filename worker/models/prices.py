"""Model prices per token, from litellm's price table, with or without litellm imported.

A run whose models all go straight over HTTP (worker/models/direct.py) never imports litellm
(seconds of CPU and over 100 MB a process), so the table is read from litellm's package
directly (engine/litellm_table.py). Once litellm is imported, its live table is used instead:
the same file's contents plus any model registered with it since.

A model missing from the table, or listed without a price, has an unknown cost (None),
never a zero one.
"""

from __future__ import annotations

import sys
from typing import Any

from engine.litellm_table import bundled_model_table


def _table() -> dict[str, dict[str, Any]]:
    litellm = sys.modules.get("litellm")
    live = getattr(litellm, "model_cost", None)  # absent while another thread is still importing it
    return live if isinstance(live, dict) else bundled_model_table()


def price_entry(model: str) -> dict[str, Any] | None:
    """The table's entry for ``model`` (as named, else without its provider prefix), or None."""
    table = _table()
    entry = table.get(model) or table.get(model.split("/", 1)[-1])
    return entry if isinstance(entry, dict) else None


def _per_token(entry: dict[str, Any], key: str) -> float | None:
    value = entry.get(key)
    return float(value) if isinstance(value, int | float) else None


def dearest_per_token(model: str) -> float | None:
    """The dearer of ``model``'s input and output prices per token; None when it has neither."""
    entry = price_entry(model)
    if entry is None:
        return None
    prices = [p for p in (_per_token(entry, "input_cost_per_token"), _per_token(entry, "output_cost_per_token")) if p]
    return max(prices) if prices else None


def tokens_cost(model: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float | None:
    """What ``model`` charges for one call's tokens in USD; None when its price is unknown.

    ``cached_tokens`` are the part of ``prompt_tokens`` read from the provider's prompt cache,
    charged at the cache-read price where the table has one. No long-context tiers, batch or
    priority prices: a call's list price.
    """
    entry = price_entry(model)
    if entry is None:
        return None
    prompt = _per_token(entry, "input_cost_per_token")
    completion = _per_token(entry, "output_cost_per_token")
    if not prompt and not completion:
        return None  # listed without a price (or registered at zero as unpriced): unknown, not free
    prompt = prompt or 0.0
    cached = min(max(cached_tokens, 0), prompt_tokens)
    cache_read = _per_token(entry, "cache_read_input_token_cost")
    cache_read = prompt if cache_read is None else cache_read
    return (prompt_tokens - cached) * prompt + cached * cache_read + completion_tokens * (completion or 0.0)
