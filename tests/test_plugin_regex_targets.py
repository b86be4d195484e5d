"""``regex`` graders of a plugin eval suite with every target and match ``plugin eval`` reads:
``trace``, ``files`` (the files the run changed), ``mock_calls`` (a JSON object per mocked call)
and ``match: count:N``. Beside them the attack: a ``files`` target over a workspace the agent left
a link out of and a huge file in reads neither the host nor more than the cap."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from producer.corpus.interop_plugin_graders import translate_grader
from producer.corpus.validation import validate_corpus
from schemas.checks_plugin import TextMatchCheck
from schemas.errors import BadCorpus
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent, Trajectory
from tests.executor_support import open_test_sandbox
from worker.executor.final_files import MAX_FILE_CHARS, MAX_FINAL_FILES, collect_final_files
from worker.executor.tools import execute_tool
from worker.grading.deterministic import check_assertion
from worker.grading.plugin_checks import changed_files_text, mock_calls_text
from worker.sandbox import SandboxLimits

TRAJECTORY = Trajectory(
    skill="forecast",
    case_id=1,
    model="m",
    events=[
        ToolCallEvent(call_id="1", name="mcp__weather__get_forecast", arguments={"city": "Paris"}),
        ToolResultEvent(call_id="1", output="Paris: sunny", exit_code=0),
        ToolCallEvent(call_id="2", name="mcp__weather__get_forecast", arguments={"city": "Berlin"}),
        ToolResultEvent(call_id="2", output="error: unexpected input: city is 'Berlin'", exit_code=1),
        ToolCallEvent(call_id="3", name="shell", arguments={"command": "echo sunny"}),
        ToolResultEvent(call_id="3", output="sunny", exit_code=0),
        AssistantEvent(text="It is sunny in Paris, sunny all week."),
    ],
    final_files={"forecast.txt": "Paris: sunny\n", "notes/week.md": "# Week\nrain on Friday\n"},
)


def grader(**meta: Any) -> dict[str, Any]:
    out = translate_grader({"type": "regex", **meta}, "", "evals/c/graders/g.md", "front matter")
    assert isinstance(out, dict)
    return out


def test_mock_calls_are_one_json_object_per_mocked_call() -> None:
    assert mock_calls_text(TRAJECTORY).splitlines() == [
        '{"tool":"mcp__weather__get_forecast","input":{"city":"Paris"},"output":"Paris: sunny"}',
        '{"tool":"mcp__weather__get_forecast","input":{"city":"Berlin"},'
        '"output":"error: unexpected input: city is \'Berlin\'","isError":true}',
    ]


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"pattern": "Berlin", "target": "mock_calls"}, True),
        ({"pattern": "echo", "target": "mock_calls"}, False),  # a shell call is not a mocked one
        ({"pattern": '"isError":true', "target": "mock_calls", "match": "count:1"}, True),
        ({"pattern": "sunny", "match": "count:2"}, True),  # the final reply says it twice
        ({"pattern": "sunny", "match": "count:3"}, False),
        ({"pattern": "echo sunny", "target": "trace"}, True),
        ({"pattern": "rain", "target": "trace", "match": "count:0"}, True),
        ({"pattern": "^Paris: sunny$", "target": "files", "flags": "m"}, True),
        ({"pattern": "rain on", "target": {"source": "files"}}, True),
        ({"pattern": "notes/week\\.md", "target": "files"}, True),  # a changed file's path is read too
        ({"pattern": "Berlin", "target": "files"}, False),  # the mock calls are not files
        ({"pattern": "sunny", "target": "files", "match": "count:1"}, True),
    ],
)
def test_each_target_and_match_reads_what_plugin_eval_reads(meta: dict[str, Any], expected: bool) -> None:
    check = TextMatchCheck.model_validate({k: v for k, v in grader(**meta).items() if k != "kind"} | {"text": "t"})
    assert check_assertion(check, TRAJECTORY).passed is expected


@pytest.mark.parametrize(
    ("meta", "needle"),
    [
        ({"pattern": "x", "match": "count:many"}, "is not contains, not_contains or count:N"),
        ({"pattern": "x", "target": "stdout"}, "is not last_message, trace, transcript, files, mock_calls"),
    ],
)
def test_what_is_not_read_is_refused_by_name(meta: dict[str, Any], needle: str) -> None:
    with pytest.raises(BadCorpus, match=needle):
        grader(**meta)


def test_a_schema_v1_count_with_absent_is_refused() -> None:
    case = {
        "id": 1,
        "prompt": "p",
        "expected_output": "e",
        "files": [],
        "assertions": [{"kind": "text_match", "pattern": "x", "count": 2, "absent": True}],
    }
    data = {"skill_name": "demo", "extensions": ["deterministic-assertions"], "evals": [case, {**case, "id": 2}]}
    with pytest.raises(BadCorpus) as info:
        validate_corpus(data, "evals/demo.evals.json", lambda _p: True)
    assert info.value.path == "$.evals[0].assertions[0].count"


def test_a_files_target_never_reads_through_a_link_out_of_the_workspace_nor_past_the_cap(
    tmp_path: Path, example_repo: Path
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("HOST-SECRET-9a1c\n")
    sandbox = open_test_sandbox(example_repo, SandboxLimits(timeout_s=20))
    since = time.time()
    time.sleep(0.02)
    script = (
        f"ln -s {host}/secret.txt leak.txt && ln -s {host} hostdir && "
        "python3 -c \"open('huge.txt','w').write('x' * 5_000_000 + 'TAIL-MARK')\" && echo ok > kept.txt"
    )
    outcome = execute_tool(sandbox, "shell", {"command": script})
    assert outcome.exit_code == 0, outcome.output
    files = collect_final_files(sandbox, since_epoch=since, wrote=["leak.txt", "hostdir/secret.txt"])
    trajectory = TRAJECTORY.model_copy(update={"final_files": files})
    for pattern, expected in (("HOST-SECRET", False), ("^ok$", True), ("TAIL-MARK", False)):
        meta = {"pattern": pattern, "target": "files", "flags": "m"}
        check = TextMatchCheck.model_validate({k: v for k, v in grader(**meta).items() if k != "kind"} | {"text": "t"})
        assert check_assertion(check, trajectory).passed is expected, pattern
    assert len(changed_files_text(trajectory)) <= MAX_FINAL_FILES * (MAX_FILE_CHARS + 300)
