"""A run's spending caps, enforced fleet-wide in Redis by reservation.

``--max-cost USD`` and ``--max-tokens N`` cap what one run may spend on model calls,
executor and judge alike, whichever worker makes them. Before a call, its estimate is
*reserved* in one Lua step that refuses when what is spent plus what is reserved plus the
estimate would pass a cap; after it, the reservation is *settled* to the actual use. So
the overshoot is bounded by the calls in flight (their actual use above their estimate),
never by the fleet's size. Once refused, the run is marked exhausted and every later call
is refused at once: no new model call starts, and shards that still needed one end
``budget-exhausted``, counted apart like infra, never as behaviour. Raising the cap
(``skill-eval resubmit RUN --max-cost ...``) clears the mark.

A provider that says the key is out of credit (OpenAI's ``insufficient_quota``,
Anthropic's "credit balance is too low") is the same kind of stop for that model: it is
marked exhausted for the run, so its other shards end the same way instead of each
burning a retry budget.

A shard's fair share of a cap is the cap divided by the run's shards. An executor past its
share may not take the cap's last share: its call is refused once spent plus reserved plus
the estimate would pass the cap minus one share, and that refusal is the shard's own
(``budget-share``: behaviour, graded as it stands), not the run's. What a shard has spent
counts its reservations still in flight (kept per shard in the budget hash, taken off when
settled): calls it fires at once, each estimated below a share, are not each within it. The run is not marked
exhausted by it, so the last share is left to the shards within theirs and to the judges
(the over-spender's own judge included, which is what lets it be graded). A shard within
its share that the cap refuses ends ``budget-exhausted`` as before: an adversarial agent
that burns tokens until the cap refuses it can no longer take itself out of the pass rate.
Likewise, for a request the agent shaped (a harness proxy's, whose estimate is its body's size):
a side request of the agent's own that does not fit, or a request of the harness's conversation
estimated above a whole share that does not fit (a 2 MB body the agent posts its proxy), is
refused as the shard's own and never marks the run: the run is exhausted only by what was spent
and honestly reserved.

Keys: ``skill-eval:run:<run_id>:budget`` hash (caps, spent, reserved, in tokens and in
micro-dollars) and ``…:budget:models`` hash (model -> why it is out of credit).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import redis

from engine.keys import run_keys
from engine.scripts import reply_text, scripts
from schemas.trajectory import Usage

_MICRO = 1_000_000

OUT_OF_CREDIT_MARKERS = (
    "insufficient_quota",
    "exceeded your current quota",
    "credit balance is too low",
    "billing_hard_limit_reached",
    "out of credits",
)
"""Provider error texts that mean the key cannot pay for any more calls (not a rate limit)."""


def is_out_of_credit(err: BaseException) -> bool:
    """Whether a provider error means the key has no credit or quota left (no retry can help)."""
    text = f"{err} {getattr(err, 'code', '') or ''} {getattr(err, 'body', '') or ''}".lower()
    return any(marker in text for marker in OUT_OF_CREDIT_MARKERS)


@dataclass(frozen=True)
class Reservation:
    tokens: int
    micro_usd: int
    shard: str = ""
    """The key of the shard it was counted under while in flight ('' none), for its settling."""


@dataclass(frozen=True)
class Spend:
    """What a run has spent and may spend (``None``: no cap)."""

    tokens: int
    cost_usd: float
    max_tokens: int | None
    max_cost_usd: float | None
    exhausted: str | None
    """``tokens`` or ``cost`` once a cap refused a call; None while calls may start."""


@dataclass(frozen=True)
class OverShare:
    """A refusal that is the calling shard's own: it spent past its share of a cap (behaviour)."""

    why: str

    def __str__(self) -> str:
        return self.why


