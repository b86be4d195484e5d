"""Benchmark: a sweep under chaos, against the same sweep without faults. Nothing lost, nothing counted twice.

The real cluster path: a private redis-server with an append-only file, worker nodes as real
processes (``tests/engine_support.py: WorkerNode``, the bwrap sandbox), the offline scripted
model server over HTTP. The corpus has ``--cases`` cases run by two executor models for
``--epochs`` epochs (480 shards by default); the scripted agent forgets one of the two
asserted words in the cases whose prompt names a 3, so the result line is not all passes.

1. **baseline**: ``--nodes`` nodes, no fault; the run's wall time and result.
2. **chaos**: the same run on a fresh set of nodes while, every ``--kill-every`` seconds (drawn
   between half and one and a half times that), a random node's whole process group is
   SIGKILLed and a new node started in its place; Redis is SIGKILLed and restarted
   ``--restarts`` times (spread over the expected run), and a node is killed while it is down.
   The run must finish by itself: nothing resubmits it.

Reported: lost shards (not terminal when the run was given up on), shards counted twice (the
run's terminal counter past its total, or an outcome line of one shard sealed twice), shards
re-executed (claimed into ``executing`` more than once, the work a kill cost), messages sent
again by the delivery ledger and restarts seen, wall times, and whether the result equals the
baseline's (every corpus's figures and the verdict).

Run::

    .venv/bin/python bench/bench_chaos.py                       # 480 shards, kills every ~5 s, 2 restarts
    .venv/bin/python bench/bench_chaos.py --cases 12 --epochs 2 --kill-every 3
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from schemas.constants import QUEUE_EXECUTE

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from engine.collect import stream_outcome_lines
from engine.redis_server import RedisServer
from engine.segments import SegmentWriter
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from producer.corpus.repo import Repo
from producer.launch.cluster import task_sender
from producer.launch.submit import build_manifest, submit
from producer.plan.planning import new_run_id, plan_run
from schemas.manifest import AgentBudget, RunManifest, RunSettings, result_key
from schemas.model_config import ModelConfig
from schemas.report import RunResult
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.engine_support import EXECUTOR, JUDGE, SKILL, WorkerNode, make_corpus_repo, scenario, wait_until

MODELS = (EXECUTOR, EXECUTOR + "-b")
ERROR_LINE = re.compile(r"^[\w.]*(Error|Exception)\b|CRITICAL/")
"""A traceback's last line, or Celery's own critical line, in a node's log."""


def workload(delay_s: float) -> dict[str, object]:
    """The scripted agent answers in one turn; in cases whose prompt names a 3 it forgets "answered"."""
    base = scenario(executor_delay_s=delay_s, judge_delay_s=delay_s / 3)
    forgetful = {"name": "forgetful", "tools": True, "contains": "Case 3", "replies": [{"text": "BENCH-DONE"}]}
    if delay_s:
        forgetful["replies"] = [{"text": "BENCH-DONE", "delay_s": delay_s}]
    rules = list(base["rules"])  # type: ignore[call-overload]
    base["rules"] = [rules[0], forgetful, *rules[1:]]
    return base


def plan(repo: Path, settings: Settings, api_base: str, epochs: int) -> RunManifest:
    r = Repo(repo)
    bundles = [o.bundle for o in r.load_many(r.targets([SKILL], False)) if o.bundle]
    p = plan_run(new_run_id(), bundles, list(MODELS), judges=[JUDGE], epochs=epochs, sandbox=settings.sandbox)
    run_settings = RunSettings(
        budget=AgentBudget(max_turns=4, wall_clock_s=120, command_timeout_s=30),
        calibrate=False,
        models=ModelConfig(api_base_override=api_base),
    )
    return build_manifest(p, r.root, open_store(settings.store), run_settings, out_dir="", skipped=[])


