"""Instruction files a harness appends to a tool result on its own, taken out before the model sees them.

Two pinned harnesses read a subfolder's instruction file whenever a tool reaches a file there,
with no switch to stop it, and append it to that tool's result:

- OpenCode 1.18.33's ``read`` tool: after the file's ``</content>``, a ``<system-reminder>``
  block of ``Instructions from: <path>`` sections (a subfolder's ``AGENTS.md`` or ``CONTEXT.md``);
- Gemini CLI 0.61.0's file tools (its "JIT context"): after the result, a ``--- Newly
  Discovered Project Context ---`` block of a subfolder's ``GEMINI.md`` files (or the same
  block as a part of its own).

Covering those files inside the sandbox (:mod:`harnesses.repo_hiding`) keeps out the ones that
exist when the shard starts; a file the repo's code (a ``setup.sh`` the agent runs) or the agent
writes later would still reach the model. So the proxy takes the block out of every request of
those harnesses (docs/design/harnesses.md, "The repo's own agent configuration"). The block is
the harness's own, at the end of the result: a file's text cannot end OpenCode's result with it
(every line of the file there is numbered), and in Gemini CLI's a file that ends with a forged
block only hides its own tail from the model.

Pure: dicts in, dicts out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_OPENCODE = re.compile(r"(\n</content>)\n*<system-reminder>\nInstructions from: .*</system-reminder>\s*\Z", re.DOTALL)
_GEMINI_PREFIX = "\n\n--- Newly Discovered Project Context ---\n"
_GEMINI_SUFFIX = "\n--- End Project Context ---"
_GEMINI = re.compile(re.escape(_GEMINI_PREFIX) + ".*" + re.escape(_GEMINI_SUFFIX) + r"\Z", re.DOTALL)


def _opencode_text(text: str) -> str:
    return _OPENCODE.sub(r"\1", text)


def _strip_opencode(body: dict[str, Any]) -> dict[str, Any]:
    """Chat completions: every ``tool`` message's text."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    out = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, str):
                message = {**message, "content": _opencode_text(content)}
            elif isinstance(content, list):
                parts = [
                    {**p, "text": _opencode_text(p["text"])}
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                    else p
                    for p in content
                ]
                message = {**message, "content": parts}
        out.append(message)
    return {**body, "messages": out}


def _gemini_part(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    response = part.get("functionResponse")
    if isinstance(response, dict) and isinstance(response.get("response"), dict):
        values = {k: _GEMINI.sub("", v) if isinstance(v, str) else v for k, v in response["response"].items()}
        return {**part, "functionResponse": {**response, "response": values}}
    return part


def _jit_part(part: Any) -> bool:
    """A part of its own holding only the block (what Gemini CLI adds to a non-text result)."""
    text = part.get("text") if isinstance(part, dict) else None
    return isinstance(text, str) and text.startswith(_GEMINI_PREFIX) and text.endswith(_GEMINI_SUFFIX)


def _strip_gemini(body: dict[str, Any]) -> dict[str, Any]:
    """The Gemini API: every part of every content, a function's response or a text of its own."""
    contents = body.get("contents")
    if not isinstance(contents, list):
        return body
    out = []
    for content in contents:
        parts = content.get("parts") if isinstance(content, dict) else None
        if isinstance(parts, list) and content.get("role") != "model":
            content = {**content, "parts": [_gemini_part(p) for p in parts if not _jit_part(p)]}
        out.append(content)
    return {**body, "contents": out}


APPENDED_CONTEXT: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "opencode": _strip_opencode,
    "gemini-cli": _strip_gemini,
}
"""Per harness name, the request body without the instruction files it appended to tool results."""


def without_appended_context(harness: str | None, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without what ``harness`` appended on its own (the same body for any other harness)."""
    strip = APPENDED_CONTEXT.get(harness or "")
    return body if strip is None else strip(body)
