"""``make bench``: every speed benchmark in turn, its output written to docs/benchmarks/latest.md.

The figures a reader finds in the docs are what the benchmarks printed on the machine that ran
them, with the machine, its load and the commit beside them; nobody copies numbers by hand.
Each benchmark runs as its own process (its start-up is part of what some of them measure);
one that fails is recorded with its exit code and the rest still run.

Run: ``.venv/bin/python bench/suite.py [--only NAME ...] [--out docs/benchmarks/latest.md]``; the
outcomes are kept beside the page (``latest.json``), so ``--only`` replaces just those benchmarks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAIL_LINES = 30
"""Lines of a benchmark's output kept in the page: each prints its summary last."""


@dataclass(frozen=True)
class Bench:
    name: str
    target: str
    args: tuple[str, ...]


def _pipeline(workers: int) -> Bench:
    """96 shards of three tool calls and an answer at 1 s per model call, ``workers`` in flight."""
    args = ("--latency", "1", "--workers", str(workers), "--tool-calls", "3", "--cases", "16", "--epochs", "6")
    return Bench(f"pipeline-{workers}", "<= 1.10x the ideal", ("bench_pipeline.py", "latency", *args, "--repeat", "3"))


BENCHES = (
    Bench("workspace", "workspace <= 150 ms, sandboxed command <= 20 ms", ("bench_workspace.py",)),
    Bench("transcript", "judge's view of a 1 MB trajectory < 50 ms", ("bench_transcript.py", "--repeat", "7")),
    Bench("model-call", "(measured: client CPU per call)", ("bench_model_call.py", "--threads", "16", "--calls", "50")),
    Bench("limiter", "429s <= 1%, >= 90% of the ceiling", ("bench_limiter.py",)),
    Bench(
        "proxy",
        "added latency per streamed request <= 2 ms median; harness start-up (measured)",
        (
            "bench_proxy.py",
            "--shards",
            "5",
            "--harness",
            "claude-code",
            "--harness",
            "codex",
            "--harness",
            "opencode",
            "--harness",
            "gemini-cli",
            "--harness",
            "copilot-cli",
        ),
    ),
    Bench("enqueue", "100,000 shards <= 60 s, <= 2 KB Redis each", ("bench_enqueue.py",)),
    Bench("reduce", "1,000,000 outcomes <= 60 s, < 500 MB", ("bench_reduce.py",)),
    Bench(
        "reduce-s3",
        "a few hundred requests per million outcomes",
        ("bench_reduce.py", "--cases", "50", "--models", "10", "--epochs", "10", "--s3"),
    ),
    Bench("paired", "4,000 shards with paired tests <= 2 s", ("bench_paired.py",)),
    Bench("viewer", "(measured: page and API latency)", ("bench_viewer.py",)),
    Bench(
        "startup",
        "(measured: a run's start to its first call)",
        ("bench_startup.py", "--concurrency", "1", "8", "16", "32", "--repeat", "3"),
    ),
    *(_pipeline(workers) for workers in (16, 8)),
    Bench(
        "sweep",
        ">= 25 shards/s",
        ("bench_sweep.py", "--workers", "16", "--cases", "20", "--epochs", "10", "--repeat", "3"),
    ),
    Bench(
        "peer",
        "faster than Inspect AI on the same workload",
        ("bench_peer.py", "--concurrency", "16", "--latency", "1", "--repeat", "3"),
    ),
    Bench("chaos", "0 shards lost, 0 counted twice, the fault-free result", ("bench_chaos.py",)),
)


@dataclass(frozen=True)
class Outcome:
    """One benchmark's run: its exit, wall clock and the end of its output, and where and when it ran."""

    name: str
    target: str
    command: str
    code: int
    seconds: float
    tail: list[str]
    started: str
    commit: str
    load: str
    """The load average before and after it (1 min): above the core count, other work shared the machine."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _load1() -> float:
    return os.getloadavg()[0]


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def run_one(bench: Bench) -> Outcome:
    print(f"== {bench.name}: {' '.join(bench.args)}", flush=True)
    started, before, t0 = _now(), _load1(), time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / bench.args[0]), *bench.args[1:]],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    seconds = time.monotonic() - t0
    sys.stdout.write(proc.stdout)
    return Outcome(
        name=bench.name,
        target=bench.target,
        command=".venv/bin/python bench/" + " ".join(bench.args),
        code=proc.returncode,
        seconds=seconds,
        tail=proc.stdout.rstrip("\n").splitlines()[-TAIL_LINES:],
        started=started,
        commit=_commit(),
        load=f"{before:.1f} -> {_load1():.1f}",
    )


def merged(kept: list[Outcome], new: list[Outcome]) -> list[Outcome]:
    """The page's benchmarks after a run of some of them: the new outcomes replace the old ones by
    name, the rest stay as they were measured; in the suite's order."""
    by_name = {o.name: o for o in kept} | {o.name: o for o in new}
    order = [b.name for b in BENCHES]
    return sorted(by_name.values(), key=lambda o: order.index(o.name) if o.name in order else len(order))


def render(outcomes: list[Outcome], *, machine: str) -> str:
    """The page: a table of every benchmark with its exit and when and where it ran, then each one's
    own summary, verbatim."""
    lines = [
        "# Benchmarks: the latest `make bench`",
        "",
        "Written by `bench/suite.py` (run by `make bench`; `--only NAME` runs some again and keeps",
        "the others as they were measured); do not edit by hand. Each section is the end of what the",
        f"benchmark printed (its last {TAIL_LINES} lines). Targets and how to read the figures:",
        "docs/benchmarks.md. The load average is the machine's (1 min) before and after each",
        "benchmark; above the core count, other work shared the machine and the figures are slower",
        "than the code alone.",
        "",
        f"Machine: {machine}.",
        "",
        "| benchmark | target | exit | wall clock (s) | measured (UTC), commit, load | command |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        status = "ok" if o.code == 0 else f"FAILED ({o.code})"
        when = f"{o.started}, {o.commit}, {o.load}"
        lines.append(f"| {o.name} | {o.target} | {status} | {o.seconds:.0f} | {when} | `{o.command}` |")
    for o in outcomes:
        lines += ["", f"## {o.name}", "", "```text", *o.tail, "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=[b.name for b in BENCHES], help="these benchmarks only")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "latest.md")
    args = parser.parse_args()
    record = args.out.with_suffix(".json")
    kept = [Outcome(**o) for o in json.loads(record.read_text())] if args.only and record.exists() else []
    new = [run_one(b) for b in BENCHES if not args.only or b.name in args.only]
    outcomes = merged(kept, new)
    machine = f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")
    args.out.write_text(render(outcomes, machine=machine))
    print(f"written: {args.out} (and {record.name})")
    return 0 if all(o.code == 0 for o in new) else 1


if __name__ == "__main__":
    sys.exit(main())
