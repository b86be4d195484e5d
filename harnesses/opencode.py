"""The OpenCode adapter: ``opencode run --format json`` (1.18) over OpenAI chat completions.

- Model provider: one custom provider ``skill-eval`` in the private HOME's global config
  (``~/.config/opencode/opencode.json``), built on the bundled ``@ai-sdk/openai-compatible``
  package (nothing is installed at run time), ``baseURL`` the forwarder's loopback ``/v1``
  and the placeholder key; ``enabled_providers`` keeps every other provider out.
- One model: ``model``, ``small_model`` (titles, summaries) and the built-in agents' models
  (``title``, ``summary``, ``compaction``, ``general``, ``explore``) all name the shard's
  model, so the proxy's pinning never refuses OpenCode's own calls. ``--title`` names the
  session, so no title request is made at all.
- Skills: the skill folder staged in the private HOME at ``.config/opencode/skills/<name>/``
  (a user skill); OpenCode offers it through its ``skill`` tool. Explicit invocation is the
  instruction to use it, as for Claude Code.
- The repo's own configuration never applies (docs/design/harnesses.md, "The repo's own agent
  configuration"): ``OPENCODE_DISABLE_PROJECT_CONFIG`` (its ``opencode.json``, ``.opencode/``
  agents, commands and plugins, and the workspace's ``AGENTS.md`` and ``CONTEXT.md``),
  ``OPENCODE_DISABLE_CLAUDE_CODE`` (its ``.claude/`` skills and every ``CLAUDE.md``),
  ``OPENCODE_DISABLE_EXTERNAL_SKILLS`` (``.agents/skills``), ``--pure`` (no plugins). Its
  ``read`` tool also appends the ``AGENTS.md`` or ``CONTEXT.md`` of the subfolders between the
  file read and the workspace, with no switch to stop it: those (:data:`NESTED_INSTRUCTIONS`)
  are covered by empty read-only files inside the sandbox (:meth:`OpenCode.prepare`), the last
  resort, as it also hides them from the agent's reads. The workspace's own stay readable. It
  looks them up at each read, so one written while the case runs (the repo's ``setup.sh``)
  would still be appended: the proxy takes that ``<system-reminder>`` block out of every
  request (:mod:`harnesses.appended_context`).
- Traffic: the models.dev fetch, auto-update, sharing, LSP downloads and default plugins
  off; LSP, formatters and workspace snapshots off (they cost start-up time and do nothing
  the judge reads). Permissions are ``allow``: the sandbox is ours.
- Events (``--format json``): ``tool_use`` parts carry the model's own call id
  (``callID``), the tool, its input and its output or error; ``text`` parts the assistant's
  text; ``step_finish`` the tokens of each model call; ``error`` a failed session.
- Activation: a ``skill`` tool call naming the skill, or a read of its SKILL.md.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harnesses.adapter import HarnessAdapter, stage_skills
from harnesses.base import FORWARDER_URL, PLACEHOLDER_KEY, HarnessPlan, HarnessRequest, bare_model
from harnesses.endpoints import Protocol
from harnesses.repo_hiding import HiddenFiles, hidden_file_binds
from harnesses.stream_json import ERROR_PREFIX, ParsedStream, json_objects, result_event
from schemas.trajectory import AssistantEvent, EndReason, ToolCallEvent, Usage

PROVIDER = "skill-eval"
NESTED_INSTRUCTIONS = HiddenFiles(("AGENTS.md", "CONTEXT.md"), nested_only=True)
"""The instruction files the pinned version's ``read`` tool appends from a subfolder of the file it
read, whatever its switches (``CLAUDE.md`` too, but ``OPENCODE_DISABLE_CLAUDE_CODE`` stops that)."""
PLUGIN_LOCK = json.dumps({"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}).encode()
SESSION_TITLE = "skill-eval"
_PINNED_AGENTS = ("title", "summary", "compaction", "general", "explore")
ENVIRONMENT = {
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
}
"""Switches of the pinned version: no repo configuration, no traffic but the model's."""


