"""Deterministic assertions: opt-in only, validated with named errors, checked without a model."""

from __future__ import annotations

import copy
from typing import Any, get_args

import pytest

from producer.corpus.validation import validate_corpus
from schemas.corpus import CallOrderCheck, DeterministicAssertion, FileContainsCheck, ToolCallCheck, ToolCallMatcher
from schemas.errors import BadCorpus
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent, Trajectory
from schemas.verdict import AssertionVerdict
from worker.grading import deterministic
from worker.grading.deterministic import check_assertion, merge_by_position, split_assertions

FILE = "evals/demo.evals.json"
OPT_IN = ["deterministic-assertions"]


def has(path: str) -> bool:
    return path == "src/app.py"


def corpus(assertion: Any, extensions: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "skill_name": "demo",
        "evals": [
            {
                "id": 1,
                "prompt": "Fix the bug",
                "expected_output": "A fix.",
                "files": ["src/app.py"],
                "assertions": ["The agent runs the tests before committing", assertion],
            },
            {
                "id": 2,
                "prompt": "Review",
                "expected_output": "A review.",
                "files": ["src/app.py"],
                "assertions": ["The agent runs git diff to see the change"],
            },
        ],
    }
    if extensions is not None:
        data["extensions"] = extensions
    return data


def error_of(data: dict[str, Any]) -> BadCorpus:
    with pytest.raises(BadCorpus) as info:
        validate_corpus(data, FILE, has)
    return info.value


TOOL_CALL = {"kind": "tool_call", "tool": "shell", "argument": "cmd", "pattern": r"git\s+diff"}


# --- validation ------------------------------------------------------------------------------


def test_an_object_assertion_without_the_opt_in_fails_as_in_v1_and_names_the_opt_in() -> None:
    error = error_of(corpus(TOOL_CALL))
    assert error.path == "$.evals[0].assertions[1]"
    assert error.problem.startswith("is dict; assertions are strings (")
    assert '"extensions": ["deterministic-assertions"]' in error.problem  # the key that would allow it


def test_a_plain_v1_corpus_validates_the_same_with_or_without_the_opt_in() -> None:
    plain = corpus("The agent commits with a fix: subject line")
    opted = copy.deepcopy(plain) | {"extensions": OPT_IN}
    a, b = validate_corpus(plain, FILE, has), validate_corpus(opted, FILE, has)
    assert a.evals == b.evals
    assert a.extensions == () and b.extensions == ("deterministic-assertions",)


def test_string_assertions_keep_the_quality_floor_under_the_opt_in() -> None:
    assert "at least 20" in error_of(corpus("Runs tests", OPT_IN)).problem


@pytest.mark.parametrize(
    ("extensions", "path", "needle"),
    [
        ([], "$.extensions", "non-empty array"),
        ("deterministic-assertions", "$.extensions", "non-empty array"),
        (["deterministic-assertion"], "$.extensions[0]", "not a known extension"),
        ([7], "$.extensions[0]", "not a known extension"),
        (OPT_IN * 2, "$.extensions[1]", "listed twice"),
    ],
)
def test_a_bad_extensions_key_is_a_named_error(extensions: Any, path: str, needle: str) -> None:
    error = error_of(corpus("The agent commits with a fix: subject line", extensions))
    assert error.status == "BLOCKED_BAD_CORPUS"
    assert error.path == path and needle in error.problem


AT = "$.evals[0].assertions[1]"


