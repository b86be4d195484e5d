"""The Claude Code adapter: ``claude -p --output-format stream-json --verbose``.

- Skill staging: a repo that ships ``.claude-plugin/plugin.json`` is loaded as a plugin with
  ``--plugin-dir <workspace>`` (the skill is then ``<plugin>:<skill>``); otherwise the skill
  folder is staged in the private HOME at ``.claude/skills/<name>/``, not in the workspace,
  where it would show in ``git status`` and the diffs the judge reads.
- Settings: ``--setting-sources user`` (the private HOME's only) so the repo's
  ``.claude/settings.json`` and its hooks never run; ``--settings`` pins the model and the
  environment; ``--strict-mcp-config`` keeps every MCP server out. A plugin's own hooks do
  run (inside the sandbox): they are part of what the plugin's users get.
- The repo's instruction files never enter the prompt (docs/design/harnesses.md, "The repo's
  own agent configuration"): ``CLAUDE_CODE_DISABLE_CLAUDE_MDS`` turns off every ``CLAUDE.md``,
  ``.claude/CLAUDE.md``, ``.claude/rules/`` and ``CLAUDE.local.md``, the workspace's and those
  of the subfolders it reads in. The agent may still read them as files.
- Traffic: one model, everywhere (background, sub-agent and fallback models pinned to the
  shard's), telemetry, auto-update, error reporting and non-essential traffic off.
- Activation: a ``Skill`` tool call naming the skill, or a read of its SKILL.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from types import MappingProxyType

from harnesses.activations import named_skill, skill_md_reads
from harnesses.adapter import JSON_HEADERS, HarnessAdapter, stage_skills
from harnesses.base import (
    FORWARDER_URL,
    PLACEHOLDER_KEY,
    HarnessPlan,
    HarnessRequest,
    bare_model,
    mock_server,
)
from harnesses.endpoints import Protocol
from harnesses.stream_json import ParsedStream, read_stream_json
from schemas.trajectory import ToolCallEvent


class ClaudeCode(HarnessAdapter):
    """:class:`harnesses.base.Harness` for Claude Code."""

    name = "claude-code"
    package = "@anthropic-ai/claude-code@2.1.328"
    binary_name = "claude"
    protocol: Protocol = "anthropic"
    forward_headers = JSON_HEADERS | {"anthropic-version", "anthropic-beta"}
    betas: frozenset[str] | None = frozenset(
        {
            # What 2.1.328 sends with every request (docs/design/harnesses.md says what each is for).
            "claude-code-20250219",
            "interleaved-thinking-2025-05-14",
            "context-management-2025-06-27",
            "thinking-token-count-2026-05-13",
            "advanced-tool-use-2025-11-20",
            "thinking-display-updates-2026-08-18",
        }
    )
    answered_empty = frozenset({"/api/claude_cli/bootstrap"})
    loads_plugins = True
    write_tools = MappingProxyType(
        {
            "Write": ("file_path",),
            "Edit": ("file_path",),
            "MultiEdit": ("file_path",),
            "NotebookEdit": ("notebook_path",),
        }
    )
    honours = frozenset({"mocks", "http_mocks", "allowed_tools", "max_turns", "timeout_s"})
    records_triggers = True
    read_tools = frozenset({"Read", "Bash", "Grep", "Glob"})

    def environment(self, model: str, home: str) -> dict[str, str]:
        """The variables Claude Code reads: the proxy's loopback URL, the placeholder key, one model."""
        return {
            "HOME": home,
            "ANTHROPIC_BASE_URL": FORWARDER_URL,
            "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
            "ANTHROPIC_SMALL_FAST_MODEL": model,
            "CLAUDE_CODE_SUBAGENT_MODEL": model,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # The repo's instruction files (CLAUDE.md, .claude/CLAUDE.md, .claude/rules/,
            # CLAUDE.local.md, and those of subfolders it reads in) never enter the prompt.
            "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
        }

    def plan(self, request: HarnessRequest) -> HarnessPlan:
        model = bare_model(request.model)
        env = self.environment(model, request.home)
        if request.mock_servers:
            env["ENABLE_TOOL_SEARCH"] = "false"  # the mocked tools offered up front, as a declared server's are
        settings = {"model": model, "env": {k: v for k, v in env.items() if k != "HOME"}}
        argv = [
            request.binary,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            model,
            "--dangerously-skip-permissions",
            "--strict-mcp-config",
            "--setting-sources",
            "user",
            "--settings",
            json.dumps(settings, sort_keys=True),
        ]
        argv += _case_tool_args(request)
        home_files: dict[str, bytes] = {}
        if request.plugin_name:
            argv += ["--plugin-dir", request.workspace]
            skill_ref = f"{request.plugin_name}:{request.skill}"
        else:
            skill_ref = request.skill
            home_files = stage_skills(request, ".claude/skills")
        return HarnessPlan.prompted(request, argv, env, home_files, skill_ref)

    def read_stream(self, lines: Iterable[str]) -> ParsedStream:
        return read_stream_json(lines)

    def loads_skill(self, event: ToolCallEvent, skill: str, skill_ref: str) -> bool:
        """A ``Skill`` call naming it: plain, ``/``-prefixed, or ``<plugin>:<skill>``."""
        value = str(event.arguments.get("skill") or event.arguments.get("command") or "").lstrip("/")
        return event.name == "Skill" and (value in (skill, skill_ref) or value.endswith(":" + skill))

    def reads_skill_md(self, event: ToolCallEvent, skill: str) -> bool:
        needle = f"skills/{skill}/SKILL.md"
        return any(isinstance(v, str) and needle in v for v in event.arguments.values())

    def skills_in(self, event: ToolCallEvent, installed: frozenset[str]) -> list[str]:
        """A ``Skill`` call naming it (plain, ``/``-prefixed or ``plugin:skill``), or a read of its SKILL.md."""
        if event.name == "Skill":
            found = named_skill(event.arguments.get("skill") or event.arguments.get("command"), installed)
            return [found] if found else []
        return skill_md_reads(event.arguments, installed) if event.name in self.read_tools else []


def _case_tool_args(request: HarnessRequest) -> list[str]:
    """``--mcp-config`` for the mocked servers (``--strict-mcp-config`` keeps every other out),
    ``--tools`` for the allowed built-in tools, ``--disallowedTools`` for mocked tools not allowed."""
    args: list[str] = []
    if request.mock_servers:
        servers = {name: {"type": "stdio", **mock_server(name)} for name in sorted(request.mock_servers)}
        args += ["--mcp-config", json.dumps({"mcpServers": servers}, sort_keys=True)]
    if request.allowed_tools is None:
        return args
    allowed = set(request.allowed_tools)
    args += ["--tools", ",".join(request.allowed_tools)]
    refused = [
        f"mcp__{name}__{tool}"
        for name, tools in sorted(request.mock_servers.items())
        for tool in tools
        if f"mcp__{name}__{tool}" not in allowed
    ]
    return args + (["--disallowedTools", ",".join(refused)] if refused else [])
