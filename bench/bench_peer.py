"""Benchmark: skill-eval beside Inspect AI on the same workload, against one offline model server.

The workload (the same for both tools, medians of ``--repeat`` runs each, the tools alternating):
``--samples`` samples, each an agent that makes three shell tool calls and then answers, plus
one judge call grading it; every model call takes ``--latency`` seconds; ``--concurrency``
samples in flight.

* skill-eval: ``skill-eval run`` on the embedded cluster (bench/bench_pipeline.py's workload:
  the built-in agent in bwrap, the hardened judge, judge calibration as by default).
* Inspect AI (``inspect-ai`` pinned below, in its own virtual environment under
  ``bench/.peer/``, git-ignored, installed on first use): ``react(tools=[bash()])`` in the local
  sandbox, ``model_graded_qa`` as the scorer, ``--max-samples``, ``--max-connections`` and
  ``--max-subprocesses`` set to the concurrency. It gets a clean ``HOME``, so the login shell of
  its bash tool does not pay for the host's profile.

Both talk to one testkit server over HTTP (scripted: it answers by model name), so the model
side is identical. Printed per tool: wall time from the command's start, seconds to the first
model call, peak memory of the command's process tree (RSS and PSS, bench/proctree.py); and the
ratio of the walls.

Run::

    .venv/bin/python bench/bench_peer.py --concurrency 8 --latency 1 --repeat 3
    .venv/bin/python bench/bench_peer.py --concurrency 16 --latency 1 --repeat 3
    .venv/bin/python bench/bench_peer.py --concurrency 16 --latency 1 --repeat 3 --warm

``--warm``: skill-eval's runs take the warm spare the run before left (producer/launch/warm.py), as a
user's second and later commands do; the spare's import is waited out before Inspect runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_pipeline import run_command, stop_spares, work_root, workload
from bench.bytecode import compile_sources
from bench.proctree import run_watched
from testkit.offline_server import OfflineModelServer
from tests.engine_support import make_corpus_repo

ROOT = Path(__file__).resolve().parent.parent
PEER_DIR = ROOT / "bench" / ".peer"
INSPECT_VERSION = "0.3.285"
INSPECT_EXECUTOR = "scripted-inspect-executor"
INSPECT_JUDGE = "scripted-inspect-judge"
TOOL_CALLS = 3

TASK = """
from inspect_ai import Task, task
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.scorer import model_graded_qa
from inspect_ai.tool import bash


@task
def peer(samples: int = 96) -> Task:
    prompts = [f"Case {i + 1}: please answer in one line." for i in range(samples)]
    return Task(
        dataset=[Sample(input=prompt, target="BENCH-DONE") for prompt in prompts],
        solver=react(tools=[bash()]),
        scorer=model_graded_qa(model="openai-api/offline/JUDGE"),
        sandbox="local",
    )
