"""Benchmark: adaptive epochs against fixed epochs, by simulation of the pure rule (reducer/adaptive.py).

A corpus of ``--cases`` cases with one assertion each: a share ``--steady`` of them always
pass (the model's behaviour there is fixed), the rest pass with probability ``--p``. Every
(case, epoch) draw is a function of the seed, the case and the epoch alone (common random
numbers), so an adaptive run and a fixed run of the same seed see the same verdicts for the
epochs both ran.

For each seed:

- **adaptive**: ``--epochs auto --max-epochs N`` with the threshold ``--threshold``: rounds
  until every case stopped; its calls (shards), whether and which way it decided, and its
  gated figure's interval at the nominal 95% once it stopped;
- **fixed E**, for every E from the first round to N: the same interval over E epochs of
  every case, and its calls.

Reported: mean calls and mean 95% width of the adaptive runs; the fewest fixed epochs whose
mean width is as narrow, and its calls; how often each decided. With ``--null`` the threshold is
set to the true rate, so every decision is an error: the share of seeds that decided is the
rule's error rate under repeated looks (it should stay under alpha = 0.05).

Run::

    .venv/bin/python bench/bench_adaptive_epochs.py
    .venv/bin/python bench/bench_adaptive_epochs.py --null --seeds 4000
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reducer.adaptive import Gate, ShardKey, Verdicts, case_draws, finished, next_round, pass_rate_look
from schemas.adaptive import AdaptivePlan, adaptive_plan

NOMINAL = 0.95


def draw(seed: int, case: int, epoch: int, p: float) -> bool:
    return random.Random(seed * 1_000_003 + case * 1_009 + epoch).random() < p


def observe(seed: int, probs: list[float], epochs: dict[int, int]) -> dict[ShardKey, Verdicts]:
    return {("s", "current", c, "m", e): (draw(seed, c, e, p),) for c, p in enumerate(probs) for e in range(epochs[c])}


def adaptive_run(seed: int, probs: list[float], rule: AdaptivePlan, threshold: float) -> tuple[int, str, float]:
    """(calls, decision, nominal 95% width at the end)."""
    cases = [("s", c) for c in range(len(probs))]
    plan = rule
    while True:
        epochs = {c: plan.epochs_of("s", c) for c in range(len(probs))}
        seen = observe(seed, probs, epochs)
        plan = next_round(plan, cases, {"s": Gate(threshold)}, seen, ["current"])
        if finished(plan):
            break
    epochs = {c: plan.epochs_of("s", c) for c in range(len(probs))}
    final = pass_rate_look(case_draws(observe(seed, probs, epochs), "s", "current"), Gate(threshold), NOMINAL, "s")
    decision = plan.gates[0].decided if plan.gates else ""
    return sum(epochs.values()), decision, final.high - final.low


def fixed_run(seed: int, probs: list[float], epochs: int, threshold: float) -> tuple[int, str, float]:
    """(calls, decision at one look, 95% width) of every case run ``epochs`` times."""
    seen = observe(seed, probs, dict.fromkeys(range(len(probs)), epochs))
    look = pass_rate_look(case_draws(seen, "s", "current"), Gate(threshold), NOMINAL, "s")
    return len(probs) * epochs, look.decided, look.high - look.low


def main() -> None:
    args = parse_args()
    steady = round(args.cases * args.steady)
    probs = [1.0] * steady + [args.p] * (args.cases - steady)
    truth = sum(probs) / len(probs)
    threshold = truth if args.null else args.threshold
    rule = adaptive_plan(args.max_epochs)
    runs = [adaptive_run(seed, probs, rule, threshold) for seed in range(args.seeds)]
    calls = sum(r[0] for r in runs) / len(runs)
    width = sum(r[2] for r in runs) / len(runs)
    decided = sum(bool(r[1]) for r in runs) / len(runs)
    print(
        f"corpus: {args.cases} cases, {steady} always pass, the rest pass with p = {args.p}; true rate {truth:.3f}; "
        f"threshold {threshold:.3f}{' (the truth: every decision is an error)' if args.null else ''}; "
        f"{args.seeds} seeds"
    )
    print(
        f"adaptive (first round {rule.first_round}, max {rule.max_epochs}, {rule.looks} looks at "
        f"{100 * rule.level:.2f}%): mean calls {calls:.1f}, mean 95% width {width:.3f}, decided {100 * decided:.1f}%"
    )
    match = None
    for epochs in range(rule.first_round, args.max_epochs + 1):
        fixed = [fixed_run(seed, probs, epochs, threshold) for seed in range(args.seeds)]
        f_width = sum(r[2] for r in fixed) / len(fixed)
        f_decided = sum(bool(r[1]) for r in fixed) / len(fixed)
        print(
            f"fixed {epochs} epochs: calls {len(probs) * epochs}, mean 95% width {f_width:.3f}, "
            f"decided at one look {100 * f_decided:.1f}%"
        )
        if match is None and f_width <= width:
            match = (epochs, len(probs) * epochs)
    if match is None:
        print(f"no fixed epochs up to {args.max_epochs} give an interval as narrow as the adaptive one")
    else:
        print(
            f"same interval: fixed {match[0]} epochs cost {match[1]} calls; adaptive {calls:.1f} "
            f"({100 * (1 - calls / match[1]):.0f}% fewer)"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--steady", type=float, default=0.7, help="share of cases that always pass")
    parser.add_argument("--p", type=float, default=0.5, help="pass chance of the other cases")
    parser.add_argument("--threshold", type=float, default=0.75)
    parser.add_argument("--max-epochs", type=int, default=11)
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--null", action="store_true", help="threshold at the true rate: the error rate")
    return parser.parse_args()


if __name__ == "__main__":
    main()
