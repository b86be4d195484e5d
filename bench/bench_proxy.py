"""Benchmark: what the per-shard model proxy adds per request, and what one harness shard costs to start.

1. **Proxy latency.** ``--requests`` sequential Anthropic Messages requests (streamed, one
   tool call each) to the offline model server, once directly over TCP and once through a
   :class:`worker.proxy.ModelProxy` on its unix socket with the Redis limiter in the path.
   Printed: the median and p90 of each, the median added latency (through - direct), and the
   proxy's own time per request (parse, limiter, key swap, record, scrub; upstream excluded).
   Target: median added latency <= 2 ms.
2. **Harness shard start-up.** ``--shards`` one-turn shards of each ``--harness`` (Claude
   Code by default; the model answers with text at once) through
   :func:`worker.executor.harness.run_harness`: bwrap, seccomp, forwarder, proxy, the real
   binary, final-file collection. Printed: the median wall time, next to a bare ``true`` in
   the same sandbox for reference.

    .venv/bin/python bench/bench_proxy.py                # about half a minute
    .venv/bin/python bench/bench_proxy.py --requests 0 --harness opencode --harness claude-code
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402
import redis  # noqa: E402

from engine.redis_server import RedisServer  # noqa: E402
from harnesses.base import PLACEHOLDER_KEY  # noqa: E402
from harnesses.registry import HARNESSES  # noqa: E402
from schemas.corpus import EvalCase  # noqa: E402
from schemas.model_config import ModelLimits  # noqa: E402
from schemas.status import SandboxMode  # noqa: E402
from testkit.offline_server import OfflineModelServer  # noqa: E402
from worker.executor.harness import HarnessShard, harness_limits, run_harness  # noqa: E402
from worker.models.limiter import Limiter  # noqa: E402
from worker.proxy import ModelProxy, ProxyConfig  # noqa: E402
from worker.sandbox import SandboxLimits, open_sandbox  # noqa: E402

MODEL = "anthropic/claude-sonnet-4-5"
MODELS = {"anthropic": MODEL, "openai": "openai/gpt-5", "gemini": "gemini/gemini-2.5-pro"}
"""The model each protocol's harness is benchmarked with."""
SCENARIO = {
    "rules": [
        {
            "contains": "bench",
            "replies": [{"text": "ok", "tool_calls": [{"name": "Bash", "arguments": {"command": "ls"}}]}],
        }
    ],
    "default": {"text": "Done."},
}
BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "stream": True,
    "system": [{"type": "text", "text": "You are a coding agent. " * 200}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "bench: list the files"}]}],
}


def _ms(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.9)] * 1000


def _timed(client: httpx.Client, url: str, n: int, headers: dict[str, str]) -> list[float]:
    out = []
    payload = json.dumps(BODY).encode()
    for _ in range(n):
        began = time.perf_counter()
        response = client.post(url, content=payload, headers=headers)
        response.read()
        out.append(time.perf_counter() - began)
        assert response.status_code == 200, response.text
    return out


def bench_latency(server: OfflineModelServer, redis_url: str, n: int) -> dict[str, float]:
    root = f"http://127.0.0.1:{server.port}"
    headers = {"x-api-key": PLACEHOLDER_KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    limits = ModelLimits(name=MODEL, api_base=root, rpm=1_000_000)
    config = ProxyConfig(protocol="anthropic", upstream=root, real_key="sk-bench", model=MODEL, max_turns=10**9)
    with tempfile.TemporaryDirectory() as tmp:
        proxy = ModelProxy(config, Path(tmp) / "p.sock", limiter=Limiter(redis.Redis.from_url(redis_url), limits))
        uds = httpx.HTTPTransport(uds=str(proxy.socket_path))
        with proxy, httpx.Client(transport=uds, timeout=30) as via, httpx.Client(timeout=30) as direct:
            _timed(direct, f"{root}/v1/messages", 20, headers)  # warm both paths
            _timed(via, "http://proxy/v1/messages?beta=true", 20, headers)
            d = _timed(direct, f"{root}/v1/messages", n, headers)
            p = _timed(via, "http://proxy/v1/messages?beta=true", n, headers)
        inside = proxy.latencies[-n:]
    (d50, d90), (p50, p90), (i50, _i90) = _ms(d), _ms(p), _ms(inside)
    return {
        "direct_median_ms": d50,
        "direct_p90_ms": d90,
        "proxy_median_ms": p50,
        "proxy_p90_ms": p90,
        "added_median_ms": p50 - d50,
        "proxy_own_median_ms": i50,
    }


def bench_startup(server: OfflineModelServer, redis_url: str, shards: int, name: str) -> dict[str, float]:
    harness = HARNESSES[name]()
    model = MODELS[harness.protocol]
    limits = ModelLimits(name=model, api_base=f"http://127.0.0.1:{server.port}")
    limiter = Limiter(redis.Redis.from_url(redis_url), limits)
    case = EvalCase(id=1, prompt="Say done.", expected_output="", files=(), assertions=())
    totals, bare = [], []
    for _ in range(shards):
        with tempfile.TemporaryDirectory() as ws:
            (Path(ws) / "skills" / "noop").mkdir(parents=True)
            (Path(ws) / "skills" / "noop" / "SKILL.md").write_text("# noop\n")
            sandbox = open_sandbox(Path(ws), SandboxMode.BWRAP, harness_limits(SandboxLimits(), wall_clock_s=120))
            began = time.perf_counter()
            sandbox.run("true")
            bare.append(time.perf_counter() - began)
            began = time.perf_counter()
            run_harness(HarnessShard(harness, model, "noop", case), sandbox=sandbox, limits=limits, limiter=limiter)
            totals.append(time.perf_counter() - began)
    return {"shard_median_s": statistics.median(totals), "bare_sandbox_median_s": statistics.median(bare)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--harness", action="append", choices=sorted(HARNESSES), help="default: claude-code")
    args = parser.parse_args()
    with RedisServer() as redis_server, OfflineModelServer(SCENARIO) as server:
        if args.requests > 0:
            _print_latency(bench_latency(server, redis_server.url, args.requests), args.requests)
        for name in args.harness or ["claude-code"]:
            startup = bench_startup(server, redis_server.url, args.shards, name)
            print(
                f"harness shard start-up (one-turn {name} shard, median of {args.shards}): "
                f"{startup['shard_median_s']:.2f} s; a bare command in the same sandbox: "
                f"{startup['bare_sandbox_median_s'] * 1000:.0f} ms"
            )


def _print_latency(latency: dict[str, float], requests: int) -> None:
    print(
        f"proxy latency over {requests} streamed requests: direct median {latency['direct_median_ms']:.2f} ms "
        f"(p90 {latency['direct_p90_ms']:.2f}), through the proxy median {latency['proxy_median_ms']:.2f} ms "
        f"(p90 {latency['proxy_p90_ms']:.2f}); added median {latency['added_median_ms']:.2f} ms "
        f"(target <= 2 ms); the proxy's own time median {latency['proxy_own_median_ms']:.2f} ms"
    )


if __name__ == "__main__":
    main()
