"""Benchmark: a 2,000-shard sweep with an instant model on the embedded cluster, and where its time goes.

One ``skill-eval run`` command line, as a user types it, timed from just before the process
starts to its exit: 40 cases x 5 executor models x 10 epochs = 2,000 shards (the defaults),
each shard one executor call (the scripted agent answers at once, no tool call unless
``--tool-calls``) and one judge call, on the offline scripted server with zero latency (in
this process, outside the measured tree). Preflight (one call per model) and judge
calibration run as by default.

Reported per run:

* shards/s from the command's start, and between the first and the last model call;
* the peak memory of the command's process tree (``bench/proctree.py``: RSS and PSS);
* the CPU seconds each program of the tree used (``/proc``: utime + stime, sampled every
  0.25 s; the worker's reaped children, i.e. bwrap, the sandboxed commands and host git, come
  from its cutime + cstime), and the model server's (this process), per shard.

``--profile`` runs the command under ``py-spy record --subprocesses --gil`` (install it with
``.venv/bin/pip install py-spy``): a sample is taken only from the thread holding the GIL, so
the samples are where the Python processes spent their interpreter time. Each stack is put
in one component (``COMPONENTS``, first match wins) and the table gives ms per shard and
share, per process. py-spy pauses the process at each sample, so a profiled run is slower:
take throughput from runs without it.

Run::

    .venv/bin/python bench/bench_sweep.py --repeat 3               # throughput and memory, medians
    .venv/bin/python bench/bench_sweep.py --profile                # one run under py-spy, by component
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_pipeline import Measured, measured, work_root, workload
from bench.bytecode import compile_sources
from bench.proctree import Periodic, TreeWatch, _name, tree
from testkit.offline_server import OfflineModelServer
from tests.engine_support import EXECUTOR, JUDGE, SKILL, make_corpus_repo

ROOT = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")


WORKER_PROGRAMS = ("celery", "worker.prestart")
"""The worker process, by program name: spawned by the cluster, or started with the command."""


def _frames(*paths: str) -> re.Pattern[str]:
    """Frames of these files or packages, as py-spy names them: ``func (worker/workspace.py:12)``."""
    return re.compile("|".join(rf"\({re.escape(p)}" for p in paths))


COMPONENTS: list[tuple[str, re.Pattern[str]]] = [
    # Searched in a sample's whole stack, in this order; the first that matches names it.
    ("imports (start-up, lazy imports)", re.compile(r"_find_and_load|<frozen importlib")),
    ("reduce task (collect, score, write the summary)", re.compile(r"reduce \(worker/tasks\.py")),
    ("report writing (CLI)", _frames("producer/results/reports.py", "reducer/render")),
    ("Redis round trips, client side (state, leases, limiter, budget, queue)", _frames("redis/")),
    ("workspace materialise + remove", _frames("worker/workspace.py", "engine/snapshot.py", "worker/fixtures.py")),
    (
        "sandbox subprocesses (spawn, wait, read; final files)",
        _frames("worker/sandbox", "worker/executor/tools.py", "worker/executor/final_files.py", "subprocess.py"),
    ),
    ("store reads and writes", _frames("engine/store.py", "engine/records.py")),
    ("litellm call overhead (client, litellm, openai, httpx)", _frames("litellm/", "openai/", "httpx/", "httpcore/")),
    ("model client (limiter, retries, usage)", _frames("worker/models/")),
    ("judge rendering and parsing", _frames("worker/grading/", "prompts/")),
    ("executor loop and prompt", _frames("worker/executor/")),
    (
        "CLI: plan, snapshot, submit",
        _frames("producer/plan/planning.py", "producer/launch/submit.py", "producer/corpus/repo.py"),
    ),
    (
        "CLI: wait and progress",
        _frames("producer/launch/progress.py", "producer/launch/drive.py", "producer/launch/embedded.py"),
    ),
    ("state machine and glue (lifecycle, pipeline, tasks)", _frames("worker/", "engine/")),
    ("Celery and kombu (consumer, messages, pool)", _frames("celery/", "kombu/", "billiard/", "vine/")),
    # litellm runs its success callbacks on a thread pool of its own: frames named by file alone.
    ("litellm call overhead (client, litellm, openai, httpx)", re.compile(r"litellm_logging\.py|concurrent/futures")),
]
OTHER = "other"


@dataclass
class CpuWatch(Periodic):
    """CPU seconds of every process of the tree under ``root``, by program name."""

    root: int
    period_s: float = 0.25
    last: dict[int, tuple[str, int, float, float]] = field(default_factory=dict)
    """pid -> (name, parent pid, own seconds, reaped children's seconds), the latest sample."""
    redis_commands: dict[str, int] = field(default_factory=dict)
    """The embedded redis-server's calls per command (``INFO commandstats``), the latest poll."""
    _polled: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        for pid in tree(self.root):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            own = (int(fields[11]) + int(fields[12])) / _TICK
            children = (int(fields[13]) + int(fields[14])) / _TICK
            name = self.last[pid][0] if pid in self.last else _name(pid)
            self.last[pid] = (name, int(fields[1]), own, children)
            if name.startswith("redis-server") and time.monotonic() - self._polled > 1.0:
                self._poll_redis(name.split()[-1])

    def _poll_redis(self, address: str) -> None:
        """Count the server's commands, so round trips per shard can be told (a few polls a second)."""
        import redis

        self._polled = time.monotonic()
        try:
            host, port = address.rsplit(":", 1)
            stats = redis.Redis(host=host, port=int(port), socket_timeout=1).info("commandstats")
        except (redis.RedisError, ValueError):
            return
        self.redis_commands = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}

    def by_program(self) -> dict[str, float]:
        """Seconds per program; the celery worker's reaped children apart (sandbox, git)."""
        out: Counter[str] = Counter()
        workers = {pid for pid, (name, *_) in self.last.items() if name in WORKER_PROGRAMS}
        for pid, (name, _, own, children) in self.last.items():
            if self._below(pid, workers):
                continue  # counted in the worker's cutime once reaped
            out[name.split()[0]] += own  # redis-server's title carries its port
            if pid in workers:
                out["worker's children: bwrap, sandboxed commands, git"] += children
        return dict(out)

    def _below(self, pid: int, ancestors: set[int]) -> bool:
        """Whether ``pid`` descends from one of ``ancestors`` (by the parents seen in the samples)."""
        parent = self.last[pid][1]
        for _ in range(64):
            if parent in ancestors:
                return True
            if parent not in self.last:
                return False
            parent = self.last[parent][1]
        return False


