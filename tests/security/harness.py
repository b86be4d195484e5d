"""The real pipeline, synchronously: producer loading, snapshot, run state in a real Redis,
workspace, bubblewrap, the agent loop and the judge over HTTP to the offline server, the
reducer and the Markdown renderer. Only Celery is left out: the follow-up tasks each step
asks for are run in order here, in this process.

Attack tests build a crafted repo and a scenario that scripts the malicious agent or judge,
run it through :func:`run_pipeline`, then check the host, the verdict and the report.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.broker import InProcessBroker
from engine.settings import Settings
from engine.state import RunState
from engine.store import LocalStore
from producer.corpus.repo import Repo
from producer.launch.submit import build_manifest, submit
from producer.plan.planning import plan_run
from reducer.render import render_markdown
from schemas.constants import QUEUE_EXECUTE, QUEUE_GRADE
from schemas.manifest import RunSettings, grade_key, outcome_key, result_key, trajectory_key
from schemas.model_config import parse_model_config
from schemas.report import RunResult
from schemas.shard import CURRENT, baseline_variant
from schemas.status import SandboxMode
from schemas.trajectory import Trajectory
from schemas.verdict import ShardGrade
from testkit.offline_server import OfflineModelServer
from worker.context import Context
from worker.pipeline import execute_shard, grade_shard, reduce_stored_run

GIT = ["git", "-c", "user.name=Ada", "-c", "user.email=ada@example.invalid", "-c", "commit.gpgsign=false"]
EXECUTOR, JUDGE = "openai/exec-a", "openai/judge"
RUN_ID = "20260101-000000-5ec0000d"


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


def make_repo(
    path: Path, skill: str, cases: list[dict[str, Any]], *, skill_text: str | None = None, commit: bool = True
) -> Path:
    """A skill repo: README, ``skills/<skill>/SKILL.md``, ``evals/<skill>.evals.json``; committed on main."""
    path.mkdir(parents=True)
    (path / "README.md").write_text("# crafted repo\n\nline one\nline two\n")
    (path / "skills" / skill).mkdir(parents=True)
    (path / "skills" / skill / "SKILL.md").write_text(skill_text or f"# {skill}\n\nDo what the user asks.\n")
    (path / "evals").mkdir()
    (path / "evals" / f"{skill}.evals.json").write_text(json.dumps({"skill_name": skill, "evals": cases}, indent=2))
    if commit:
        git(path, "init", "-q", "-b", "main")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "crafted repo")
    return path


def case(case_id: int, prompt: str, assertions: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "id": case_id,
        "prompt": prompt,
        "expected_output": "The agent does what the prompt asks and nothing else.",
        "files": ["README.md"],
        "assertions": assertions,
        **extra,
    }


def shell_agent(marker: str, commands: list[str]) -> dict[str, Any]:
    """An executor rule: for the case whose prompt holds ``marker``, run ``commands`` in the shell."""
    replies: list[dict[str, Any]] = [{"tool_calls": [{"name": "shell", "arguments": {"command": c}}]} for c in commands]
    replies.append({"text": "(scripted) done."})
    return {"name": marker, "tools": True, "contains": marker, "replies": replies}


@dataclass
class PipelineRun:
    result: RunResult
    report: str
    trajectories: dict[str, Trajectory]
    grades: dict[str, ShardGrade]
    outcomes: dict[str, dict[str, str]]
    requests: list[dict[str, Any]]
    """Every request the offline model server received (executor and judge)."""

    def transcript_sent_to_judges(self) -> str:
        return "\n".join(
            m.get("content") or ""
            for r in self.requests
            if not r.get("tools")
            for m in r.get("messages", [])
            if isinstance(m.get("content"), str)
        )


def run_pipeline(
    repo: Path,
    skill: str,
    *,
    server: OfflineModelServer,
    redis_url: str,
    work: Path,
    fail_under: float | None = None,
    strict_evidence: bool = False,
    compare: str | None = None,
    transport: str = "auto",
) -> PipelineRun:
    """Load, plan, snapshot, submit, execute, grade and reduce one skill's corpus; return what came out.

    ``transport``: how every model call travels (the model config's ``transport``)."""
    bundle = Repo(repo).load(f"evals/{skill}.evals.json")
    variants = [CURRENT] if compare is None else [CURRENT, baseline_variant(compare)]
    plan = plan_run(RUN_ID, [bundle], [EXECUTOR], judges=[JUDGE], variants=variants, sandbox=SandboxMode.BWRAP)
    api_base = server.base_url
    store = LocalStore(work / "store")
    models = parse_model_config(
        {"retry": {"max_attempts": 2, "base_delay_s": 0.0, "max_delay_s": 0.05}, "defaults": {"transport": transport}},
        api_base_override=api_base,
    )
    settings = RunSettings(
        models=models.model_dump(mode="json"), calibrate=False, fail_under=fail_under, strict_evidence=strict_evidence
    )
    manifest = build_manifest(plan, repo, store, settings, out_dir=str(work / "out"), skipped=[])
    ctx = Context(
        Settings(store=str(work / "store"), workdir=work / "work", sandbox=SandboxMode.BWRAP, broker_url=redis_url)
    )
    broker = InProcessBroker()
    submit(manifest, store, RunState(ctx.redis), functools.partial(broker.send, QUEUE_EXECUTE))
    while (message := broker.take()) is not None:
        queue, run_id, shard_id = message
        if queue == QUEUE_EXECUTE:
            execute_shard(ctx, broker, run_id, shard_id or "")
        elif queue == QUEUE_GRADE:
            grade_shard(ctx, broker, run_id, shard_id or "")
        else:
            reduce_stored_run(ctx, run_id)
    result = RunResult.model_validate_json(store.get(result_key(RUN_ID)))
    trajectories, grades, outcomes = {}, {}, {}
    for shard in plan.shards:
        sid = shard.shard_id
        if store.exists(trajectory_key(RUN_ID, sid)):
            trajectories[sid] = Trajectory.model_validate_json(store.get(trajectory_key(RUN_ID, sid)))
        if store.exists(grade_key(RUN_ID, sid)):
            grades[sid] = ShardGrade.model_validate_json(store.get(grade_key(RUN_ID, sid)))
        if store.exists(outcome_key(RUN_ID, sid)):
            outcomes[sid] = json.loads(store.get(outcome_key(RUN_ID, sid)))
    report = render_markdown(result, skill, {"repo": str(repo)})
    return PipelineRun(result, report, trajectories, grades, outcomes, server.requests())


# A reader (a model) takes any of these for a line break; a turn marker after one looks real.
LINE_START = r"(?:\A|(?<=[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]))"


def reader_sees_call(command_part: str, *, expect: str = "present", contains: str | None = None) -> dict[str, str]:
    """A judge rule deciding like a reader who trusts any line that *looks* like a shell call of ``command_part``."""
    return {
        "assertion_contains": contains or command_part,
        "transcript_regex": LINE_START + r"\[tool_call\] shell\(.*" + re.escape(command_part),
        "expect": expect,
    }


def scripted_judge_answer(text: str) -> dict[str, Any]:
    """An executor-less rule that answers every grading request with ``text`` (a malicious judge)."""
    return {"name": "judge", "tools": False, "contains": "<transcript-", "replies": [{"text": text}]}
