"""Benchmark: whole ``skill-eval run`` commands on the embedded cluster, timed from the command's start.

Each run is the real command line (``.venv/bin/skill-eval run ...``) as a user types it: the
CLI plans, snapshots, starts its private redis-server and worker, submits, waits, reduces and
writes the reports; the clock runs from just before the process starts to its exit. The models
are the offline scripted server over HTTP, in this process (not part of the measured tree); the
executor runs in bwrap. The preflight's pings and judge calibration run as by default and wait
the latency like every other call (their calls count in the ideal).

Per shard the scripted executor makes ``--tool-calls`` shell tool calls and then answers, and
one judge call grades it, so a shard makes ``tool-calls + 2`` model calls.

* ``instant``: no latency; the figure is shards per second (target >= 25 on 2 cores), from the
  command's start and between its first and last model call.
* ``latency``: ``--latency`` seconds per model call; the figure is wall time over the ideal
  ``calls x latency / concurrency`` (target <= 1.10), start-up and reports included.

Every run also reports the seconds from the command's start to its first model request's arrival
at the server (target
<= 5) and the peak memory of the command's whole process tree (RSS and PSS, see
``bench/proctree.py``; target <= 600 MB at concurrency 16). ``--repeat`` runs give medians.

Run::

    .venv/bin/python bench/bench_pipeline.py latency --cases 16 --epochs 6 --tool-calls 3 --workers 8 --repeat 3
    .venv/bin/python bench/bench_pipeline.py latency --cases 16 --epochs 6 --tool-calls 3 --workers 16 --repeat 3
    .venv/bin/python bench/bench_pipeline.py instant --cases 50 --epochs 10 --workers 8 --repeat 3
    .venv/bin/python bench/bench_pipeline.py profile --cases 20 --epochs 2

``--timeline`` also prints, per run, the calls in flight second by second and the slot-seconds
the model phase lost between calls.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.broker import InProcessBroker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bytecode import compile_sources
from bench.proctree import processes_with, run_watched
from engine.settings import Settings, default_work_root
from testkit.judge import calibration_judge_rules
from testkit.offline_server import OfflineModelServer
from tests.engine_support import EXECUTOR, FINAL_TEXT, JUDGE, SKILL, make_corpus_repo, scenario, submit_run

ROOT = Path(__file__).resolve().parent.parent
TARGET_SHARDS_PER_S = 25.0
TARGET_LATENCY_RATIO = 1.10
TARGET_FIRST_CALL_S = 5.0


@contextlib.contextmanager
def work_root() -> Iterator[Path]:
    """A private folder under the product's default work root (a tmpfs when there is one)."""
    default_work_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-", dir=default_work_root()) as work:
        yield Path(work)


def workload(latency_s: float, tool_calls: int) -> dict[str, Any]:
    """``tool_calls`` shell calls then the final answer, each after ``latency_s``; a judge that also calibrates."""
    delay: dict[str, Any] = {"delay_s": latency_s} if latency_s else {}
    steps = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": f"echo step {i + 1} && ls src"}}], **delay}
        for i in range(tool_calls)
    ]
    base = scenario(executor_delay_s=latency_s, judge_delay_s=latency_s)
    executor = {"name": "executor", "tools": True, "replies": [*steps, {"text": FINAL_TEXT, **delay}]}
    base["rules"] = [base["rules"][0], executor]
    base["judge"] = [*base["judge"], *calibration_judge_rules()]
    base["default"] = {"text": "OK", **delay}  # the preflight's ping waits like any other call
    return base


@dataclass(frozen=True)
class Measured:
    """One ``skill-eval run`` under the benchmark."""

    wall_s: float
    first_call_s: float
    """From the command's start to the first model request reaching the server."""
    model_phase_s: float
    """From the first model request to the last reply."""
    tail_s: float
    """From the last reply to the command's exit: the last judge's bookkeeping, reduce, reports, shutdown."""
    calls: int
    shards: int
    peak_rss_mb: float
    peak_pss_mb: float
    processes: int
    timeline: list[tuple[float, float, str]]
    """(arrived, replied, model) of each call, seconds from the command's start."""