@dataclass(frozen=True)
class Swept(Measured):
    """One sweep: bench_pipeline's figures, plus CPU by program and Redis commands by name."""

    cpu_s: dict[str, float]
    redis_commands: dict[str, int]


def command(repo: Path, root: Path, model: OfflineModelServer, args: argparse.Namespace) -> list[str]:
    tag = f"{time.monotonic_ns()}"
    argv = [str(Path(sys.executable).parent / "skill-eval"), "run", SKILL, "--repo", str(repo)]
    for i in range(args.models):
        argv += ["--model", f"{EXECUTOR}-{i + 1}"]
    argv += ["--judge", JUDGE, "--epochs", str(args.epochs), "--api-base", model.base_url]
    argv += ["--workers", str(args.workers), "--max-turns", str(args.tool_calls + 2)]
    return [*argv, "--out", str(root / f"reports-{tag}"), "--store", str(root / f"store-{tag}")]


def run_once(
    repo: Path, root: Path, work: Path, model: OfflineModelServer, args: argparse.Namespace, spy: Path | None
) -> Swept:
    """One sweep from a fresh store; raise SystemExit unless every shard was graded."""
    model.reset()
    argv = command(repo, root, model, args)
    if spy is not None:
        argv = [str(Path(sys.executable).parent / "py-spy"), "record", "--subprocesses", "--gil"]
        argv += [
            "--rate",
            str(args.rate),
            "--format",
            "raw",
            "--output",
            str(spy),
            "--",
            *command(repo, root, model, args),
        ]
    env = {**os.environ, "SKILL_EVAL_WORKDIR": str(work), "SKILL_EVAL_RUN_LOG": str(root / "runs.log")}
    env.pop("SKILL_EVAL_BROKER_URL", None)
    cpu_before = time.process_time()
    started = time.time()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    memory, cpu = TreeWatch(proc.pid).start(), CpuWatch(proc.pid).start()
    try:
        stdout, stderr = proc.communicate(timeout=3600)
    finally:
        memory.stop()
        cpu.stop()
    wall = time.monotonic() - t0
    if proc.returncode != 0 or "not graded (infra): none" not in stdout:
        raise SystemExit(f"run failed (exit {proc.returncode}):\n{stdout[-3000:]}\n{stderr[-3000:]}")
    shards = args.cases * args.models * args.epochs
    spent = cpu.by_program()
    spent.pop("py-spy", None)
    spent["model server and samplers (this process, outside the tree)"] = time.process_time() - cpu_before
    run = measured(
        model, started, wall, shards, memory.peak_rss / 2**20, memory.peak_pss / 2**20, memory.peak_processes
    )
    return Swept(**{f.name: getattr(run, f.name) for f in fields(run)}, cpu_s=spent, redis_commands=cpu.redis_commands)


def component(stack: str) -> str:
    return next((name for name, pattern in COMPONENTS if pattern.search(stack)), OTHER)


