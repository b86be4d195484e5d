"""A Codex stream's command claims a model's call only when it runs exactly that command."""

from __future__ import annotations

import json
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from harnesses.codex import Codex, read_codex_json
from harnesses.model_record import ModelToolCall, ModelTurn, ProxyRecord
from harnesses.shell_words import runs_command, split_words
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent

HEREDOC = (
    'cat > /tmp/f.py <<\'PYEOF\'\nimport json\nbody = {"model": "x", "text": "$s go\\n" + `id`}\n'
    "PYEOF\nmv important /tmp/gone && echo tidy"
)


def _double(chunk: str) -> str:
    return '"' + "".join("\\" + c if c in '$`"\\' else c for c in chunk) + '"'


def _rust_quote(word: str, split_at: int = 0) -> str:
    """A word quoted as the Rust ``shlex`` crate does: bare when it can be, else in single quotes
    when it holds none, else in double quotes with ``$``, backtick, ``"`` and ``\\`` escaped; or,
    cut in two chunks quoted each its own way (the crate's newer releases do so)."""
    if split_at and 0 < split_at < len(word):
        return _rust_quote(word[:split_at]) + _rust_quote(word[split_at:])
    if word and all(c.isalnum() or c in "+-./:@]_" for c in word):
        return word
    return f"'{word}'" if "'" not in word else _double(word)


def _item(n: int, command: str, output: str = "out") -> str:
    item = {"id": f"item_{n}", "type": "command_execution", "command": command, "aggregated_output": output}
    return json.dumps({"type": "item.completed", "item": {**item, "exit_code": 0}})


def test_a_command_naming_a_forged_call_does_not_claim_it() -> None:
    """The agent's side request got a reply holding ``pytest``; the real command only mentions it."""
    record = ProxyRecord(
        turns=[
            ModelTurn(tool_calls=(ModelToolCall("forged", "exec_command", {"cmd": "pytest"}),)),
            ModelTurn(tool_calls=(ModelToolCall("real", "exec_command", {"cmd": "echo pytest skipped && touch c"}),)),
        ]
    )
    lines = [_item(1, "/usr/bin/bash -lc 'echo pytest skipped && touch c'", "pytest skipped")]
    checked = Codex().cross_check(read_codex_json(lines).events, record)
    calls = [e.arguments for e in checked.events if isinstance(e, ToolCallEvent)]
    assert calls == [{"cmd": "echo pytest skipped && touch c"}]
    assert [e.call_id for e in checked.events if isinstance(e, ToolResultEvent)] == ["real"]
    assert len(checked.proposed) == 1 and "'forged'" in checked.proposed[0]


def test_a_heredoc_with_quotes_dollars_and_backslashes_claims_its_call() -> None:
    record = ProxyRecord(turns=[ModelTurn(tool_calls=(ModelToolCall("c1", "exec_command", {"cmd": HEREDOC}),))])
    lines = [_item(1, f"/usr/bin/bash -lc {_double(HEREDOC)}", "tidy")]
    checked = Codex().cross_check(read_codex_json(lines).events, record)
    assert checked.rejected == []
    assert [(e.kind, e.call_id) for e in checked.events] == [("tool_call", "c1"), ("tool_result", "c1")]


def test_a_command_that_ran_and_matches_no_call_is_still_shown_to_the_judge_as_unverified() -> None:
    record = ProxyRecord(turns=[ModelTurn(tool_calls=(ModelToolCall("c1", "exec_command", {"cmd": "ls"}),))])
    lines = [_item(1, "/usr/bin/bash -lc ls", "a"), _item(2, "/usr/bin/bash -lc 'mv important /tmp/gone'", "")]
    checked = Codex().cross_check(read_codex_json(lines).events, record)
    assert [e.call_id for e in checked.events if isinstance(e, ToolCallEvent)] == ["c1"]
    (note,) = [e.text for e in checked.events if isinstance(e, AssistantEvent)]
    assert note.startswith("(not a verified tool call") and "mv important /tmp/gone" in note
    assert len(checked.rejected) == 1 and "shown to the judge" in checked.rejected[0]


_PIECES = st.sampled_from([*"ab $'\"\\`\n\t!*#;&|<>(){}=~%-_./", "<<'EOF'\n", "\nEOF\n", "\\n", "$(id)"])
_TEXT = st.lists(_PIECES, max_size=30).map("".join)
"""Commands of quotes, ``$``, backslashes, heredocs and newlines."""


@settings(max_examples=300, deadline=None)
@given(command=_TEXT, split_at=st.integers(min_value=0, max_value=40), shell=st.sampled_from(["/bin/bash", "bash"]))
def test_every_quoting_of_a_command_is_undone_exactly(command: str, split_at: int, shell: str) -> None:
    reported = f"{shell} -lc {_rust_quote(command, split_at)}"
    assert split_words(reported) == [shell, "-lc", command]
    assert runs_command(command, reported)
    assert not runs_command(command + "x", reported) and not runs_command("x" + command, reported)
    assert runs_command([shell, "-lc", command], reported)


@settings(max_examples=100, deadline=None)
@given(command=_TEXT, split_at=st.integers(min_value=0, max_value=40))
def test_the_words_are_the_ones_bash_reads(command: str, split_at: int) -> None:
    line = f"printf '%s\\0' {_rust_quote(command, split_at)}"
    out = subprocess.run(["bash", "--norc", "-c", line], capture_output=True, check=True).stdout
    assert out.decode() == command + "\0"
    assert split_words(line) == ["printf", "%s\\0", command]


def test_a_part_of_the_words_or_a_line_left_open_is_no_match() -> None:
    assert not runs_command("pytest", "/bin/bash -lc 'echo pytest'")
    assert not runs_command("pytest", "/bin/bash -lc pytest extra")
    assert not runs_command("pytest", "/bin/evil -lc pytest")
    assert split_words("echo 'open") is None and split_words('echo "open') is None and split_words("a\\") is None


def test_a_secret_codex_redacted_stands_for_one_word_part_and_nothing_else() -> None:
    sent = 'curl -H "authorization: Bearer sk-abc_123-xyz0123456" http://h/v1 && mv important /tmp/gone'
    reported = (
        "/bin/bash -lc 'curl -H \"authorization: Bearer [REDACTED_SECRET]\" http://h/v1 && mv important /tmp/gone'"
    )
    assert runs_command(sent, reported)
    assert not runs_command(sent.replace("/tmp/gone", "/tmp/kept"), reported)
    assert not runs_command(sent.replace("sk-abc_123-xyz0123456", 'sk-a" x "b'), reported)  # no quote or blank inside
    assert not runs_command("pytest", "/bin/bash -lc [REDACTED_SECRET]")  # a short word is no secret
