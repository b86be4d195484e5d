"""Benchmark: what one model call costs the worker, with the model answering at once.

``--threads`` threads of one process make ``--calls`` calls each through
:class:`worker.models.client.GatedModelClient` (the fleet limiter, the run's usage counters, the
budget's out-of-credit check) against the offline model server with no latency, on a private
redis-server. Printed, medians of ``--repeat`` rounds: wall and process CPU per call, Redis
round trips per call (requests the client sent: a pipeline is one) and commands per call (the
server's own count, commands inside scripts included), and threads started per call.
``--transport`` picks how the calls travel: ``direct`` (straight over HTTP, the default for
this OpenAI-compatible endpoint) or ``litellm``.

    .venv/bin/python bench/bench_model_call.py --threads 16 --calls 100 --repeat 5
    .venv/bin/python bench/bench_model_call.py --threads 16 --calls 100 --repeat 5 --transport litellm

Run it from another checkout with ``PYTHONPATH=<checkout>`` to compare two versions of the client.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MODEL = "openai/bench-call"


def _commands(client: object) -> int:
    stats = client.info("stats")  # type: ignore[attr-defined]
    return int(stats["total_commands_processed"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--calls", type=int, default=100, help="calls per thread per round")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--transport", choices=("direct", "litellm"), default="direct")
    args = parser.parse_args(argv)

    import redis
    import redis.connection

    from engine.redis_server import RedisServer
    from schemas.model_config import parse_model_config
    from testkit.offline_server import OfflineModelServer
    from worker.models.client import GatedModelClient

    started = sent = 0
    original_start = threading.Thread.start
    original_send = redis.connection.AbstractConnection.send_packed_command

    def counting_send(self: redis.connection.AbstractConnection, *a: object, **k: object) -> None:
        nonlocal sent
        sent += 1
        original_send(self, *a, **k)  # type: ignore[arg-type]

    redis.connection.AbstractConnection.send_packed_command = counting_send  # type: ignore[method-assign]

    def counting_start(self: threading.Thread) -> None:
        nonlocal started
        started += 1
        original_start(self)

    threading.Thread.start = counting_start  # type: ignore[method-assign]
    scenario = {"rules": [{"name": "bench", "replies": [{"text": "ok"}]}]}
    with RedisServer() as server, OfflineModelServer(scenario=scenario) as model:
        r = redis.Redis.from_url(server.url)
        table = {"max_concurrency": 64, "transport": args.transport}
        config = parse_model_config({"models": {MODEL: table}}, api_base_override=model.base_url)
        client = GatedModelClient(config, r, run_id="bench")
        messages = [{"role": "user", "content": "one call"}]
        client.complete(MODEL, messages)  # the first call loads scripts and the transport's lazy modules

        def calls() -> None:
            for _ in range(args.calls):
                client.complete(MODEL, messages)

        rows = []
        for _ in range(args.repeat):
            total = args.threads * args.calls
            threads = [threading.Thread(target=calls) for _ in range(args.threads)]
            commands, cpu, wall, before = _commands(r), time.process_time(), time.perf_counter(), started
            trips = sent
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            spawned, trips = started - before - args.threads, sent - trips
            commands = _commands(r) - commands - 1  # less the INFO that read the count
            rows.append((wall / total * 1000, cpu / total * 1000, trips / total, commands / total, spawned / total))
            print(
                f"round: {total} calls, {rows[-1][0]:.2f} ms wall and {rows[-1][1]:.2f} ms CPU per call, "
                f"{rows[-1][2]:.2f} Redis round trips ({rows[-1][3]:.1f} commands) and "
                f"{rows[-1][4]:.2f} threads started per call",
                flush=True,
            )
        med = [statistics.median(row[i] for row in rows) for i in range(5)]
        print(
            f"median of {args.repeat}: {args.threads} threads, {med[0]:.2f} ms wall per call, {med[1]:.2f} ms "
            f"CPU per call (this process: client, transport and the model server), {med[2]:.2f} Redis round "
            f"trips ({med[3]:.1f} commands) per call, {med[4]:.2f} threads started per call"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