""".replace("JUDGE", INSPECT_JUDGE)


def inspect_venv() -> Path:
    """``bench/.peer/venv`` with inspect-ai installed (created on first use)."""
    venv = PEER_DIR / "venv"
    marker = venv / f".inspect-{INSPECT_VERSION}"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(venv / "bin" / "pip"), "install", "-q", f"inspect-ai=={INSPECT_VERSION}", "openai"]
        subprocess.run(pip, check=True)
        marker.touch()
    return venv


def peer_workload(latency_s: float) -> dict[str, Any]:
    """bench_pipeline's workload, plus the same conversation for Inspect's tool and judge names."""
    delay: dict[str, Any] = {"delay_s": latency_s} if latency_s else {}
    steps = [
        {"tool_calls": [{"name": "bash", "arguments": {"cmd": f"echo step {i + 1} && ls"}}], **delay}
        for i in range(TOOL_CALLS)
    ]
    answer = {"tool_calls": [{"name": "submit", "arguments": {"answer": "BENCH-DONE: answered"}}], **delay}
    scenario = workload(latency_s, TOOL_CALLS)
    scenario["rules"] = [
        {"name": "inspect-executor", "model": INSPECT_EXECUTOR, "replies": [*steps, answer]},
        {"name": "inspect-judge", "model": INSPECT_JUDGE, "replies": [{"text": "GRADE: C", **delay}]},
        *scenario["rules"],
    ]
    return scenario


@dataclass(frozen=True)
class Run:
    wall_s: float
    first_call_s: float
    calls: int
    peak_rss_mb: float
    peak_pss_mb: float


def run_inspect(
    venv: Path, root: Path, model: OfflineModelServer, *, samples: int, concurrency: int, latency_s: float
) -> Run:
    """One ``inspect eval`` of the peer task; raise SystemExit unless every sample scored correct."""
    model.reset()
    home = Path(tempfile.mkdtemp(prefix="home-", dir=root))  # a clean HOME: no profile for the login shell
    logs = Path(tempfile.mkdtemp(prefix="logs-", dir=root))
    task_file = root / "peer_task.py"
    task_file.write_text(TASK)
    argv = [
        str(venv / "bin" / "inspect"),
        "eval",
        task_file.name,  # relative: inspect globs it under its working folder
        "-T",
        f"samples={samples}",
        "--model",
        f"openai-api/offline/{INSPECT_EXECUTOR}",  # the generic OpenAI-compatible provider: chat completions
        "--max-samples",
        str(concurrency),
        "--max-connections",
        str(concurrency),
        "--max-subprocesses",
        str(concurrency),
        "--log-dir",
        str(logs),
        "--log-format",
        "json",
        "--display",
        "none",
    ]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "OFFLINE_BASE_URL": model.base_url,
        "OFFLINE_API_KEY": "offline-no-key",
        "INSPECT_LOG_DIR": str(logs),
    }
    done = run_watched(argv, env=env, cwd=root)
    stats = model.stats()
    results = [json.loads(p.read_text()) for p in logs.glob("*.json")]
    accuracy = None
    if results:
        scores = results[0].get("results", {}).get("scores", [])
        accuracy = scores[0]["metrics"]["accuracy"]["value"] if scores else None
    if done.returncode != 0 or accuracy != 1.0:
        for r in results:
            print(json.dumps(r.get("error") or r.get("results"))[:2000], file=sys.stderr)
            for sample in r.get("samples", [])[:1]:
                print(json.dumps(sample.get("messages"))[:3000], sample.get("scores"), file=sys.stderr)
        raise SystemExit(f"inspect failed (exit {done.returncode}, accuracy {accuracy}):\n{done.stderr[-3000:]}")
    return Run(
        done.wall_s,
        float(stats["first_request_at"]) - done.started,
        int(stats["ok"]),
        done.peak_rss_mb,
        done.peak_pss_mb,
    )


def median_run(runs: list[Run]) -> Run:
    return Run(*(statistics.median(getattr(r, f) for r in runs) for f in Run.__dataclass_fields__))


def show(name: str, r: Run, ideal: float) -> None:
    vs_ideal = f" ({r.wall_s / ideal:.2f}x ideal)" if ideal > 0 else ""
    print(
        f"{name:>13}: wall {r.wall_s:6.1f} s{vs_ideal}, first model call {r.first_call_s:5.2f} s,"
        f" {r.calls} calls, peak {r.peak_rss_mb:5.0f} MB RSS / {r.peak_pss_mb:5.0f} MB PSS"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=96)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["both", "skill-eval", "inspect"], default="both")
    parser.add_argument("--warm", action="store_true", help="skill-eval takes the warm spare its run before left")
    args = parser.parse_args(argv)
    compile_sources()
    if args.samples % 16:
        parser.error("--samples must be a multiple of 16 (skill-eval runs 16 cases x samples/16 epochs)")

    venv = inspect_venv() if args.only != "skill-eval" else None
    ours: list[Run] = []
    theirs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="skill-eval-peer-") as tmp, work_root() as work:
        root = Path(tmp)
        repo = make_corpus_repo(root / "repo", cases=16)
        with OfflineModelServer(peer_workload(args.latency)) as model:
            for i in range(args.repeat):
                if args.only != "inspect":
                    m = run_command(
                        repo,
                        root,
                        work,
                        model,
                        epochs=args.samples // 16,
                        workers=args.concurrency,
                        latency_s=args.latency,
                        turns=TOOL_CALLS,
                        warm=args.warm,
                    )
                    ours.append(Run(m.wall_s, m.first_call_s, m.calls, m.peak_rss_mb, m.peak_pss_mb))
                    show(f"skill-eval #{i + 1}", ours[-1], m.calls * args.latency / args.concurrency)
                if venv is not None:
                    r = run_inspect(
                        venv, root, model, samples=args.samples, concurrency=args.concurrency, latency_s=args.latency
                    )
                    theirs.append(r)
                    show(f"inspect #{i + 1}", r, r.calls * args.latency / args.concurrency)
        stop_spares(root)
    print(
        f"medians of {args.repeat}, {args.samples} samples, concurrency {args.concurrency}, latency {args.latency:g} s:"
    )
    if ours:
        o = median_run(ours)
        show("skill-eval", o, o.calls * args.latency / args.concurrency)
    if theirs:
        t = median_run(theirs)
        show("inspect", t, t.calls * args.latency / args.concurrency)
    if ours and theirs:
        print(f"wall ratio skill-eval / inspect: {o.wall_s / t.wall_s:.2f} (target <= 1.00)")
        return 0 if o.wall_s <= t.wall_s else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
