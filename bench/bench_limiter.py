"""Benchmark: a fleet of worker processes against a provider ceiling, with and without the limiter.

The offline model server enforces ``--rpm`` (default 600 requests per minute, sliding 10 s
window, 429 + Retry-After above it). A fleet of ``--workers`` processes, each running
``--threads`` threads, makes ``--calls`` calls in total:

* ``limiter``: through :class:`worker.models.client.GatedModelClient` and the Redis limiter
  configured with the same rpm;
* ``direct``: plain ``litellm.completion`` calls with litellm's own retries, no limiter.

Printed per mode: the share of 429s among all requests the server saw, and the achieved
throughput while busy (successful replies between the first and the last one) as a share of
the ceiling. Targets for the limiter: 429s <= 1 %, throughput >= 90 %.

    .venv/bin/python bench/bench_limiter.py            # both modes, about a minute each
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the project importable (also in children)
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MODEL = "openai/bench"


def _worker(
    mode: str, api_base: str, warm_base: str, redis_url: str, rpm: int, calls: int, threads: int, go: Any, out: Any
) -> None:
    """One worker process: ``calls`` calls over ``threads`` threads; puts (ok, failed) on ``out``."""
    import litellm
    import redis

    from schemas.model_config import parse_model_config
    from worker.models.client import GatedModelClient

    client = None
    if mode == "limiter":
        config = parse_model_config(
            {"models": {MODEL: {"rpm": rpm, "max_concurrency": 64, "timeout_s": 30}}},
            api_base_override=api_base,
        )
        client = GatedModelClient(config, redis.Redis.from_url(redis_url), run_id="bench")
    lock = threading.Lock()
    state = {"left": calls, "ok": 0, "failed": 0}

    def one(i: int) -> None:
        messages = [{"role": "user", "content": f"bench call {os.getpid()}-{i}"}]
        if client is not None:
            client.complete(MODEL, messages)
        else:
            litellm.completion(
                model=MODEL,
                messages=messages,
                api_base=api_base,
                api_key="offline-no-key",
                num_retries=6,
                timeout=30,
            )

    def run() -> None:
        while True:
            with lock:
                if state["left"] == 0:
                    return
                state["left"] -= 1
                i = state["left"]
            try:
                one(i)
                outcome = "ok"
            except Exception:
                outcome = "failed"
            with lock:
                state[outcome] += 1

    # litellm's first call in a process pays seconds of lazy imports between taking its slot and
    # sending; a long-lived worker pays that once, so warm up against another endpoint first.
    litellm.completion(model=MODEL, messages=[{"role": "user", "content": "warm"}], api_base=warm_base, api_key="x")
    go.wait()
    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put((state["ok"], state["failed"]))


def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one fleet against a fresh server (and a fresh Redis); return its figures."""
    from engine.redis_server import RedisServer
    from testkit.offline_server import OfflineModelServer

    scenario = {"default": {"text": "ok", "delay_s": args.latency}}
    ctx = mp.get_context("spawn")
    with (
        RedisServer() as redis_server,
        OfflineModelServer(scenario, rpm=args.rpm) as server,
        OfflineModelServer(scenario) as warm,
    ):
        go, out = ctx.Event(), ctx.Queue()
        share = [args.calls // args.workers + (1 if i < args.calls % args.workers else 0) for i in range(args.workers)]
        procs = [
            ctx.Process(
                target=_worker,
                args=(mode, server.base_url, warm.base_url, redis_server.url, args.rpm, n, args.threads, go, out),
            )
            for n in share
        ]
        for p in procs:
            p.start()
        time.sleep(args.warmup)  # let every worker finish importing litellm before the clock starts
        started = time.time()
        go.set()
        results = []
        for _ in procs:  # a worker that died puts nothing: give up rather than wait forever
            results.append(out.get(timeout=300))
        wall = time.time() - started
        for p in procs:
            p.join(30)
        stats = server.stats()
    ok = sum(r[0] for r in results)
    busy = (stats["last_ok_at"] or 0) - (stats["first_ok_at"] or 0)
    served_per_min = (stats["ok"] - 1) / busy * 60 if busy > 0 else 0.0
    return {
        "mode": mode,
        "calls": args.calls,
        "ok": ok,
        "failed": sum(r[1] for r in results),
        "requests": stats["total"],
        "429s": stats["rate_limited"],
        "429_share": stats["rate_limited"] / stats["total"] if stats["total"] else 0.0,
        "busy_s": busy,
        "wall_s": wall,
        "throughput_rpm": served_per_min,
        "throughput_share": served_per_min / args.rpm,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["both", "limiter", "direct"], default="both")
    parser.add_argument("--rpm", type=int, default=600, help="the server's ceiling and the limiter's rpm")
    parser.add_argument("--calls", type=int, default=360, help="calls in total, over the whole fleet")
    parser.add_argument("--workers", type=int, default=3, help="worker processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker process")
    parser.add_argument("--latency", type=float, default=0.1, help="server latency per reply, seconds")
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds for workers to import litellm")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON lines too")
    args = parser.parse_args(argv)
    modes = ["limiter", "direct"] if args.mode == "both" else [args.mode]
    rows = [run_mode(mode, args) for mode in modes]
    print(
        f"fleet: {args.workers} processes x {args.threads} threads, {args.calls} calls, "
        f"server ceiling {args.rpm} rpm (sliding 10 s window), latency {args.latency}s"
    )
    print(
        f"{'mode':<8} {'ok':>5} {'failed':>6} {'requests':>8} {'429s':>6} {'429 share':>9} "
        f"{'busy s':>7} {'rpm':>7} {'of ceiling':>10}"
    )
    for r in rows:
        print(
            f"{r['mode']:<8} {r['ok']:>5} {r['failed']:>6} {r['requests']:>8} {r['429s']:>6} "
            f"{r['429_share']:>9.1%} {r['busy_s']:>7.1f} {r['throughput_rpm']:>7.0f} {r['throughput_share']:>10.1%}"
        )
    if args.json:
        for r in rows:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
