"""A run's live figures for the viewer: shards per live state, calls in flight, 429 cool-downs,
spend against the budget and an ETA, from the broker while a run goes (or its stored result once
reduced)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import redis

from engine.keys import limiter_keys
from schemas.manifest import RunManifest
from schemas.status import INFRA_FAILURES, ShardState
from viewer.rows import NOT_ENDED

GROUPS = {
    "queued": (ShardState.QUEUED,),
    "executing": (ShardState.EXECUTING, ShardState.EXECUTED),
    "grading": (ShardState.GRADING,),
    "graded": (ShardState.GRADED,),
    "blocked": (ShardState.BLOCKED,),
    "failed": tuple(INFRA_FAILURES),
}
"""The live states a page shows, from the contract's shard states. The ended ones are the reports'
tally (graded, blocked, infra failures): a blocked shard was never graded and is not "done"."""


def counts_of_result(result: dict[str, Any]) -> dict[str, int]:
    """Shards per state from a reduced run's result (no broker to ask): graded, each infra
    failure, and the rest of the not-graded as blocked."""
    counts: dict[str, int] = {}
    for s in result["skills"]:
        graded = sum(m["graded"] for m in s["models"])
        counts[ShardState.GRADED.value] = counts.get(ShardState.GRADED.value, 0) + graded
        for kind, n in s["infra"].items():
            counts[kind] = counts.get(kind, 0) + n
        blocked = s["not_graded"] - sum(s["infra"].values())
        counts[ShardState.BLOCKED.value] = counts.get(ShardState.BLOCKED.value, 0) + max(0, blocked)
    return counts


def limiter_figures(
    client: redis.Redis, models: list[str], usage: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per model, from its fleet-wide limiter: calls in flight (unexpired leases), the shared 429
    cool-down left, the pace factor (1: full rate), and this run's 429 answers so far."""
    out = {}
    for model in dict.fromkeys(models):
        state_key, leases_key = limiter_keys(model)
        seconds, micros = client.time()
        now_ms = seconds * 1000 + micros / 1000
        in_flight = int(client.zcount(leases_key, f"({now_ms}", "+inf"))
        factor, cooldown_until = client.hmget(state_key, "factor", "cooldown_until")
        out[model] = {
            "in_flight": in_flight,
            "cooldown_s": round(max(0.0, (float(cooldown_until or 0) - now_ms) / 1000), 1),
            "pace": round(float(factor or 1), 3),
            "rate_limited": int(usage.get(model, {}).get("rate_limited", 0)),
        }
    return out


SOURCE_WORDS = {
    "broker": "live, from the run's broker",
    "result": "from the run's result",
    "store": "from the shards the store holds (no broker, not reduced)",
    "lost": "from the shards the store holds (its broker does not know the run: the others never end)",
}
"""Where a run page's shard counts come from, as its note under "Shards" says it."""


def live_figures(
    manifest: RunManifest, total: int, counts: dict[str, int], source: str, usage: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    if "ended" in counts:  # only how many ended is known (no broker, not reduced), not how
        groups = {NOT_ENDED: counts.get(NOT_ENDED, 0), "ended": counts["ended"]}
    else:
        groups = {name: sum(counts.get(s.value, 0) for s in states) for name, states in GROUPS.items()}
    finished = sum(n for name, n in groups.items() if name in ("graded", "blocked", "failed", "ended"))
    # An unpriced model's cost is unknown, never $0: the spend is the known costs' sum, None when
    # no cost is known, and ``spend_unknown`` says some model's cost is left out of it.
    costs = [u.get("cost_usd") for u in usage.values()]
    known = [float(c) for c in costs if c is not None]
    started = manifest.plan.created_at
    elapsed = max(0.0, (datetime.now(UTC) - started).total_seconds())
    remaining = max(0, total - finished)
    eta = elapsed / finished * remaining if finished and remaining and source == "broker" else None
    return {
        "source": source,
        "source_words": SOURCE_WORDS.get(source, source),
        "total": total,
        "states": counts,
        "groups": groups,
        "finished": finished,
        "spend_usd": round(sum(known), 6) if known else None,
        "spend_unknown": len(known) < len(costs),
        "budget_usd": manifest.settings.max_cost_usd,
        "eta_s": round(eta, 1) if eta is not None else None,
        "usage": usage,
    }