class Fleet:
    """Worker nodes started and killed by the chaos; every log kept for the counts."""

    def __init__(self, settings: Settings, logs: Path, size: int, concurrency: int) -> None:
        self.settings, self.logs, self.concurrency = settings, logs, concurrency
        self.nodes: list[WorkerNode] = []
        self.all: list[WorkerNode] = []
        self.kills = 0
        for _ in range(size):
            self.add()

    def add(self) -> None:
        name = f"n{len(self.all)}"
        node = WorkerNode(self.settings, name, self.logs / f"{name}.log", concurrency=self.concurrency)
        self.nodes.append(node)
        self.all.append(node)

    def kill_one(self, rng: random.Random) -> None:
        node = self.nodes.pop(rng.randrange(len(self.nodes)))
        node.kill()
        self.kills += 1

    def text(self) -> str:
        return "".join(n.text() for n in self.all)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def chaos(fleet: Fleet, broker: RedisServer, done: threading.Event, args: argparse.Namespace, log: list[str]) -> None:
    rng = random.Random(args.seed)
    started = time.monotonic()
    restart_at = [args.spread_s * (i + 1) / (args.restarts + 1) for i in range(args.restarts)]
    while not done.wait(rng.uniform(0.5, 1.5) * args.kill_every):
        fleet.kill_one(rng)
        fleet.add()
        if restart_at and time.monotonic() - started >= restart_at[0]:
            restart_at.pop(0)
            broker.kill()
            time.sleep(1.0)
            fleet.kill_one(rng)  # a node lost while Redis is down
            fleet.add()
            time.sleep(1.0)
            broker.start()
            log.append(f"redis restarted at {time.monotonic() - started:.1f} s")


def one_run(
    name: str, repo: Path, base: Path, model: OfflineModelServer, args: argparse.Namespace, faults: bool
) -> dict[str, object]:
    with RedisServer(workdir=base / f"{name}-redis", appendonly=True) as broker:
        settings = Settings(
            broker_url=broker.url,
            store=str(base / "store"),
            workdir=base / "work",
            lease_ttl_s=args.lease_ttl,
            reaper_period_s=args.reaper_period,
            redeliver_after_s=args.redeliver_after,
        )
        logs = base / f"{name}-logs"
        logs.mkdir()
        client = redis.Redis.from_url(broker.url)
        state = RunState(client)
        manifest = plan(repo, settings, model.base_url, args.epochs)
        run_id = manifest.plan.run_id
        fleet = Fleet(settings, logs, args.nodes, args.concurrency)
        wait_until(lambda: all(n.ready() for n in fleet.nodes), 180, what="nodes ready")
        done, events = threading.Event(), list[str]()
        thread = threading.Thread(target=chaos, args=(fleet, broker, done, args, events), daemon=True)
        started = time.monotonic()
        publisher = task_sender(settings, manifest)
        submit(
            manifest,
            open_store(settings.store),
            state,
            lambda r, s: publisher.send(QUEUE_EXECUTE, r, s),
            publisher.batch,
        )
        if faults:
            thread.start()
        finished = True
        try:
            wait_until(lambda: state.reduced(run_id), args.give_up_s, poll_s=0.5, what="run reduced")
        except TimeoutError:
            finished = False
        wall = time.monotonic() - started
        done.set()
        if faults:
            thread.join(60)
        wait_until(broker.ping, 30, what="redis up")
        figures = count(client, state, settings, manifest, fleet)
        fleet.stop()
    store = open_store(settings.store)
    result = RunResult.model_validate_json(store.get(result_key(run_id))) if store.exists(result_key(run_id)) else None
    return {
        "name": name,
        "shards": len(manifest.plan.shards),
        "finished": finished,
        "wall_s": round(wall, 1),
        "kills": fleet.kills,
        "events": events,
        "result": summary(result),
        **figures,
    }