def run_command(
    repo: Path,
    root: Path,
    work: Path,
    model: OfflineModelServer,
    *,
    epochs: int,
    workers: int,
    latency_s: float,
    turns: int,
    worker_processes: int | None = None,
    warm: bool = False,
) -> Measured:
    """One ``skill-eval run`` from a fresh store and report folder; raise SystemExit unless every shard was graded.

    ``warm``: the command takes the warm spare an earlier command left (producer/launch/warm.py); a
    first warm run is preceded by an untimed one that leaves it, and the spare is waited for
    until it listens (imported), before the run and again after it, so that the next spare's
    import never overlaps what is timed next. Its process tree counts in the memory figures.
    Otherwise the spare is switched off, whatever the terminal.
    """
    tag = f"{time.monotonic_ns()}"
    argv = [
        str(Path(sys.executable).parent / "skill-eval"),
        "run",
        SKILL,
        "--repo",
        str(repo),
        "--model",
        EXECUTOR,
        "--judge",
        JUDGE,
        "--epochs",
        str(epochs),
        "--api-base",
        model.base_url,
        "--workers",
        str(workers),
        "--max-turns",
        str(turns + 2),
        *(["--worker-processes", str(worker_processes)] if worker_processes else []),
        "--out",
        str(root / f"reports-{tag}"),
        "--store",
        str(root / f"store-{tag}"),
    ]
    env = {**os.environ, "SKILL_EVAL_WORKDIR": str(work), "SKILL_EVAL_RUN_LOG": str(root / "runs.log")}
    env.pop("SKILL_EVAL_BROKER_URL", None)
    env["SKILL_EVAL_WARM"] = "1" if warm else "0"
    spares: list[int] = []
    if warm:
        env.update(XDG_RUNTIME_DIR=str(spare_runtime(root)), SKILL_EVAL_WARM_IDLE_S="600")
        spares = waiting_spare(root, argv, env)
    model.reset()
    done = run_watched(argv, env=env, cwd=ROOT, also=spares)
    if warm:  # the spare it left imports now, not during whatever the caller times next
        waiting_spare(root, argv, env)
    if done.returncode != 0 or "not graded (infra): none" not in done.stdout:
        raise SystemExit(f"run failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    shards = int(done.stdout.split("cases: ", 1)[1].split()[0]) * epochs
    return measured(model, done.started, done.wall_s, shards, done.peak_rss_mb, done.peak_pss_mb, done.peak_processes)


def spare_runtime(root: Path) -> Path:
    """A private runtime folder for the benchmark's warm spares (a short path: a socket's limit)."""
    folder = root / "rt"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def waiting_spare(root: Path, argv: list[str], env: dict[str, str]) -> list[int]:
    """The spare waiting for ``argv``'s command, once it listens (imported) and is the only one.

    An untimed run first leaves one when there is none at all, not even one still importing.
    """
    sockets = spare_runtime(root) / "skill-eval"
    if not processes_with(str(sockets)):
        subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, check=True)
    deadline = time.monotonic() + 120
    while not (sockets.is_dir() and any(sockets.glob("*.sock"))) or len(processes_with(str(sockets))) != 1:
        if time.monotonic() > deadline:
            raise SystemExit("no single warm spare listening within 120 s")
        time.sleep(0.1)
    return processes_with(str(sockets))


def stop_spares(root: Path) -> None:
    """Kill the warm spares this benchmark left."""
    for pid in processes_with(str(spare_runtime(root))):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def measured(
    model: OfflineModelServer,
    started: float,
    wall_s: float,
    shards: int,
    peak_rss_mb: float,
    peak_pss_mb: float,
    processes: int,
) -> Measured:
    """The run's phases from the server's clock (``started``: wall-clock time of the command's start)."""
    stats = model.stats()
    first_request = float(stats["first_request_at"])
    return Measured(
        wall_s=wall_s,
        first_call_s=first_request - started,
        model_phase_s=float(stats["last_ok_at"]) - first_request,
        tail_s=started + wall_s - float(stats["last_ok_at"]),
        calls=int(stats["ok"]),
        shards=shards,
        peak_rss_mb=peak_rss_mb,
        peak_pss_mb=peak_pss_mb,
        processes=processes,
        timeline=[(a - started, r - started, m) for a, r, m in model.timeline()],
    )


def occupancy(timeline: list[tuple[float, float, str]], concurrency: int, step_s: float = 1.0) -> str:
    """Calls in flight per ``step_s`` of the run (mean over the step), and the slot-seconds lost.

    Lost = concurrency x (last reply - first arrival) - the calls' own time: what the product's
    overhead between calls cost the model phase.
    """
    if not timeline:
        return "no calls"
    first = min(a for a, _, _ in timeline)
    last = max(r for _, r, _ in timeline)
    busy = sum(r - a for a, r, _ in timeline)
    cells = []
    t = 0.0
    while t < last:
        overlap = sum(max(0.0, min(r, t + step_s) - max(a, t)) for a, r, _ in timeline)
        cells.append(f"{overlap / step_s:.0f}")
        t += step_s
    lost = concurrency * (last - first) - busy
    return (
        f"first arrival {first:.2f} s, last reply {last:.2f} s, calls busy {busy:.1f} s, "
        f"slot-seconds lost in the model phase {lost:.1f} ({lost / concurrency:.2f} s of wall)\n"
        f"  in flight per {step_s:g} s: {' '.join(cells)}"
    )


