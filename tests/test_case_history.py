"""A case's ``history``: the built-in agent continues a recorded conversation; other executors refuse it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from producer.corpus.validation import validate_corpus
from producer.plan.case_terms import check_case_terms
from schemas.errors import BadCorpus
from schemas.history import HistoryTurn
from schemas.trajectory import AssistantEvent
from testkit.offline_server import OfflineModelServer
from tests.executor_support import open_test_sandbox
from tests.model_support import server_fixtures
from worker.executor.agent import run_agent
from worker.executor.prompt import ExecutorInputs
from worker.models.client import GatedModelClient
from worker.sandbox import SandboxLimits

pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly:UserWarning")

server, scripted, client = server_fixtures()
FILE = "evals/demo.evals.json"
HISTORY = [
    {"role": "user", "content": "Our release branch is release-7."},
    {"role": "assistant", "content": "Noted: release-7."},
]


def corpus(history: Any) -> dict[str, Any]:
    case = {
        "id": 1,
        "prompt": "Which branch do we release from?",
        "expected_output": "release-7",
        "files": [],
        "assertions": ["The agent outputs the name release-7 to the user"],
        "history": history,
    }
    other = copy.deepcopy(case) | {"id": 2}
    other.pop("history")
    return {"skill_name": "demo", "evals": [case, other]}


def test_the_built_in_agent_starts_with_the_earlier_turns(
    client: GatedModelClient, scripted: OfflineModelServer, tmp_path: Path
) -> None:
    loaded = validate_corpus(corpus(HISTORY), FILE, lambda _p: True)
    case = loaded.evals[0]
    assert case.history == (
        HistoryTurn(role="user", content=HISTORY[0]["content"]),
        HistoryTurn(role="assistant", content=HISTORY[1]["content"]),
    )
    rule = {"name": "exec", "model": "scripted-exec", "tools": True, "replies": [{"text": "release-7"}]}
    scripted.set_scenario({"rules": [rule]})
    (tmp_path / "ws").mkdir()
    trajectory = run_agent(
        client,
        "openai/scripted-exec",
        ExecutorInputs("demo", None, {}, case),
        sandbox=open_test_sandbox(tmp_path / "ws", SandboxLimits(timeout_s=20)),
    )
    messages = scripted.requests()[0]["messages"]
    assert [(m["role"], m["content"]) for m in messages[:2]] == [(t["role"], t["content"]) for t in HISTORY]
    assert messages[2]["role"] == "user" and "Which branch do we release from?" in str(messages[2]["content"])
    # The earlier turns are context, not the agent's doing: only this run's reply is an event.
    assert [e.text for e in trajectory.events if isinstance(e, AssistantEvent)] == ["release-7"]


@pytest.mark.parametrize(
    ("history", "path", "says"),
    [
        ([], "$.evals[0].history", "1 to 200 turns"),
        ([HISTORY[1]], "$.evals[0].history[0].role", "alternate"),
        ([HISTORY[0]], "$.evals[0].history[0]", "the last turn is the assistant's"),
        ([HISTORY[0], {"role": "assistant", "content": " "}], "$.evals[0].history[1].content", "non-blank"),
        ([{"role": "user", "text": "x"}], "$.evals[0].history[0]", '"role" and "content"'),
    ],
)
def test_a_bad_history_is_refused_by_its_path(history: Any, path: str, says: str) -> None:
    with pytest.raises(BadCorpus) as info:
        validate_corpus(corpus(history), FILE, lambda _p: True)
    assert info.value.path == path and says in info.value.problem


def test_a_harness_refuses_a_case_with_history_by_name() -> None:
    loaded = validate_corpus(corpus(HISTORY), FILE, lambda _p: True)

    class Bundle:  # the two attributes check_case_terms reads
        corpus, corpus_file = loaded, FILE

    class Plan:
        bundles = (Bundle(),)

    with pytest.raises(BadCorpus, match=r"does not apply a case's history; run it with --executor agent"):
        check_case_terms(Plan(), "claude-code")  # type: ignore[arg-type]
    check_case_terms(Plan(), "agent")  # type: ignore[arg-type]
