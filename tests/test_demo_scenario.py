"""The bundled demo scenario end to end: the real agent loop in a real sandbox, then the judge, over HTTP.

What the README demo promises: the scripted executor does real work in the example repo
(reads, edits, commits) and the scripted judge passes some assertions and fails others.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from schemas.corpus import Corpus, assertion_text
from schemas.model_config import parse_model_config
from testkit.offline_server import OfflineModelServer
from tests.executor_support import open_test_sandbox
from worker.executor.agent import run_agent
from worker.executor.prompt import ExecutorInputs
from worker.grading.transcript import build_grader_prompt, new_nonce, prepare_transcript
from worker.models.client import GatedModelClient
from worker.sandbox import SandboxLimits
from worker.workspace import materialize_workspace

pytestmark = pytest.mark.slow

EXECUTOR, JUDGE = "openai/scripted-demo", "openai/scripted-judge"
EXPECTED = {
    ("changelog-entry", 1): [True, True, True],
    ("changelog-entry", 2): [False, True],
    ("commit-message", 1): [True, True, True],
    ("commit-message", 2): [True, False, False],
}


@pytest.fixture(scope="module")
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer("demo") as running:
        yield running


@pytest.mark.parametrize(("skill", "case_id"), sorted(EXPECTED))
def test_the_demo_executor_does_real_work_and_the_demo_judge_grades_it(
    skill: str, case_id: int, server: OfflineModelServer, redis_client: redis.Redis, example_repo: Path, tmp_path: Path
) -> None:
    config = parse_model_config({"retry": {"max_attempts": 2, "base_delay_s": 0.0}}, api_base_override=server.base_url)
    client = GatedModelClient(config, redis_client)
    corpus = Corpus.model_validate_json((example_repo / "evals" / f"{skill}.evals.json").read_text())
    case = corpus.case(case_id)
    skill_dir = example_repo / "skills" / skill
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(example_repo, store)
    with materialize_workspace(
        store, key, skill=skill, case=case, parent=tmp_path / "ws", cache_dir=tmp_path / "cache"
    ) as ws:
        trajectory = run_agent(
            client,
            EXECUTOR,
            ExecutorInputs(
                skill,
                skill_text=(skill_dir / "SKILL.md").read_text(),
                agent_texts={p.name: p.read_text() for p in (skill_dir / "agents").glob("*.md")},
                case=case,
            ),
            sandbox=open_test_sandbox(ws.path, SandboxLimits(timeout_s=20)),
        )
    rendered = trajectory.render()
    # Every scripted tool call really ran and succeeded in the sandbox.
    assert " exit=0" in rendered and " exit=1" not in rendered and "error" not in rendered.lower(), rendered
    assertions = [assertion_text(a) for a in case.assertions]
    prompt = build_grader_prompt(skill, assertions, prepare_transcript(rendered), new_nonce())
    reply = client.complete(JUDGE, [{"role": "user", "content": prompt}])
    verdicts = json.loads(reply.content or "")
    assert [v["passed"] for v in verdicts] == EXPECTED[(skill, case_id)], verdicts