def over_share_why(spend: Spend, shards: int, own: Usage, asked: Reservation | None = None) -> str:
    """Why a shard's call was refused as its own doing, in words: the share it passed, the share
    its one call alone asked for more than (``asked``: its estimate), or a side request of its own."""
    asked = asked or Reservation(0, 0)
    if spend.max_tokens is not None and shards > 0:
        share = spend.max_tokens // shards
        if own.total_tokens >= spend.max_tokens / shards:
            return (
                f"this shard spent or has in flight {own.total_tokens} tokens, past its share of the run's token cap "
                f"({share} = {spend.max_tokens} / {shards} shards)"
            )
        if asked.tokens > spend.max_tokens / shards:
            return (
                f"this shard's request alone is estimated at {asked.tokens} tokens: more than its share of "
                f"the run's token cap ({share} = {spend.max_tokens} / {shards} shards), and more than the cap "
                "has left"
            )
    cap = spend.max_cost_usd or 0.0
    if cap and shards > 0 and (own.cost_usd or 0.0) >= cap / shards:
        return (
            f"this shard spent or has in flight ${own.cost_usd or 0:.4f}, past its share of the run's cost cap "
            f"(${cap / shards:.4f} = ${cap:.4f} / {shards} shards)"
        )
    return (
        f"this request of the agent's own (not its harness's conversation), estimated at {asked.tokens} "
        "tokens, does not fit under what is left of the run's caps"
    )


Shaped = Literal["product", "conversation", "side"]
"""Who shaped a request, so whose doing its refusal is: the product (the built-in agent's calls,
the judge's), a harness's conversation (a body the agent can grow; one estimated above a whole
share that does not fit is the shard's own), or the agent alone (a side request of its own: any
refusal is the shard's own). Neither of the last two ever marks the run exhausted."""
_SHAPED: tuple[Shaped, ...] = ("product", "conversation", "side")

CREDIT_RECHECK_S = 1.0
"""How long one process trusts a read that found a model's out-of-credit mark absent.

Reading the mark before every call would cost one Redis round trip per call, for a mark that
is set once in a run, if ever. Trusting its absence for a second costs nothing in correctness: a call
that starts in that second after another worker set the mark reaches the provider, which
answers out of credit again, and the call ends ``budget-exhausted`` as a refusal would. A mark
found present is never trusted (a resubmit that raised the caps clears it), so it is read again
on every call while it stands.
"""


