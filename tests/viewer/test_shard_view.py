"""Evidence marking: a judge's quote found in the trajectory the page shows, whatever prefix it carries."""

from __future__ import annotations

from viewer.shard_view import mark


def test_a_quote_with_the_transcripts_prefix_is_found_without_it() -> None:
    text = 'shell({"command": "echo hi"})'
    parts = mark(text, [(1, '[tool_call] shell({"command": "echo hi"})')])
    assert parts == [{"text": text, "marks": [1]}]


def test_a_result_quote_with_its_header_line_is_found_in_the_output() -> None:
    text = "line one\nbuild ok\nline three\n"
    parts = mark(text, [(2, "[tool_result] shell exit=0\nbuild ok")])
    assert parts == [
        {"text": "line one\n", "marks": []},
        {"text": "build ok", "marks": [2]},
        {"text": "\nline three\n", "marks": []},
    ]


def test_overlapping_quotes_of_two_assertions_are_both_marked_and_text_is_kept_whole() -> None:
    text = "alpha beta gamma"
    parts = mark(text, [(1, "alpha beta"), (2, "beta gamma")])
    assert "".join(p["text"] for p in parts) == text
    assert parts == [
        {"text": "alpha ", "marks": [1]},
        {"text": "beta", "marks": [1, 2]},
        {"text": " gamma", "marks": [2]},
    ]


def test_a_quote_found_nowhere_marks_nothing() -> None:
    assert mark("nothing here", [(1, "invented evidence")]) == [{"text": "nothing here", "marks": []}]
