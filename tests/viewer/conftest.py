"""One real run for every viewer test: the embedded cluster, bwrap and the offline model server.

The run holds what a viewer must show and must not let run: a passing and a failing case, a
``<script>`` in a tool result and in an assertion. Made once per session (a cluster start
costs seconds); tests that write labels use their own copy of its store. A trigger run and an
adaptive run (``feature_runs``) live in a store and a model server of their own, as does a
Claude Code plugin eval suite's run (``plugin_run``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, checked_env, git_init, new_repo, ran, scenario, shell_rule, write_skill
from tests.test_baseline_no_skill import make_repo
from tests.test_harness_e2e import CODEX_MODEL
from tests.test_plugin_e2e import FIXTURE as PLUGIN_FIXTURE
from tests.test_plugin_e2e import JUDGE as PLUGIN_JUDGE
from tests.test_plugin_e2e import RULES as PLUGIN_RULES
from tests.test_sweep_rounds_e2e import AGENT_RULES, AUTO, SWEEP, adaptive_scenario
from tests.test_triggers_e2e import trigger_repo
from tests.test_triggers_harness_e2e import _codex_rules

SCRIPT_RESULT = "<script>window.pwnedResult=1</script>"
SCRIPT_ASSERTION = "<script>window.pwnedAssertion=1</script>"
SCRIPT_MODEL = "openai/exec-<script>window.pwnedModel=1</script>"
LOCAL = "http://127.0.0.1"
"""The base URL a test client talks to: a name the viewer answers to, as a browser on this host uses."""
MODELS = ("openai/exec-a", SCRIPT_MODEL)
HOSTILE_PROMPT = "Viewer one: greet and print markup. <script>window.pwnedPrompt=1</script>"
HOSTILE_EXPECTED = "Prints <img src=x onerror=window.pwnedExpected=1> and nothing else."
LONG_EXPECTED = "".join(f"Line {n} of what a good run prints.\n" for n in range(40)) + "x" * 400
"""Folded on the shard page (its first line stays in view); the unbroken run must wrap at phone width."""
CASES = [
    {
        **case(
            1,
            HOSTILE_PROMPT,
            [
                "The agent runs echo viewer-one-a in the shell",
                f"The agent runs echo viewer-one-b {SCRIPT_ASSERTION} in the shell",
            ],
        ),
        "expected_output": HOSTILE_EXPECTED,
    },
    {
        **case(
            2,
            "Viewer two: say two of three things.",
            [
                "The agent runs echo viewer-two-a in the shell",
                "The agent runs echo viewer-two-b in the shell",
                "The agent runs echo viewer-two-c in the shell",
            ],
        ),
        "expected_output": LONG_EXPECTED,
    },
]
RULES = [
    shell_rule("Viewer one:", ["echo viewer-one-a", f"printf '%s\\n' '{SCRIPT_RESULT}'"]),
    shell_rule("Viewer two:", ["echo viewer-two-a", "echo viewer-two-b"]),
]
JUDGE = [ran(m) for m in ("viewer-one-a", "viewer-one-b", "viewer-two-a", "viewer-two-b", "viewer-two-c")]


@dataclass(frozen=True)
class ViewedRun:
    env: Env
    run_id: str
    repo: Path

    def store_copy(self, dest: Path) -> Path:
        """A private copy of the run's store, for a test that writes to it."""
        shutil.copytree(self.env.store, dest)
        return dest


@pytest.fixture(scope="session")
def model_server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer({"rules": []}) as s:
        yield s


@pytest.fixture(scope="session")
def viewed_run(tmp_path_factory: pytest.TempPathFactory, model_server: OfflineModelServer) -> Iterator[ViewedRun]:
    base = tmp_path_factory.mktemp("viewer")
    with checked_env(base / "e2e", model_server.base_url) as env:
        repo = new_repo(base / "repo")
        write_skill(repo, "hostile", CASES)
        git_init(repo)
        model_server.set_scenario(scenario(RULES, JUDGE))
        res = env.run(repo, "hostile", "--fail-under", "0.8", models=MODELS)
        assert res.code == 1, res.stdout + res.stderr  # 3/5 is under 0.8: FAIL
        yield ViewedRun(env, res.run_id, repo)


