"""A plugin eval case's ``context.history_file``: the recorded Claude Code session it resumes, read
as the case's ``history`` (text, tool calls and results as text lines, side chains left out)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from producer.corpus.repo import Repo
from schemas.errors import BadCorpus
from schemas.history import HistoryTurn

FIXTURE = Path(__file__).parent / "fixtures" / "plugin-weather"
CASE_YAML = """schema_version: "1.1"
name: oslo-rain
context:
  history_file: {name}
execution:
  prompt: And tomorrow?
graders:
  - type: regex
    target: trace
    pattern: Oslo
"""


def entry(kind: str, content: Any, **extra: Any) -> str:
    return json.dumps({"type": kind, "message": {"role": kind, "content": content}, **extra})


SESSION = [
    json.dumps({"type": "summary", "summary": "weather chat"}),
    entry("user", "Is it raining in Oslo today?"),
    entry("assistant", [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Let me check."}]),
    entry("assistant", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat oslo.txt"}}]),
    entry("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "rain"}]),
    entry("user", "side question", isSidechain=True),
    entry("assistant", [{"type": "text", "text": "Yes, it rains in Oslo."}]),
]


def load(tmp_path: Path, session: list[str], name: str = "session.jsonl") -> Any:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    case_dir = repo / "evals" / "oslo-rain"
    (case_dir / "case.yaml").write_text(CASE_YAML.format(name=name))
    (case_dir / "session.jsonl").write_text("\n".join(session) + "\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return Repo(repo).load("evals/*/ [plugin suite: forecast]")


def test_the_session_becomes_the_cases_history(tmp_path: Path) -> None:
    bundle = load(tmp_path, SESSION)
    case = next(c for c in bundle.corpus.evals if c.prompt == "And tomorrow?")
    assert case.history == (
        HistoryTurn(role="user", content="Is it raining in Oslo today?"),
        HistoryTurn(role="assistant", content='Let me check.\n\n[earlier tool call] Bash({"command": "cat oslo.txt"})'),
        HistoryTurn(role="user", content="[earlier tool result] rain"),
        HistoryTurn(role="assistant", content="Yes, it rains in Oslo."),
    )


@pytest.mark.parametrize(
    ("session", "name", "needle"),
    [
        (SESSION, "other.jsonl", "'other.jsonl' is not a .jsonl file in the case folder"),
        (SESSION[:2], "session.jsonl", "the last turn is the assistant's"),
        ([*SESSION, "{not json"], "session.jsonl", "not JSON"),
    ],
)
def test_a_bad_session_is_refused_by_name(tmp_path: Path, session: list[str], name: str, needle: str) -> None:
    with pytest.raises(BadCorpus, match=needle):
        load(tmp_path, session, name)


def test_a_session_file_linking_to_the_host_is_never_read(tmp_path: Path) -> None:
    """A hostile repo's ``history_file`` (or a baseline grader's ``baseline_file``) that is a link to a
    host file: the link is not a session of the case folder, so nothing of the host file is read."""
    host = tmp_path / "host.jsonl"
    host.write_text(entry("user", "HOST-SECRET-7731") + "\n" + entry("assistant", "leaked") + "\n")
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    case_dir = repo / "evals" / "oslo-rain"
    (case_dir / "case.yaml").write_text(CASE_YAML.format(name="session.jsonl"))
    (case_dir / "session.jsonl").symlink_to(host)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    with pytest.raises(
        BadCorpus, match=r"history_file: 'session.jsonl' is not a .jsonl file in the case folder"
    ) as exc:
        Repo(repo).load("evals/*/ [plugin suite: forecast]")
    assert "HOST-SECRET-7731" not in str(exc.value)