def count(
    client: redis.Redis, state: RunState, settings: Settings, manifest: RunManifest, fleet: Fleet
) -> dict[str, object]:
    run_id = manifest.plan.run_id
    states = state.states(run_id)
    terminal, total = state.totals(run_id)
    SegmentWriter(client, open_store(settings.store)).flush(run_id)
    store = open_store(settings.store)
    lines = Counter(line.shard_id for line in stream_outcome_lines(store, run_id))
    result = RunResult.model_validate_json(store.get(result_key(run_id))) if store.exists(result_key(run_id)) else None
    counted = sum(m.shards for s in (result.skills if result else []) for m in s.models)
    records = len(store.list(f"runs/{run_id}/attempts/0/outcomes/"))
    claims = [state.claims(run_id, s.shard_id, ShardState.EXECUTING) for s in manifest.plan.shards]
    text = fleet.text()
    return {
        "lost": sum(not s.terminal for s in states.values()) + (len(manifest.plan.shards) - len(states)),
        "counted_twice": max(0, terminal - total) + max(0, counted - len(manifest.plan.shards)),
        "outcome_records": records,
        "lines_pushed_twice": sum(n > 1 for n in lines.values()),
        "re_executed": sum(c > 1 for c in claims),
        "re_executions": sum(max(0, c - 1) for c in claims),
        "sent_again_by_ledger": text.count("message lost; sent again"),
        "restarts_seen": text.count("redis restarted; re-sent waiting shards"),
        "leases_expired": text.count("lease expired; re-queued"),
        "given_up": sum(s is ShardState.EXECUTOR_FAILED for s in states.values()),
        "tracebacks": text.count("Traceback"),
        "errors": errors(text),
    }


def errors(text: str) -> dict[str, int]:
    """The distinct errors behind the tracebacks in the nodes' logs (a JSON log line's exception,
    or a plain traceback's last line), with their counts."""
    seen: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("exception"):
                seen[f"{doc.get('event')}: {str(doc['exception']).strip().splitlines()[-1][:160]}"] += 1
        elif ERROR_LINE.search(line):
            seen[line[:200]] += 1
    return dict(seen.most_common(20))


def summary(result: RunResult | None) -> dict[str, object] | None:
    if result is None:
        return None
    skills = [f"{s.skill} [{s.variant}] {s.headline}, not graded {s.not_graded}/{s.shard_count}" for s in result.skills]
    return {"verdict": result.verdict.value, "skills": skills}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=48)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.3, help="executor reply latency, s (the judge's is a third)")
    parser.add_argument("--kill-every", type=float, default=5.0)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--logs", type=Path, help="keep the nodes' logs in this folder")
    parser.add_argument("--lease-ttl", type=float, default=5.0)
    parser.add_argument("--reaper-period", type=float, default=1.0)
    parser.add_argument("--redeliver-after", type=float, default=10.0)
    parser.add_argument("--give-up-s", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-chaos-") as tmp, OfflineModelServer(workload(args.delay)) as model:
        base = Path(tmp)
        repo = make_corpus_repo(base / "repo", cases=args.cases)
        baseline = one_run("baseline", repo, base, model, args, faults=False)
        print(json.dumps(baseline, indent=2), flush=True)
        args.spread_s = float(baseline["wall_s"])  # type: ignore[arg-type]  # the restarts fall inside the run
        chaotic = one_run("chaos", repo, base, model, args, faults=True)
        print(json.dumps(chaotic, indent=2), flush=True)
        if args.logs:
            shutil.copytree(base, args.logs, ignore=shutil.ignore_patterns("store", "work", "repo", "*redis*"))
    same = chaotic["result"] == baseline["result"]
    print(
        f"{chaotic['shards']} shards, {chaotic['kills']} node kills, {len(chaotic['events'])} Redis restarts: "  # type: ignore[arg-type]
        f"lost {chaotic['lost']}, counted twice {chaotic['counted_twice']}, "
        f"re-executed {chaotic['re_executed']} shards ({chaotic['re_executions']} re-executions), "
        f"sent again by the ledger {chaotic['sent_again_by_ledger']}; "
        f"wall {chaotic['wall_s']} s against {baseline['wall_s']} s without faults; "
        f"result {'equal to' if same else 'DIFFERENT from'} the baseline's"
    )


if __name__ == "__main__":
    main()