class OpenCode(HarnessAdapter):
    """:class:`harnesses.base.Harness` for OpenCode."""

    name = "opencode"
    package = "opencode-ai@1.18.33"
    binary_name = "opencode"
    protocol: Protocol = "openai"
    read_tools = frozenset({"read", "bash", "grep", "glob"})
    hidden_files: HiddenFiles | None = NESTED_INSTRUCTIONS
    # forward_headers: what the upstream needs; its user-agent and session-id headers are not forwarded.

    def config(self, model: str) -> dict[str, Any]:
        """The global ``opencode.json``: one provider at the proxy, one model everywhere."""
        pinned = f"{PROVIDER}/{model}"
        return {
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": PROVIDER,
                    "options": {"baseURL": f"{FORWARDER_URL}/v1", "apiKey": PLACEHOLDER_KEY},
                    "models": {model: {"name": model, "tool_call": True}},
                }
            },
            "enabled_providers": [PROVIDER],
            "model": pinned,
            "small_model": pinned,
            "agent": {agent: {"model": pinned} for agent in _PINNED_AGENTS},
            "autoupdate": False,
            "share": "disabled",
            "snapshot": False,
            "lsp": False,
            "formatter": False,
            "permission": "allow",
        }

    def plan(self, request: HarnessRequest) -> HarnessPlan:
        model = bare_model(request.model)
        home_files = stage_skills(request, ".config/opencode/skills")
        home_files[".config/opencode/opencode.json"] = json.dumps(self.config(model), indent=2).encode()
        # OpenCode npm-installs its plugin package into every config folder that lacks it, in
        # the background, and waits for that on exit: offline, a minute of retries. A lock file
        # naming it (and a node_modules folder) is what it checks.
        home_files[".config/opencode/node_modules/.skill-eval"] = b""
        home_files[".config/opencode/package-lock.json"] = PLUGIN_LOCK
        argv = (
            request.binary,
            "run",
            "--pure",
            "--format",
            "json",
            "--model",
            f"{PROVIDER}/{model}",
            "--title",
            SESSION_TITLE,
            "--dir",
            request.workspace,
        )
        env = {
            "HOME": request.home,
            "XDG_CONFIG_HOME": posixpath.join(request.home, ".config"),
            "XDG_DATA_HOME": posixpath.join(request.home, ".local", "share"),
            "XDG_CACHE_HOME": posixpath.join(request.home, ".cache"),
            "XDG_STATE_HOME": posixpath.join(request.home, ".local", "state"),
            **ENVIRONMENT,
        }
        return HarnessPlan.prompted(request, argv, env, home_files)

    def prepare(self, found: Path, workspace: Path, inner_root: str, scratch: Path) -> tuple[Path, list[str]]:
        """The binary as it is, and the subfolders' instruction files its ``read`` tool would
        append covered by empty read-only files."""
        return found, hidden_file_binds(NESTED_INSTRUCTIONS, workspace, inner_root, scratch)

    def read_stream(self, lines: Iterable[str]) -> ParsedStream:
        return read_opencode_json(lines)

    def loads_skill(self, event: ToolCallEvent, skill: str, skill_ref: str) -> bool:
        """A ``skill`` call naming it (the tool's result holds the body)."""
        return event.name == "skill" and str(event.arguments.get("name", "")) in (skill, skill_ref)


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (the stream is not trusted to be well formed)."""
    return value if isinstance(value, dict) else {}


def _tool_part(out: ParsedStream, part: dict[str, Any]) -> None:
    state = _obj(part.get("state"))
    call_id, status = str(part.get("callID", "")), state.get("status")
    arguments = _obj(state.get("input"))
    out.events.append(ToolCallEvent(call_id=call_id, name=str(part.get("tool", "")), arguments=arguments))
    if status == "completed":
        metadata = _obj(state.get("metadata"))
        code = metadata.get("exit")
        output = str(state.get("output", ""))
        out.events.append(result_event(call_id, output, code if isinstance(code, int) else None))
    elif status == "error":
        out.events.append(result_event(call_id, ERROR_PREFIX + str(state.get("error", ""))))


def read_opencode_json(lines: Iterable[str]) -> ParsedStream:
    """Parse ``opencode run --format json`` lines (junk skipped); call ids are the model's."""
    out = ParsedStream()
    prompt = completion = steps = 0
    for data in json_objects(lines, out):
        kind, part = data.get("type"), _obj(data.get("part"))
        if kind == "tool_use":
            _tool_part(out, part)
        elif kind == "text" and str(part.get("text", "")).strip():
            out.events.append(AssistantEvent(text=str(part["text"])))
        elif kind == "step_finish":
            tokens = _obj(part.get("tokens"))
            prompt += int(tokens.get("input") or 0)
            completion += int(tokens.get("output") or 0)
            steps += 1
            out.saw_result = out.saw_result or part.get("reason") == "stop"
        elif kind == "error":
            out.result_is_error = True
    out.usage = Usage(prompt_tokens=prompt, completion_tokens=completion, calls=steps)
    out.end_reason = EndReason.COMPLETED
    return out