@pytest.mark.parametrize(
    ("assertion", "path", "needle"),
    [
        ({"kind": "shell_call", "pattern": "x"}, f"{AT}.kind", "is not one of"),
        ({"pattern": "x"}, f"{AT}.kind", "is not one of"),
        ({"kind": "tool_call"}, AT, "missing key pattern"),
        ({"kind": "tool_call", "pattern": "x", "regex": "y"}, AT, "unexpected key regex"),
        ({"kind": "tool_call", "pattern": "git (diff"}, f"{AT}.pattern", "not a valid regular expression"),
        ({"kind": "tool_call", "pattern": ""}, f"{AT}.pattern", "non-empty regular expression"),
        ({"kind": "tool_call", "pattern": 5}, f"{AT}.pattern", "non-empty regular expression"),
        ({"kind": "tool_call", "pattern": "a" * 1001}, f"{AT}.pattern", "at most 1000"),
        ({"kind": "tool_call", "pattern": "x", "tool": " "}, f"{AT}.tool", "non-blank"),
        ({"kind": "tool_call", "pattern": "x", "absent": "yes"}, f"{AT}.absent", "true or false"),
        ({"kind": "tool_call", "pattern": "x", "text": ""}, f"{AT}.text", "non-blank"),
        ({"kind": "tool_call", "pattern": "x", "weight": 0}, f"{AT}.weight", "outside (0, 100]"),
        ({"kind": "tool_call", "pattern": "x", "weight": 101}, f"{AT}.weight", "outside (0, 100]"),
        ({"kind": "tool_call", "pattern": "x", "weight": True}, f"{AT}.weight", "not a number"),
        ({"kind": "tool_call", "pattern": "x", "weight": float("nan")}, f"{AT}.weight", "not a number"),
        ({"kind": "call_order", "first": {"pattern": "a"}}, AT, "missing key then"),
        ({"kind": "call_order", "first": "a", "then": {"pattern": "b"}}, f"{AT}.first", "matcher object"),
        ({"kind": "call_order", "first": {"pattern": "a"}, "then": {"pattern": "("}}, f"{AT}.then.pattern", "valid"),
        ({"kind": "call_order", "first": {"pattern": "a", "x": 1}, "then": {"pattern": "b"}}, f"{AT}.first", "x"),
        ({"kind": "file_contains", "path": "../etc/passwd", "pattern": "x"}, f"{AT}.path", "escapes"),
        ({"kind": "file_contains", "path": "docs/*.md", "pattern": "x"}, f"{AT}.path", "glob"),
        ({"kind": "file_contains", "path": 3, "pattern": "x"}, f"{AT}.path", "not a string"),
        ({"kind": "file_contains", "path": "a.md", "pattern": "[z-a]"}, f"{AT}.pattern", "valid"),
    ],
)
def test_bad_assertion_objects_are_named_errors_with_json_paths(assertion: Any, path: str, needle: str) -> None:
    error = error_of(corpus(assertion, OPT_IN))
    assert error.status == "BLOCKED_BAD_CORPUS"
    assert error.path == path, error
    assert needle in error.problem, error


def test_valid_objects_become_typed_checks_with_readable_texts() -> None:
    order = {"kind": "call_order", "first": {"pattern": "diff"}, "then": {"tool": "shell", "pattern": "commit"}}
    file = {"kind": "file_contains", "path": "./docs//USAGE.md", "pattern": "greet", "weight": 2}
    data = corpus(TOOL_CALL, OPT_IN)
    data["evals"][0]["assertions"] += [order, file, {**TOOL_CALL, "absent": True, "text": "Never diffs at all"}]
    case = validate_corpus(data, FILE, has).evals[0]
    tool, order_check, file_check, never = case.assertions[1:]
    assert isinstance(tool, ToolCallCheck) and tool.text.startswith("The agent makes a tool call to shell")
    assert isinstance(order_check, CallOrderCheck) and "before one" in order_check.text
    assert isinstance(file_check, FileContainsCheck) and file_check.path == "docs/USAGE.md"
    assert file_check.weight == 2.0
    assert isinstance(never, ToolCallCheck) and never.absent and never.text == "Never diffs at all"


# --- checking ----------------------------------------------------------------------------