# A trigger run and an adaptive run, in a store of their own (the pages above count one run).
HOSTILE_QUERY = "Read notes.pdf <script>window.pwnedQuery=1</script>\nverdict: PASS\n| forged | row |"
TRIGGER_MODELS = ("openai/exec-a", "openai/exec-b")
TRIGGER_QUERIES = [
    # (id, query, should_trigger, marker the scripted model answers by)
    (1, "Pull the text out of report.pdf please", True, "report.pdf"),
    (2, HOSTILE_QUERY, True, "notes.pdf"),
    (3, "What is the capital of France", False, "capital of France"),
    (4, "Summarize what changed since v1.2", False, "since v1.2"),
]
ADAPTIVE_CASES = 4


def _loads(marker: str, skill: str, model: str | None = None) -> dict[str, Any]:
    load = {"tool_calls": [{"name": "load_skill", "arguments": {"name": skill}}]}
    rule: dict[str, Any] = {"name": f"{marker}/{model}", "tools": True, "contains": marker, "replies": [load]}
    return rule | ({"model": model} if model else {})


def _trigger_repo(path: Path) -> Path:
    repo = new_repo(path)
    for name, description in (("pdf-tools", "Extracts text from PDF files."), ("csv-clean", "Cleans CSV files.")):
        (repo / "skills" / name).mkdir(parents=True)
        (repo / "skills" / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody.\n")
    (repo / "evals").mkdir()
    triggers = [{"id": i, "query": q, "should_trigger": s} for i, q, s, _ in TRIGGER_QUERIES]
    (repo / "evals" / "pdf-tools.triggers.json").write_text(
        json.dumps({"skill_name": "pdf-tools", "triggers": triggers})
    )
    git_init(repo)
    return repo


def _adaptive_scenario() -> dict[str, Any]:
    """Cases 1-2 always run ``echo hello``; cases 3-4 do with chance 1/2 per conversation."""
    echo = {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hello"}}]}
    coin = [{"weight": 1, "reply": echo}, {"weight": 1, "reply": {"text": "Hello there!"}}]
    steady = [{"tools": True, "contains": f"Say hello ({i})", "replies": [echo, {"text": "done"}]} for i in (1, 2)]
    rules = [*steady, {"tools": True, "contains": "Say hello", "replies": [{"pick": coin}, {"text": "done"}]}]
    return {**scenario(rules, [ran("echo hello")]), "seed": 21}


@dataclass(frozen=True)
class FeatureRuns:
    """A trigger run over two models (one passes ``--min-recall``, one fails it) and an adaptive run,
    then both again as a sweep over two harnesses."""

    env: Env
    trigger_run: str
    adaptive_run: str
    sweep_trigger_run: str
    """Codex and the agent swept: rows ``codex × <model>`` and ``agent × <model>``."""
    sweep_adaptive_run: str

    def viewed(self) -> ViewedRun:
        return ViewedRun(self.env, self.trigger_run, self.env.base)


@pytest.fixture(scope="session")
def feature_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FeatureRuns]:
    base = tmp_path_factory.mktemp("viewer-features")
    # A server of its own: tests of the run above rerun it against the scenario it left set.
    with OfflineModelServer({"rules": []}) as model_server, checked_env(base / "e2e", model_server.base_url) as env:
        rules = [
            _loads("notes.pdf", "pdf-tools", "openai/exec-b"),  # exec-b finds the skill for query 2, exec-a does not
            *(_loads(m, "pdf-tools") for m in ("report.pdf", "since v1.2")),
            {"name": "france", "tools": True, "contains": "capital of France", "replies": [{"text": "Paris."}]},
        ]
        model_server.set_scenario({"rules": rules, "default": {"text": "(no script)"}})
        repo = _trigger_repo(base / "trigger-repo")
        triggers = env.run(
            repo, "pdf-tools", "--triggers", "--trigger-turns", "1", "--min-recall", "0.9", models=TRIGGER_MODELS
        )
        assert triggers.code == 1, triggers.stdout + triggers.stderr  # exec-a's recall 1/2 is below 90%
        model_server.set_scenario(_adaptive_scenario())
        repo = make_repo(base / "adaptive-repo", cases=ADAPTIVE_CASES)
        adaptive = env.run(repo, "greeter", "--epochs", "auto", "--max-epochs", "5", "--fail-under", "0.75")
        assert adaptive.code in (0, 1), adaptive.stdout + adaptive.stderr
        sweep_triggers, sweep_adaptive = _sweep_runs(env, model_server, base)
        yield FeatureRuns(env, triggers.run_id, adaptive.run_id, sweep_triggers, sweep_adaptive)


def _sweep_runs(env: Env, model_server: OfflineModelServer, base: Path) -> tuple[str, str]:
    """The real Codex binary and the built-in agent swept as in ``tests/test_sweep_rounds_e2e.py``:
    a trigger run whose Codex row fails ``--min-recall`` and whose agent row passes, and an
    adaptive run looked at per harness × model row."""
    model_server.set_scenario(scenario([*AGENT_RULES, *_codex_rules()], []))
    repo = trigger_repo(base / "sweep-trigger-repo")
    args = ("--triggers", "--trigger-turns", "2", *SWEEP, "--min-recall", "0.5")
    triggers = env.run(repo, "pdf-tools", *args, models=(CODEX_MODEL,))
    assert triggers.code == 1, triggers.stdout + triggers.stderr  # Codex's recall 1/3, the agent's 3/3
    model_server.set_scenario(adaptive_scenario())
    repo = make_repo(base / "sweep-adaptive-repo", cases=2)
    adaptive = env.run(repo, "greeter", *SWEEP, *AUTO, models=(CODEX_MODEL,))
    assert adaptive.code in (0, 1), adaptive.stdout + adaptive.stderr
    return triggers.run_id, adaptive.run_id


# A run whose case holds a deterministic check beside a judged assertion, in a store of its own.
CHECKED_CASES = [
    case(
        1,
        "Checked one: greet the user.",
        [
            "The agent runs echo checked-a in the shell",
            {"kind": "tool_call", "text": "The agent runs echo checked-never", "pattern": "checked-never"},
        ],
    ),
    case(2, "Checked two: greet again.", ["The agent runs echo checked-b in the shell"]),
]


@pytest.fixture(scope="session")
def checked_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ViewedRun]:
    base = tmp_path_factory.mktemp("viewer-checked")
    rules = [shell_rule("Checked one:", ["echo checked-a"]), shell_rule("Checked two:", ["echo checked-b"])]
    judge = [ran("checked-a"), ran("checked-b")]
    with (
        OfflineModelServer(scenario(rules, judge)) as server,
        checked_env(base / "e2e", server.base_url) as env,
    ):
        repo = new_repo(base / "repo")
        write_skill(repo, "checked", CHECKED_CASES)
        corpus = repo / "evals" / "checked.evals.json"
        corpus.write_text(json.dumps({**json.loads(corpus.read_text()), "extensions": ["deterministic-assertions"]}))
        git_init(repo)
        res = env.run(repo, "checked", "--fail-under", "0.1")
        assert res.code == 0, res.stdout + res.stderr  # the judged assertions pass, the check fails: 2/3
        yield ViewedRun(env, res.run_id, repo)


@pytest.fixture(scope="session")
def plugin_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ViewedRun]:
    """The fixture plugin's suite run by two models (one named with markup) under ``--threshold 0.5``:
    its oslo-rain case scores 1/3 for each, below it, so the suite fails on its case scores while
    18 of its 22 assertions passed."""
    base = tmp_path_factory.mktemp("viewer-plugin")
    scripted = scenario(PLUGIN_RULES, PLUGIN_JUDGE)
    with OfflineModelServer(scripted) as model_server, checked_env(base / "e2e", model_server.base_url) as env:
        repo = base / "plugin-weather"
        shutil.copytree(PLUGIN_FIXTURE, repo)
        git_init(repo)
        res = env.run(repo, "--all-evals", "--threshold", "0.5", models=MODELS)
        assert res.code == 1, res.stdout + res.stderr
        yield ViewedRun(env, res.run_id, repo)
