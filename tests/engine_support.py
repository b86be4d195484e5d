"""Helpers for engine fault tests and the pipeline benchmark: a generated corpus repo, a scripted
model scenario, real ``celery worker`` nodes, and submitting a run straight onto the queues.

Everything here is real: a git repo on disk, the offline model server over HTTP, redis-server,
Celery worker subprocesses running ``worker.tasks`` with the bwrap sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import redis

from engine import node as worker_node
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from producer.corpus.repo import Repo
from producer.launch.cluster import task_sender
from producer.launch.submit import build_manifest, submit
from producer.plan.planning import new_run_id, plan_run
from schemas.constants import ALL_QUEUES, QUEUE_EXECUTE
from schemas.manifest import AgentBudget, RunManifest, RunSettings
from schemas.model_config import ModelConfig

ROOT = Path(__file__).resolve().parent.parent
SKILL = "bench-skill"
EXECUTOR = "openai/scripted-bench-executor"
JUDGE = "openai/scripted-bench-judge"
FINAL_TEXT = "BENCH-DONE: the scripted executor answered"
ASSERTIONS = (
    "The agent writes BENCH-DONE in its final answer",
    "The agent outputs a final answer that contains the word answered",
)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def make_corpus_repo(root: Path, cases: int = 4, skill: str = SKILL) -> Path:
    """A git repo with one skill and a corpus of ``cases`` cases of two assertions each."""
    skill_dir = root / "skills" / skill
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text(
        f"---\nname: {skill}\ndescription: Answer the user in one line.\n---\n\n# {skill}\n\nAnswer briefly.\n"
    )
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main() -> int:\n    return 0\n")
    evals = [
        {
            "id": i + 1,
            "prompt": f"Case {i + 1}: please answer in one line.",
            "expected_output": "A one-line answer.",
            "files": ["src/app.py"],
            "assertions": list(ASSERTIONS),
        }
        for i in range(cases)
    ]
    (root / "evals").mkdir()
    (root / "evals" / f"{skill}.evals.json").write_text(json.dumps({"skill_name": skill, "evals": evals}, indent=2))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "corpus")
    return root


def scenario(executor_delay_s: float = 0.0, judge_delay_s: float = 0.0) -> dict[str, Any]:
    """The executor answers FINAL_TEXT in one turn; the rule-based judge passes both assertions."""
    judge_reply: dict[str, Any] = {"delay_s": judge_delay_s} if judge_delay_s else {}
    executor_reply: dict[str, Any] = {"text": FINAL_TEXT}
    if executor_delay_s:
        executor_reply["delay_s"] = executor_delay_s
    return {
        "rules": [
            {"name": "judge", "judge": True, "tools": False, "contains": "<transcript-", "replies": [judge_reply]},
            {"name": "executor", "tools": True, "replies": [executor_reply]},
        ],
        "judge": [
            {"assertion_contains": "BENCH-DONE", "transcript_regex": "BENCH-DONE"},
            {"assertion_contains": "the word answered", "transcript_regex": "answered"},
        ],
    }


def plan_manifest(
    repo: Path,
    settings: Settings,
    api_base: str,
    *,
    budget: AgentBudget,
    epochs: int = 1,
    max_tokens: int | None = None,
    run_id: str | None = None,
) -> RunManifest:
    """Plan the repo's one corpus against ``api_base`` (no calibration) and store its snapshot.

    ``run_id``: plan under this id (two producers of one run); a new one by default.
    """
    r = Repo(repo)
    bundles = [o.bundle for o in r.load_many(r.targets([SKILL], False)) if o.bundle]
    plan = plan_run(
        run_id or new_run_id(), bundles, [EXECUTOR], judges=[JUDGE], epochs=epochs, sandbox=settings.sandbox
    )
    run_settings = RunSettings(
        budget=budget, calibrate=False, max_tokens=max_tokens, models=ModelConfig(api_base_override=api_base)
    )
    return build_manifest(plan, r.root, open_store(settings.store), run_settings, out_dir="", skipped=[])


def submit_run(
    repo: Path, settings: Settings, api_base: str, *, epochs: int = 1, wall_clock_s: float = 120.0
) -> RunManifest:
    """Plan the repo's one corpus and put its shards on the cluster's queues (no calibration)."""
    budget = AgentBudget(max_turns=4, wall_clock_s=wall_clock_s, command_timeout_s=30)
    manifest = plan_manifest(repo, settings, api_base, budget=budget, epochs=epochs)
    store = open_store(settings.store)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    enqueue = task_sender(settings, manifest)
    submit(
        manifest, store, state, lambda run_id, shard_id: enqueue.send(QUEUE_EXECUTE, run_id, shard_id), enqueue.batch
    )
    return manifest


def wait_until(predicate: Any, timeout_s: float, poll_s: float = 0.1, what: str = "condition") -> float:
    """Poll ``predicate`` until true; the seconds waited. Raise TimeoutError naming ``what``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        try:
            if predicate():
                return time.monotonic() - start
        except redis.ConnectionError:
            pass  # Redis restarting under a fault test
        time.sleep(poll_s)
    raise TimeoutError(f"{what}: not reached within {timeout_s}s")


def worker_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "SKILL_EVAL_BROKER_URL": settings.broker_url or "",
        "SKILL_EVAL_STORE": settings.store,
        "SKILL_EVAL_WORKDIR": str(settings.workdir),
        "SKILL_EVAL_SANDBOX": settings.sandbox.value,
        "SKILL_EVAL_LEASE_TTL_S": str(settings.lease_ttl_s),
        "SKILL_EVAL_REAPER_PERIOD_S": str(settings.reaper_period_s),
        "SKILL_EVAL_UNSENT_GRACE_S": str(settings.unsent_grace_s),
        "SKILL_EVAL_REDELIVER_AFTER_S": str(settings.redeliver_after_s),
    }


class WorkerNode:
    """One worker node (engine/node.py: one process, shards on threads) in its own session."""

    def __init__(self, settings: Settings, name: str, log: Path, concurrency: int = 1) -> None:
        self.log = log
        cmd = worker_node.WorkerNode(ALL_QUEUES, concurrency, f"{name}@localhost", loglevel="INFO").command()
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd,
                env=worker_env(settings),
                cwd=ROOT,
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def ready(self) -> bool:
        return "ready." in self.log.read_text(errors="replace")

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def group(self) -> list[int]:
        """Processes of the node's process group, zombies included (a pid check sees those alive)."""
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.proc.pid:
                pids.append(int(stat.parent.name))
        return pids

    def kill(self) -> None:
        """SIGKILL the whole node at once: a host lost, nothing gets to clean up or requeue.

        Returns once every process of the node is gone, so a pid check sees them dead.
        """
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        wait_until(lambda: not self.group(), 10, poll_s=0.05, what="killed node's processes gone")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