def read_spy(path: Path) -> dict[str, Counter[str]]:
    """py-spy's raw output: samples per component, per process (``worker`` or ``CLI``)."""
    text = path.read_text(errors="replace")
    out: dict[str, Counter[str]] = {}
    for match in re.finditer(r"(?ms)^(process \d+:.*?) (\d+)$", text):
        stack, count = match.group(1), int(match.group(2))
        frames = re.split(r";(?=process \d+:)", stack)
        header = frames[-1].split(";", 1)[0]
        who = "worker" if any(p in header for p in WORKER_PROGRAMS) else "CLI"
        out.setdefault(who, Counter())[component(frames[-1])] += count
    return out


def print_run(i: int, m: Swept) -> None:
    print(
        f"run {i}: {m.shards} shards, {m.calls} calls in {m.wall_s:.1f} s ({m.shards / m.wall_s:.1f} shards/s;"
        f" {m.shards / m.model_phase_s:.1f} in the model phase); first call {m.first_call_s:.1f} s,"
        f" last reply to exit {m.tail_s:.1f} s; peak {m.peak_rss_mb:.0f} MB RSS / {m.peak_pss_mb:.0f} MB PSS",
        flush=True,
    )


def report(runs: list[Swept]) -> None:
    med = {k: statistics.median(getattr(r, k) for r in runs) for k in ("wall_s", "model_phase_s", "first_call_s")}
    med |= {k: statistics.median(getattr(r, k) for r in runs) for k in ("tail_s", "peak_rss_mb", "peak_pss_mb")}
    shards = runs[0].shards
    print(
        f"median of {len(runs)}: {shards} shards in {med['wall_s']:.1f} s = {shards / med['wall_s']:.1f} shards/s"
        f" from the command's start; {shards / med['model_phase_s']:.1f} shards/s between the first and the last"
        f" model call; first call {med['first_call_s']:.1f} s; last reply to exit {med['tail_s']:.1f} s;"
        f" peak {med['peak_rss_mb']:.0f} MB RSS / {med['peak_pss_mb']:.0f} MB PSS"
    )
    names = sorted(
        {n for r in runs for n in r.cpu_s}, key=lambda n: -statistics.median(r.cpu_s.get(n, 0) for r in runs)
    )
    total = statistics.median(sum(r.cpu_s.values()) for r in runs)
    print(
        f"CPU per shard by program (median; all: {total / shards * 1000:.1f} ms/shard on 2 cores,"
        f" wall {med['wall_s'] / shards * 1000:.1f} ms/shard):"
    )
    for name in names:
        s = statistics.median(r.cpu_s.get(name, 0.0) for r in runs)
        print(f"  {name:<60} {s / shards * 1000:7.2f} ms/shard  {s / total:6.1%}")


def report_redis(runs: list[Swept]) -> None:
    shards = runs[0].shards
    total = statistics.median(sum(r.redis_commands.values()) for r in runs)
    print(f"Redis commands (last poll, <= 1 s before the server stopped): {total / shards:.1f} per shard")
    top = Counter(runs[-1].redis_commands).most_common(12)
    print("  " + ", ".join(f"{name} {n / shards:.1f}" for name, n in top))


def report_spy(spy: Path, shards: int, rate: int) -> None:
    for who, counts in read_spy(spy).items():
        total = sum(counts.values())
        print(
            f"py-spy --gil, {who}: {total} samples = {total / rate:.1f} s holding the GIL,"
            f" {total / rate / shards * 1000:.2f} ms/shard"
        )
        for name, n in counts.most_common():
            print(f"  {name:<72} {n / rate / shards * 1000:7.2f} ms/shard  {n / total:6.1%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--models", type=int, default=5, help="executor models (scripted alike)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8, help="--workers of skill-eval run: shards in flight")
    parser.add_argument("--tool-calls", type=int, default=0, help="shell tool calls per shard before the answer")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="run under py-spy and break the time down")
    parser.add_argument("--rate", type=int, default=50, help="py-spy samples per second")
    parser.add_argument("--keep", type=Path, help="--profile: also keep py-spy's raw output here")
    args = parser.parse_args(argv)
    compile_sources()

    runs = []
    with tempfile.TemporaryDirectory(prefix="skill-eval-sweep-") as tmp, work_root() as work:
        root = Path(tmp)
        repo = make_corpus_repo(root / "repo", cases=args.cases)
        spy = (args.keep or root / "spy.txt") if args.profile else None
        with OfflineModelServer(workload(0.0, args.tool_calls)) as model:
            for i in range(args.repeat):
                runs.append(run_once(repo, root, work, model, args, spy))
                print_run(i + 1, runs[-1])
        report(runs)
        report_redis(runs)
        if spy is not None:
            report_spy(spy, runs[-1].shards, args.rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
