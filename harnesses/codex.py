"""The Codex adapter: ``codex exec --json`` (0.169) over the OpenAI Responses API.

- Model provider: a ``model_providers.skill-eval`` entry (``base_url`` the forwarder's
  loopback ``/v1``, ``env_key`` naming the variable that holds the placeholder key,
  ``wire_api = "responses"``: Codex speaks nothing else), given with ``-c`` overrides so no
  file from the host's ``~/.codex`` is read (``CODEX_HOME`` is the private HOME's).
- Skills: staged in the private HOME at ``.agents/skills/<name>/`` (user skills); explicit
  invocation is a ``$name`` mention. Codex has no Skill tool: activation is its SKILL.md
  being read by a command.
- The repo's instruction files never enter the prompt (docs/design/harnesses.md, "The repo's
  own agent configuration"): ``project_doc_max_bytes=0`` turns off its project docs
  (``AGENTS.md``, ``AGENTS.override.md`` and any fallback name, from the git root down to the
  workspace). The agent may still read them as files. Its repo skills (``.agents/skills``, which
  it loads with no switch to stop it) are hidden under an empty read-only folder inside the
  sandbox (:meth:`Codex.prepare`).
- Codex runs with its own sandbox and approvals off (ours is the sandbox), ephemeral, and
  outside a git check.
- Events (``--json``): ``item.completed`` items of type ``command_execution`` (command,
  aggregated output, exit code), ``agent_message`` and ``file_change`` (paths only: edit
  contents are rebuilt from the tool-call arguments the proxy saw); ``turn.completed``
  carries the usage. Stream items do not carry the model's call ids, so calls and results are
  paired with the proxy's record by order. A command still running at its yield time is handed back
  to the model with a session id, which the model polls with ``write_stdin``: the stream reports
  the command once, its whole output in its ``command_execution`` item, and no poll; a poll is
  claimed by its output in Codex's next request (the output the model was given is its result).
- Mocked MCP servers: one ``-c mcp_servers.<name>={command="python3", args=[...]}`` each.
  Codex lists a server's tools to the model as one Responses API ``namespace`` tool,
  ``mcp__<server>``, and the model calls ``<tool>`` in it; the proxy's record names that call
  ``mcp__<server>__<tool>`` (harnesses/model_record.py) and the stream's ``mcp_tool_call`` item
  (server, tool, arguments, result) claims it by that name and its input.
- Allowed tools: its proxy offers the model only the tools the case allows
  (:meth:`Codex.offered_tools`: Claude Code's names mapped to Codex's).
- A model of its built-in list (``gpt-5.5``...) is offered a freeform ``apply_patch`` (a ``custom``
  tool: its input is the patch text) and ``tool_search``, which Codex runs itself over the MCP
  tools it defers (its mocked tools among them); the proxy passes both (harnesses/request_rules.py).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harnesses.activations import skill_md_reads
from harnesses.adapter import HARNESS_CASE_TERMS, HarnessAdapter, names_skill_md, stage_skills
from harnesses.base import (
    FORWARDER_URL,
    PLACEHOLDER_KEY,
    HarnessPlan,
    HarnessRequest,
    Invoke,
    bare_model,
    case_text,
    mock_server,
)
from harnesses.crosscheck import OrderRules
from harnesses.endpoints import Protocol
from harnesses.repo_hiding import hidden_binds
from harnesses.stream_json import ParsedStream, json_objects, result_event
from schemas.trajectory import AssistantEvent, EndReason, Event, ToolCallEvent, Usage

KEY_VARIABLE = "SKILL_EVAL_PROXY_KEY"
REPO_CONFIG_DIRS = (".agents",)
"""The repo's folders Codex loads skills from (``.agents/skills``), with no switch to stop it:
hidden under an empty read-only folder inside the sandbox."""
CODEX_SERVER = "codex"
"""The server Codex's stream names for its own MCP resource tools. A mocked server of that name
would have its calls claimed as plain functions: they match none of its namespaced calls and are
rejected, never recorded as another tool's."""
_SHELL = ("exec_command", "write_stdin", "shell", "shell_command", "local_shell")
EQUIVALENTS: dict[str, tuple[str, ...]] = {
    "Bash": _SHELL,
    "shell": _SHELL,
    "Write": ("apply_patch",),
    "Edit": ("apply_patch",),
    "MultiEdit": ("apply_patch",),
    "write_file": ("apply_patch",),
    "edit_file": ("apply_patch",),
    "Read": ("view_image",),
    "read_file": ("view_image",),
}
"""A case's allowed tool (Claude Code's name or the built-in agent's) -> Codex's tools that do the
same. Codex has no file-reading or search tool of its own: its shell does that."""