def report(runs: list[Measured], case: str, workers: int, latency_s: float) -> int:
    """Print the medians and whether they meet the targets; the exit code (0 when all do)."""
    med = {k: statistics.median(getattr(r, k) for r in runs) for k in Measured.__dataclass_fields__ if k != "timeline"}
    shards, calls = runs[0].shards, runs[0].calls
    ok = med["first_call_s"] <= TARGET_FIRST_CALL_S
    print(
        f"median of {len(runs)}: wall {med['wall_s']:.1f} s, first model call {med['first_call_s']:.2f} s after the"
        f" command started (target <= {TARGET_FIRST_CALL_S:g}), {med['tail_s']:.1f} s from the last reply to the exit,"
        f" peak memory of the process tree"
        f" {med['peak_rss_mb']:.0f} MB RSS / {med['peak_pss_mb']:.0f} MB PSS ({med['processes']:.0f} processes)"
    )
    if case == "instant":
        rate = shards / med["wall_s"]
        phase = shards / med["model_phase_s"]
        ok = ok and rate >= TARGET_SHARDS_PER_S
        print(
            f"instant model, {shards} shards, concurrency {workers}: {rate:.1f} shards/s from the command's start,"
            f" {phase:.1f} shards/s in the model phase (target >= {TARGET_SHARDS_PER_S:g})"
        )
        return 0 if ok else 1
    ideal = calls * latency_s / workers
    ratio = med["wall_s"] / ideal
    ok = ok and ratio <= TARGET_LATENCY_RATIO
    print(
        f"latency {latency_s:g} s, concurrency {workers}: ideal {ideal:.1f} s = {calls} calls x {latency_s:g} s"
        f" / {workers}; wall/ideal {ratio:.2f} (target <= {TARGET_LATENCY_RATIO:.2f});"
        f" model phase/ideal {med['model_phase_s'] / ideal:.2f}"
    )
    return 0 if ok else 1


def profile(cases: int, epochs: int, top: int = 30) -> int:
    """cProfile of execute + grade for every shard of a run, in this process (no Celery): where a shard's time goes."""
    import cProfile
    import pstats

    import redis

    from engine.redis_server import RedisServer
    from worker import pipeline
    from worker.context import Context

    with tempfile.TemporaryDirectory(prefix="skill-eval-prof-") as tmp, RedisServer() as server, work_root() as work:
        root = Path(tmp)
        repo = make_corpus_repo(root / "repo", cases=cases)
        settings = Settings(store=str(root / "store"), workdir=work, broker_url=server.url)
        with OfflineModelServer(scenario()) as model:
            manifest = submit_run(repo, settings, model.base_url, epochs=epochs)
            redis.Redis.from_url(server.url).delete("celery", "execute")  # the workers here are us
            ctx = Context(settings)
            broker = InProcessBroker()  # the follow-up messages: this loop runs every shard itself
            run_id = manifest.plan.run_id
            shards = [s.shard_id for s in manifest.plan.shards]
            pipeline.execute_shard(ctx, broker, run_id, shards[0])  # warm: imports, snapshot unpack
            pipeline.grade_shard(ctx, broker, run_id, shards[0])
            prof = cProfile.Profile()
            start = time.monotonic()
            prof.enable()
            for shard_id in shards[1:]:
                pipeline.execute_shard(ctx, broker, run_id, shard_id)
                pipeline.grade_shard(ctx, broker, run_id, shard_id)
            prof.disable()
            elapsed = time.monotonic() - start
    n = len(shards) - 1
    print(f"{n} shards in one process: {elapsed / n * 1000:.1f} ms per shard (execute + grade)")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=["instant", "latency", "profile"])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8, help="--workers of skill-eval run: shards in flight")
    parser.add_argument("--latency", type=float, default=1.0, help="latency case: seconds per model call")
    parser.add_argument("--tool-calls", type=int, default=0, help="shell tool calls per shard before the answer")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--worker-processes", type=int, default=None, help="--worker-processes of skill-eval run")
    parser.add_argument("--timeline", action="store_true", help="print calls in flight per second of each run")
    parser.add_argument("--warm", action="store_true", help="each run takes the warm spare the one before left")
    args = parser.parse_args(argv)
    compile_sources()

    if args.case == "profile":
        return profile(args.cases, args.epochs)
    latency = args.latency if args.case == "latency" else 0.0
    runs = []
    with tempfile.TemporaryDirectory(prefix="skill-eval-bench-") as tmp, work_root() as work:
        root = Path(tmp)
        repo = make_corpus_repo(root / "repo", cases=args.cases)
        with OfflineModelServer(workload(latency, args.tool_calls)) as model:
            for i in range(args.repeat):
                m = run_command(
                    repo,
                    root,
                    work,
                    model,
                    epochs=args.epochs,
                    workers=args.workers,
                    latency_s=latency,
                    turns=args.tool_calls,
                    worker_processes=args.worker_processes,
                    warm=args.warm,
                )
                runs.append(m)
                print(
                    f"run {i + 1}: {m.shards} shards, {m.calls} calls in {m.wall_s:.1f} s; first call at"
                    f" {m.first_call_s:.2f} s; peak {m.peak_rss_mb:.0f} MB RSS / {m.peak_pss_mb:.0f} MB PSS",
                    flush=True,
                )
                if args.timeline:
                    print("  " + occupancy(m.timeline, args.workers), flush=True)
        stop_spares(root)
    return report(runs, args.case, args.workers, latency)


if __name__ == "__main__":
    sys.exit(main())