class RunBudget:
    """The caps of one run, shared by every worker through Redis."""

    def __init__(self, client: redis.Redis, run_id: str, *, capped: bool = True, shards: int = 0) -> None:
        self.r = client
        self.run_id = run_id
        self.capped = capped
        """Without caps only the models' out-of-credit marks are checked (see ``CREDIT_RECHECK_S``)."""
        self.shards = shards
        """The run's shards, which a cap's fair share divides by; 0 leaves the share rule out."""
        keys = run_keys(run_id)
        self.key, self.models_key = keys.budget, keys.budget_models
        self._lua = scripts(client, "budget")
        self._unmarked: dict[str, float] = {}
        """Model -> when this process last read its out-of-credit mark and found none (monotonic)."""

    def set_caps(self, max_tokens: int | None, max_cost_usd: float | None) -> None:
        """Set (or raise, on resubmit) the caps; clears an exhausted mark so calls may start again."""
        pipe = self.r.pipeline()
        for field, value in (("max_tokens", max_tokens), ("max_cost", _micro(max_cost_usd))):
            if value is None:
                pipe.hdel(self.key, field)
            else:
                pipe.hset(self.key, field, value)
        pipe.hdel(self.key, "exhausted")
        pipe.delete(self.models_key)
        pipe.execute()

    def reserve(
        self,
        model: str,
        tokens: int,
        cost_usd: float | None,
        *,
        own: Usage | None = None,
        shaped: Shaped = "product",
        shard: str = "",
    ) -> Reservation | OverShare | str:
        """Reserve an estimate before a call; a :class:`Reservation`, or why the call must not start.

        ``own`` is what the calling executor's shard has spent so far (judges pass nothing):
        with it, a refusal of a shard past its share comes back as :class:`OverShare`, the
        shard's own doing; a plain string is the run's cap or the model's credit (infra).
        ``shaped``: who shaped the request whose estimate this is (see :data:`Shaped`).
        ``shard``: a key of the calling shard ('' none), under which its reservations in flight
        are counted with ``own`` until settled (:meth:`settle` must follow every reservation,
        with 0 for a call that failed).
        """
        why = self.out_of_credit(model)
        if why is not None:
            return f"{model} is out of credit for this run: {why}"
        if not self.capped:
            return Reservation(0, 0)
        shards = self.shards if own is not None else 0
        shard = shard if own is not None else ""
        reservation = Reservation(tokens, _micro(cost_usd) or 0, shard)
        own = own or Usage()
        args: list[int | str] = [reservation.tokens, reservation.micro_usd, own.total_tokens, _micro(own.cost_usd) or 0]
        args += [shards, _SHAPED.index(shaped), shard]
        got = self._lua["reserve"](keys=[self.key], args=args)
        if got == 1:
            return reservation
        spend = self.spend()
        if got == 2:
            return OverShare(over_share_why(spend, shards, self._with_in_flight(own, shard), reservation))
        if spend.exhausted == "tokens":
            return f"the run's token cap is reached ({spend.tokens} of {spend.max_tokens} tokens spent)"
        return f"the run's cost cap is reached (${spend.cost_usd:.4f} of ${spend.max_cost_usd:.4f} spent)"

    def settle(self, reservation: Reservation, tokens: int, cost_usd: float | None) -> None:
        """Replace a reservation by what the call actually used (0 for a call that failed)."""
        if not self.capped:
            return
        self._lua["settle"](
            keys=[self.key],
            args=[reservation.tokens, reservation.micro_usd, tokens, _micro(cost_usd) or 0, reservation.shard],
        )

    def _with_in_flight(self, own: Usage, shard: str) -> Usage:
        """``own`` with what ``shard`` has reserved and not yet settled added, as the refusal counted it."""
        if not shard:
            return own
        tokens, micro = self.r.hmget(self.key, [f"inflight_tokens:{shard}", f"inflight_cost:{shard}"])
        in_flight = int(reply_text(tokens)) if tokens is not None else 0
        cost = (own.cost_usd or 0.0) + (int(reply_text(micro)) / _MICRO if micro is not None else 0.0)
        return Usage(prompt_tokens=own.total_tokens + in_flight, cost_usd=cost if cost or own.cost_usd else None)

    def out_of_credit(self, model: str) -> str | None:
        """Why ``model`` is marked out of credit for the run, or None (see ``CREDIT_RECHECK_S``)."""
        seen = self._unmarked.get(model)
        if seen is not None and time.monotonic() - seen < CREDIT_RECHECK_S:
            return None
        why = self.r.hget(self.models_key, model)
        if why is None:
            self._unmarked[model] = time.monotonic()
            return None
        self._unmarked.pop(model, None)
        return reply_text(why)

    def mark_out_of_credit(self, model: str, why: str) -> None:
        self.r.hset(self.models_key, model, why[:300])
        self._unmarked.pop(model, None)

    def spend(self) -> Spend:
        raw = {reply_text(k): reply_text(v) for k, v in self.r.hgetall(self.key).items()}
        return Spend(
            tokens=int(raw.get("spent_tokens", 0)),
            cost_usd=int(raw.get("spent_cost", 0)) / _MICRO,
            max_tokens=int(raw["max_tokens"]) if "max_tokens" in raw else None,
            max_cost_usd=int(raw["max_cost"]) / _MICRO if "max_cost" in raw else None,
            exhausted=raw.get("exhausted"),
        )


def _micro(usd: float | None) -> int | None:
    return None if usd is None else round(usd * _MICRO)