class Codex(HarnessAdapter):
    """:class:`harnesses.base.Harness` for Codex."""

    name = "codex"
    package = "@openai/codex@0.169.0"
    binary_name = "codex"
    protocol: Protocol = "openai"
    stream_call_ids = False
    order_rules = OrderRules(
        shell_tools=frozenset({"shell", "exec_command", "shell_command", "local_shell"}),
        patch_tools=frozenset({"apply_patch"}),
        patch_claims=frozenset({"file_change"}),  # a patch applied: the stream lists only its paths
        namespaced_claims="mcp__",  # an MCP tool call: the stream names its server, tool and input
        named_claims=frozenset({"list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"}),
        answered_tools=frozenset({"write_stdin"}),  # a poll: no stream item; Codex's next request holds its output
    )
    # The npm launcher is a node script; the native binary it would start runs without node.
    native_binaries: tuple[str, ...] = ("codex-linux-*/vendor/*/bin/codex", "codex-linux-*/vendor/*/codex/codex")
    records_triggers = True
    honours = HARNESS_CASE_TERMS | {"mocks", "allowed_tools"}

    def plan(self, request: HarnessRequest) -> HarnessPlan:
        model = bare_model(request.model)
        provider = (
            f'{{name="skill-eval", base_url="{FORWARDER_URL}/v1", env_key="{KEY_VARIABLE}", wire_api="responses"}}'
        )
        argv = [
            request.binary,
            "exec",
            "--json",
            "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check",
            "--ephemeral",
            "-C",
            request.workspace,
            "-m",
            model,
            "-c",
            "model_provider=skill-eval",
            "-c",
            f"model_providers.skill-eval={provider}",
            "-c",
            "analytics.enabled=false",
            "-c",
            'web_search="disabled"',  # a provider-side tool: the proxy refuses a request offering it
            "-c",
            "project_doc_max_bytes=0",  # the repo's AGENTS.md (and AGENTS.override.md) never enter the prompt
            *_mock_server_args(request),
            "-",
        ]
        home_files = stage_skills(request, ".agents/skills")
        # CODEX_HOME must exist; nothing from the host's ~/.codex is ever read.
        home_files[".codex/config.toml"] = b"# written by skill-eval; the run's settings come as -c overrides\n"
        text = case_text(request)
        if request.invoke is Invoke.EXPLICIT:
            text = f"${request.skill} {text}"
        env = {
            "HOME": request.home,
            "CODEX_HOME": posixpath.join(request.home, ".codex"),
            KEY_VARIABLE: PLACEHOLDER_KEY,
            "NO_UPDATE_NOTIFIER": "1",
        }
        return HarnessPlan(argv=tuple(argv), env=env, stdin=text + "\n", home_files=home_files, skill_ref=request.skill)

    def prepare(self, found: Path, workspace: Path, inner_root: str, scratch: Path) -> tuple[Path, list[str]]:
        """The binary as it is, and the repo's skill folders hidden under an empty one."""
        return found, hidden_binds(REPO_CONFIG_DIRS, workspace, inner_root, scratch)

    def read_stream(self, lines: Iterable[str]) -> ParsedStream:
        return read_codex_json(lines)

    def offered_tools(self, request: HarnessRequest) -> frozenset[str] | None:
        """The case's allowed tools in Codex's names (a mocked tool keeps its ``mcp__`` name, which
        is its namespace's and its own); Codex has no flag that limits its built-in tools."""
        if request.allowed_tools is None:
            return None
        names = frozenset(n for a in request.allowed_tools for n in (a, *EQUIVALENTS.get(a, ())))
        # With a model of its built-in list, Codex defers MCP tools: the model finds them by its search.
        return names | {"tool_search"} if any(n.startswith("mcp__") for n in names) else names

    def activated(self, events: Iterable[Event], skill: str, skill_ref: str, body_sent: bool) -> bool:
        # No Skill tool: a $name mention injects the body into the request, or a command reads it.
        return body_sent or any(isinstance(e, ToolCallEvent) and names_skill_md(e, skill) for e in events)

    def skills_in(self, event: ToolCallEvent, installed: frozenset[str]) -> list[str]:
        """No Skill tool: a command whose arguments name a skill's SKILL.md."""
        return skill_md_reads(event.arguments, installed)


