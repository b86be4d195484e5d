"""Reading the judge's answer: what is accepted, what is malformed, and why."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.grading.parse import (
    Malformed,
    MalformedKind,
    Parsed,
    extract_array,
    parse_verdicts,
    texts_match,
)

ASSERTIONS = [
    "The agent runs git diff before committing",
    "The agent commits with a message whose subject matches ^fix: ",
    "The agent never runs git push",
]


def answer(items: list[dict[str, object]]) -> str:
    return json.dumps(items)


def good_items() -> list[dict[str, object]]:
    return [
        {"text": ASSERTIONS[0], "passed": True, "evidence": "[tool_call] shell git diff"},
        {"text": ASSERTIONS[1], "passed": False, "evidence": "absent: a commit"},
        {"text": ASSERTIONS[2], "passed": True, "evidence": "no push in any tool call"},
    ]


def parsed(text: str) -> Parsed:
    result = parse_verdicts(text, ASSERTIONS)
    assert isinstance(result, Parsed), result
    return result


def malformed(text: str, kind: MalformedKind) -> Malformed:
    result = parse_verdicts(text, ASSERTIONS)
    assert isinstance(result, Malformed), result
    assert result.kind is kind, result
    return result


def test_bare_json_is_paired_by_position() -> None:
    result = parsed(answer(good_items()))
    assert [v.passed for v in result.verdicts] == [True, False, True]
    assert [v.text for v in result.verdicts] == ASSERTIONS


@pytest.mark.parametrize(
    "wrap",
    [
        "```json\n{}\n```",
        "```\n{}\n```",
        "  ```JSON\n{}\n```  \n",
        "Here are my verdicts:\n```json\n{}\n```\nLet me know.",
        "```json\n{}",  # fence never closed
    ],
)
def test_a_markdown_fence_is_tolerated(wrap: str) -> None:
    assert len(parsed(wrap.replace("{}", answer(good_items()))).verdicts) == 3


@pytest.mark.parametrize(
    "wrap",
    [
        "Verdicts follow. {} That is all.",
        "I checked [every] tool call [1].\n{}\nNote: [done]",
        "{}\n\nThe grading above is final.",
    ],
)
def test_prose_around_the_array_is_tolerated(wrap: str) -> None:
    assert len(parsed(wrap.replace("{}", answer(good_items()))).verdicts) == 3


@pytest.mark.parametrize(
    "text",
    ["", "All assertions pass.", "I cannot grade this transcript.", '{"text": "x"}', "[1, 2", "null"],
)
def test_prose_only_or_no_array_is_not_json(text: str) -> None:
    malformed(text, MalformedKind.NOT_JSON)


def test_a_truncated_answer_is_not_json() -> None:
    full = answer(good_items())
    malformed(full[: len(full) // 2], MalformedKind.NOT_JSON)


@pytest.mark.parametrize("count", [0, 1, 2, 4, 6])
def test_a_short_or_long_array_is_wrong_length(count: int) -> None:
    items = (good_items() * 2)[:count]
    result = malformed(answer(items), MalformedKind.WRONG_LENGTH)
    assert f"{count} {'verdict' if count == 1 else 'verdicts'} for 3 assertions" in result.reason


def test_reordered_items_are_a_reorder() -> None:
    items = good_items()
    items[0], items[1] = items[1], items[0]
    result = malformed(answer(items), MalformedKind.REORDER)
    assert "item 0 echoes assertion 1" in result.reason


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ("just a string", "an object is required"),
        ({"text": ASSERTIONS[0], "passed": "true", "evidence": "x"}, "'passed' is str"),
        ({"text": ASSERTIONS[0], "passed": 1, "evidence": "x"}, "'passed' is int"),
        ({"text": ASSERTIONS[0], "passed": True, "evidence": None}, "'evidence' is NoneType"),
        ({"text": 7, "passed": True, "evidence": "x"}, "'text' is int"),
        ({"passed": True, "evidence": "x"}, "'text' is NoneType"),
    ],
)
def test_wrong_types_are_malformed(item: object, needle: str) -> None:
    items: list[object] = [item, *good_items()[1:]]
    result = malformed(json.dumps(items), MalformedKind.WRONG_TYPE)
    assert needle in result.reason


@pytest.mark.parametrize(
    "echo",
    [
        "The agent runs  git diff\nbefore committing",  # whitespace drift
        'The agent runs \\"git diff\\" before committing',  # quote escaping
        "The agent runs 'git diff' before committing",
        "the agent runs git diff before committing.",
        "The agent runs git diff...",  # leading prefix with an ellipsis
        "The agent runs git diff before committing (checked in the transcript)",
        "Runs diff before the commit",  # paraphrase: drift, not a different assertion
    ],
)
def test_echo_drift_is_not_a_reorder(echo: str) -> None:
    items = good_items()
    items[0]["text"] = echo
    assert parsed(answer(items)).verdicts[0].text == ASSERTIONS[0]


def test_an_echo_of_another_assertion_after_drift_is_a_reorder() -> None:
    items = good_items()
    items[2]["text"] = "the agent runs git diff before   committing"
    malformed(answer(items), MalformedKind.REORDER)


def test_identical_assertions_never_count_as_a_reorder() -> None:
    same = ["The agent runs the test suite twice", "The agent runs the test suite twice"]
    items = [
        {"text": same[1], "passed": True, "evidence": "e"},
        {"text": same[0], "passed": False, "evidence": "absent: x"},
    ]
    assert isinstance(parse_verdicts(json.dumps(items), same), Parsed)


def test_an_empty_echo_is_not_a_prefix_of_every_assertion() -> None:
    assert not texts_match("", ASSERTIONS[0])
    assert not texts_match("The", ASSERTIONS[0])


def test_the_outermost_array_wins_over_inner_ones() -> None:
    assert extract_array("x [ [1], [2] ] y") == [[1], [2]]


@given(st.text(max_size=200))
def test_parsing_never_raises_on_arbitrary_text(text: str) -> None:
    assert isinstance(parse_verdicts(text, ASSERTIONS), Parsed | Malformed)
