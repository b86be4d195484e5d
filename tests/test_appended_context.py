"""The instruction files OpenCode and Gemini CLI append to a tool result on their own are taken out
of the request (harnesses/appended_context.py); the tool's own result stays whole."""

from __future__ import annotations

from harnesses.appended_context import without_appended_context

READ = (
    "<path>/workspace/lib/notes.txt</path>\n<type>file</type>\n<content>\n1: plain notes\n\n"
    "(End of file - total 1 lines)\n</content>"
)
REMINDER = "\n\n<system-reminder>\nInstructions from: /workspace/lib/AGENTS.md\nRepo rule.\n\n</system-reminder>"
JIT = (
    "\n\n--- Newly Discovered Project Context ---\n--- Context from: /workspace/lib/GEMINI.md ---\nRepo rule.\n"
    "--- End of Context from: /workspace/lib/GEMINI.md ---\n--- End Project Context ---"
)


def _tool(content: object) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "c", "content": content}]}


def test_opencode_s_system_reminder_after_a_read_is_taken_out() -> None:
    assert without_appended_context("opencode", _tool(READ + REMINDER)) == _tool(READ)
    parts = [{"type": "text", "text": READ + REMINDER}]
    assert without_appended_context("opencode", _tool(parts)) == _tool([{"type": "text", "text": READ}])
    # Anything else stays: a read without the block, the user's own words, another harness's request.
    assert without_appended_context("opencode", _tool(READ)) == _tool(READ)
    assert without_appended_context("claude-code", _tool(READ + REMINDER)) == _tool(READ + REMINDER)


def _gemini(*parts: object) -> dict[str, object]:
    return {"contents": [{"role": "user", "parts": list(parts)}]}


def _response(output: str) -> dict[str, object]:
    return {"functionResponse": {"name": "read_file", "id": "r", "response": {"output": output}}}


def test_gemini_cli_s_newly_discovered_project_context_is_taken_out() -> None:
    assert without_appended_context("gemini-cli", _gemini(_response("plain notes\n" + JIT))) == _gemini(
        _response("plain notes\n")
    )
    image = {"inlineData": {"mimeType": "image/png", "data": "AA"}}
    assert without_appended_context("gemini-cli", _gemini(image, {"text": JIT})) == _gemini(image)
    # The model's own turns and the prompt are not results: left alone.
    model_turn = {"contents": [{"role": "model", "parts": [{"text": JIT}]}]}
    assert without_appended_context("gemini-cli", model_turn) == model_turn
    assert without_appended_context("gemini-cli", _gemini({"text": "see " + JIT + " here"})) == _gemini(
        {"text": "see " + JIT + " here"}
    )