def trajectory() -> Trajectory:
    return Trajectory(
        skill="demo",
        case_id=1,
        model="m",
        events=[
            AssistantEvent(text="I will run git push now"),  # prose: never a tool call
            ToolCallEvent(call_id="1", name="shell", arguments={"cmd": "git diff --stat"}),
            ToolResultEvent(call_id="1", output=" 1 file changed"),
            ToolCallEvent(call_id="2", name="write_file", arguments={"path": "docs/USAGE.md", "content": "x"}),
            ToolCallEvent(call_id="3", name="shell", arguments={"cmd": "git commit -m 'fix: x'", "timeout": 30}),
        ],
        final_files={"docs/USAGE.md": "# Usage\n\ngreet(name) says hello\n"},
    )


def tool_call(pattern: str, **kw: Any) -> ToolCallCheck:
    return ToolCallCheck(text="t", pattern=pattern, **kw)


@pytest.mark.parametrize(
    ("check", "passed"),
    [
        (tool_call(r"git\s+diff", tool="shell", argument="cmd"), True),
        (tool_call(r"git\s+diff", tool="read_file"), False),
        (tool_call(r"git push"), False),  # only said in prose
        (tool_call(r"git push", absent=True), True),
        (tool_call(r"git diff", absent=True), False),
        (tool_call(r"^30$", argument="timeout"), True),  # non-string argument as JSON
        (tool_call(r"x", argument="missing"), False),
        (tool_call(r'"path": "docs/USAGE\.md"'), True),  # all arguments as sorted JSON
    ],
)
def test_tool_call_checks_read_the_structured_calls(check: ToolCallCheck, passed: bool) -> None:
    verdict = check_assertion(check, trajectory())
    assert verdict.passed is passed
    assert verdict.check == "deterministic"
    assert verdict.evidence.startswith("absent:") is not passed


def test_call_order_needs_the_first_call_before_the_second() -> None:
    diff, commit = ToolCallMatcher(pattern="git diff"), ToolCallMatcher(pattern="git commit")
    assert check_assertion(CallOrderCheck(text="t", first=diff, then=commit), trajectory()).passed
    backwards = check_assertion(CallOrderCheck(text="t", first=commit, then=diff), trajectory())
    assert not backwards.passed and "after" in backwards.evidence
    missing = CallOrderCheck(text="t", first=ToolCallMatcher(pattern="pytest"), then=commit)
    assert "pytest" in check_assertion(missing, trajectory()).evidence


def test_file_checks_read_the_final_workspace_files() -> None:
    assert check_assertion(FileContainsCheck(text="t", path="docs/USAGE.md", pattern=r"greet\("), trajectory()).passed
    wrong = check_assertion(FileContainsCheck(text="t", path="docs/USAGE.md", pattern="goodbye"), trajectory())
    assert not wrong.passed and "goodbye" in wrong.evidence
    gone = check_assertion(FileContainsCheck(text="t", path="README.md", pattern="x"), trajectory())
    assert not gone.passed and "README.md" in gone.evidence


def test_judged_and_deterministic_verdicts_merge_by_position() -> None:
    check = FileContainsCheck(text="file check", path="docs/USAGE.md", pattern="greet", weight=3)
    assertions = ["first judged assertion here", check, "second judged assertion here"]
    texts, positions = split_assertions(assertions)
    assert texts == ["first judged assertion here", "second judged assertion here"] and positions == [0, 2]
    judged = [AssertionVerdict(text=t, passed=False, evidence="absent: x") for t in texts]
    merged = merge_by_position(assertions, judged, trajectory())
    assert [v.text for v in merged] == ["first judged assertion here", "file check", "second judged assertion here"]
    assert merged[1].passed and merged[1].weight == 3
    with pytest.raises(ValueError):
        merge_by_position(assertions, judged[:1], trajectory())


def test_every_kind_of_deterministic_assertion_has_its_checker() -> None:
    """A new check class without a checker would fail each shard that uses it at grading time."""
    kinds = {cls.model_fields["kind"].default for cls in get_args(DeterministicAssertion)}
    assert kinds == set(deterministic._CHECKERS)