def _mock_server_args(request: HarnessRequest) -> list[str]:
    """One ``-c mcp_servers.<name>={command=..., args=[...]}`` per mocked server (names are letters,
    digits, ``_`` and ``-``: schemas/mocks.py). The values are written as JSON, which TOML reads
    the same for strings and arrays of strings."""
    args: list[str] = []
    for name in sorted(request.mock_servers):
        server = ", ".join(f"{key}={json.dumps(value)}" for key, value in mock_server(name).items())
        args += ["-c", f"mcp_servers.{name}={{{server}}}"]
    return args


def _command_text(command: Any) -> str:
    return " ".join(str(c) for c in command) if isinstance(command, list) else str(command or "")


def _command_started(out: ParsedStream, started: set[str], item: dict[str, Any]) -> None:
    """A command the harness ran: claimed once, when it starts (a command still running when the
    model goes on, or when the shard ends, has no ``item.completed``)."""
    item_id = str(item.get("id", ""))
    if item_id not in started:
        started.add(item_id)
        command = _command_text(item.get("command"))
        out.events.append(ToolCallEvent(call_id=item_id, name="shell", arguments={"command": command}))


def _mcp_call(out: ParsedStream, started: set[str], item: dict[str, Any], *, done: bool) -> None:
    """An MCP tool call the harness made: claimed once by ``mcp__<server>__<tool>`` and its input;
    its result (the content's text, or the error) when it completed."""
    item_id = str(item.get("id", ""))
    if item_id not in started:
        started.add(item_id)
        raw, server, tool = item.get("arguments"), item.get("server", ""), item.get("tool", "")
        # Its own MCP resource tools are reported as calls of its own server: plain functions.
        name = str(tool) if server == CODEX_SERVER else f"mcp__{server}__{tool}"
        out.events.append(ToolCallEvent(call_id=item_id, name=name, arguments=raw if isinstance(raw, dict) else {}))
    if not done:
        return
    result, error = item.get("result"), item.get("error")
    content = result.get("content") if isinstance(result, dict) else None
    text = "\n".join(str(c.get("text", "")) for c in content or [] if isinstance(c, dict) and c.get("type") == "text")
    if isinstance(error, dict | str) and not text:
        text = str(error.get("message", "")) if isinstance(error, dict) else error
    flagged = isinstance(result, dict) and bool(result.get("is_error"))
    failed = error is not None or item.get("status") == "failed" or flagged
    out.events.append(result_event(item_id, text, 1 if failed else 0))


def read_codex_json(lines: Iterable[str]) -> ParsedStream:
    """Parse ``codex exec --json`` lines (junk skipped); call ids are the stream's item ids."""
    out = ParsedStream()
    prompt = completion = turns = 0
    started: set[str] = set()
    for data in json_objects(lines, out):
        kind, item = data.get("type"), data.get("item") or {}
        if kind == "item.started" and isinstance(item, dict) and item.get("type") == "command_execution":
            _command_started(out, started, item)
        elif kind == "item.started" and isinstance(item, dict) and item.get("type") == "mcp_tool_call":
            _mcp_call(out, started, item, done=False)
        elif kind == "item.completed" and isinstance(item, dict):
            item_id, item_type = str(item.get("id", "")), item.get("type")
            if item_type == "agent_message" and str(item.get("text", "")).strip():
                out.events.append(AssistantEvent(text=str(item["text"])))
            elif item_type == "command_execution":
                _command_started(out, started, item)
                code = item.get("exit_code")
                output = str(item.get("aggregated_output", ""))
                out.events.append(result_event(item_id, output, code if isinstance(code, int) else None))
            elif item_type == "mcp_tool_call":
                _mcp_call(out, started, item, done=True)
            elif item_type == "file_change":  # a patch applied: claims the model's patch call by its paths
                changes = item.get("changes")
                paths = [str(c.get("path", "")) for c in changes or [] if isinstance(c, dict)]
                out.events.append(ToolCallEvent(call_id=item_id, name="file_change", arguments={"paths": paths}))
        elif kind == "turn.completed":
            out.saw_result = True
            usage = data.get("usage") or {}
            prompt += int(usage.get("input_tokens") or 0)
            completion += int(usage.get("output_tokens") or 0)
            turns += 1
        elif kind in ("turn.failed", "error"):
            out.result_is_error = True
    out.usage = Usage(prompt_tokens=prompt, completion_tokens=completion, calls=turns)
    out.end_reason = EndReason.COMPLETED
    return out
