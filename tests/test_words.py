"""Counts in messages read as English: one thing, many things, never ``(s)`` or ``1 queries``."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import Any

import pytest

from producer.commands.trigger_cli import trigger_settings
from producer.corpus.validation import validate_corpus
from schemas.call_lines import mock_call_lines
from schemas.checks_http import HttpCallCheck, HttpMatcher
from schemas.checks_plugin import TextMatchCheck
from schemas.errors import ConfigError
from schemas.http_mocks import HttpCall
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent, Trajectory
from schemas.words import count_bound, plural
from worker.grading.http_checks import check_http_call
from worker.grading.plugin_checks import check_text_match


@pytest.mark.parametrize(
    ("count", "word", "said"),
    [
        (1, "query", "1 query"),
        (3, "epoch", "3 epochs"),
        (2, "corpus", "2 corpora"),
        (0, "query", "0 queries"),
        (2, "failing-case transcript", "2 failing-case transcripts"),
        (3, "match", "3 matches"),
        (1, "match", "1 match"),
        (2, "day", "2 days"),
    ],
)
def test_a_count_takes_the_number_of_its_noun(count: int, word: str, said: str) -> None:
    assert plural(count, word) == said


@pytest.mark.parametrize(
    ("low", "high", "said"),
    [
        (0, 0, "never"),
        (1, 1, "exactly once"),
        (0, 2, "at most twice"),
        (1, 3, "1 to 3 times"),
        (1, None, "at least once"),
    ],
)
def test_a_count_range_reads_as_words(low: int, high: int | None, said: str) -> None:
    assert count_bound(low, high) == said


def _corpus(check: dict[str, Any]) -> dict[str, Any]:
    case = {"id": 1, "prompt": "p", "expected_output": "e", "files": [], "assertions": [check]}
    other = {**case, "id": 2, "assertions": ["The agent runs the tests"]}
    return {"skill_name": "demo", "extensions": ["deterministic-assertions"], "evals": [case, other]}


def test_an_http_call_check_without_text_describes_itself_in_english() -> None:
    never = {"kind": "http_call", "request": {"url": "evil\\.example\\.com"}, "min": 0, "max": 0}
    [check] = validate_corpus(_corpus(never), "evals/demo.evals.json", lambda _p: True).evals[0].assertions
    assert check.text == "The agent never requests /evil\\.example\\.com/"  # type: ignore[union-attr]
    once = {"kind": "http_call", "request": {"url": "api", "method": "POST"}, "min": 1, "max": 1}
    [check] = validate_corpus(_corpus(once), "evals/demo.evals.json", lambda _p: True).evals[0].assertions
    assert check.text == "The agent requests POST /api/ exactly once"  # type: ignore[union-attr]


def test_http_call_evidence_counts_requests_in_english() -> None:
    call = HttpCall(method="GET", url="https://evil.example.com/x", status=403, mocked=False)
    check = HttpCallCheck(text="t", request=HttpMatcher(url="evil\\.example\\.com"), min=0, max=0)
    evidence = check_http_call(check, Trajectory(skill="s", case_id=1, model="m", http_calls=[call])).evidence
    assert evidence.startswith("1 request to /evil\\.example\\.com/, allowed exactly 0; first: ")
    assert "request(s)" not in evidence and "* /" not in evidence


def test_a_failed_absence_says_what_was_found_without_contradicting_itself() -> None:
    run = Trajectory(skill="s", case_id=1, model="m", events=[AssistantEvent(text="it is sunny")])
    verdict = check_text_match(TextMatchCheck(text="t", pattern="sunny", absent=True), run)
    assert not verdict.passed
    assert verdict.evidence == (
        "absent: no match for /sunny/ in the final reply was wanted; one was found: the final reply: sunny"
    )
    assert "but found" not in verdict.evidence


def test_a_mock_error_answer_is_listed_with_one_error_prefix() -> None:
    run = Trajectory(
        skill="s",
        case_id=1,
        model="m",
        events=[
            ToolCallEvent(call_id="1", name="mcp__w__f", arguments={"city": "x"}),
            ToolResultEvent(call_id="1", output="error: unexpected input: city is 'x'", exit_code=1),
        ],
    )
    assert mock_call_lines(run) == ['mcp__w__f {"city":"x"} -> error: unexpected input: city is \'x\'']


def test_one_refused_behavioural_flag_takes_a_singular_verb() -> None:
    with pytest.raises(ConfigError, match="--fail-under acts on a behavioural run"):
        trigger_settings(True, 3, None, None, ["agent"], {"--fail-under": 0.5})


def test_an_unequal_epochs_headline_says_weighted() -> None:
    from reducer.epoch_weights import weighted_rate
    from reducer.scoring import headline

    said = headline(weighted_rate([(2, 2, 1), (1, 4, 2)]))
    assert "weighted equally" in said and "weighed" not in said
    # The raw counts do not give the percent (each case is rated by its first round): the label
    # says what the percent is and that the counts are all the verdicts, not the percent's.
    assert said.endswith("(each case rated by its first round and weighted equally; 3/6 verdicts in all)")


PRODUCT = ("bench", "engine", "harnesses", "producer", "reducer", "schemas", "testkit", "viewer", "worker")
HEDGE = re.compile(r"[a-z]\(s\)")


def test_no_product_message_hedges_a_count_with_an_s_in_brackets() -> None:
    # Every string a message is built from, and every template; docstrings and comments are not messages.
    root = Path(__file__).resolve().parent.parent
    hedged = []
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*.py")):
            tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
            for tok in tokens:
                doc = tok.string.lstrip("rbfuRBFU").startswith(('"""', "'''"))
                if tok.type == tokenize.STRING and not doc and HEDGE.search(re.sub(r"\{[^{}]*\}", "", tok.string)):
                    hedged.append(f"{path.relative_to(root)}:{tok.start[0]}")
        for path in sorted((root / top).rglob("*.html")):
            hedged += [
                f"{path.relative_to(root)}:{n}"
                for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if HEDGE.search(line)
            ]
    assert hedged == []
