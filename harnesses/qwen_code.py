"""The Qwen Code adapter: ``qwen`` (0.24) headless with ``--output-format stream-json`` over OpenAI chat completions.

- Endpoint: ``--auth-type openai`` with ``OPENAI_BASE_URL`` the forwarder's loopback ``/v1``,
  the placeholder as ``OPENAI_API_KEY`` and ``OPENAI_MODEL`` the shard's model; requests go
  to ``/v1/chat/completions`` (streamed, usage in the last chunk).
- One model: ``-m`` and ``model.name`` name the shard's model, and so do the settings of
  every model it may call on its own (``fastModel`` for suggestions and titles,
  ``compactionModel``, ``visionModel``, which would otherwise pick a vision model of the
  same provider, ``advisorModel``), so the proxy's pinning never refuses its own calls.
- Skills: the skill folder staged in the private HOME at ``.qwen/skills/<name>/`` (a user
  skill); Qwen Code lists it in an ``<available_skills>`` reminder and loads it through its
  ``skill`` tool, whose result is the body. ``skills.disabledLevels`` turns off the skills it
  bundles (``review``, ``batch``, ...), the repo's own (``.qwen/skills``) and extensions'.
- The repo's own configuration never applies: its ``.qwen/`` (workspace settings, hooks,
  skills, agents, commands, ``QWEN.local.md``) is hidden under an empty read-only folder
  inside the sandbox (:meth:`QwenCode.prepare`), and ``context.fileName`` names the context
  file inside that hidden folder, so no ``QWEN.md`` or ``AGENTS.md`` the repo ships is read.
  The machine-wide settings (``/etc/qwen-code/``) name files that do not exist.
- Traffic: telemetry, usage statistics, auto-update, chat recording and the IDE companion
  off; ``QWEN_CODE_NO_RELAUNCH`` keeps it one process (``cli.js`` is run directly, not its
  launcher, which would look for a self-updated copy in HOME). ``--yolo`` approves every
  tool: the sandbox is ours.
- Shell: a plain child process (its pseudo-terminal loses long output); ``BASH_ENV`` makes the
  shell of each call linger 1 s after the command, since the pinned version returns on the
  shell's exit without draining its pipes and could lose the output of a quick command.
- Runtime: the package is a node script with its chunks beside it; its folder is bound
  read-only and the sandbox's node (sealed execute-only) runs it
  (:func:`harnesses.node_script.node_script_runtime`).
- Events (``stream-json``): Claude Code's shape (``assistant`` messages with ``tool_use``
  blocks, ``user`` messages with ``tool_result`` blocks, a ``result`` line), read by
  :func:`harnesses.stream_json.read_stream_json`; its ``stream_event`` lines are skipped.
  Call ids are the model's own. The stream cuts a long tool result to a display budget
  (about 4 KB): a result is the one it sent the model, as the proxy recorded it.
- Activation: a ``skill`` call naming the skill, or a read of its SKILL.md.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harnesses.activations import named_skill, skill_md_reads
from harnesses.adapter import HarnessAdapter, stage_skills
from harnesses.base import FORWARDER_PORT, PLACEHOLDER_KEY, HarnessPlan, HarnessRequest, bare_model, case_prompt
from harnesses.crosscheck import CheckedEvents, with_sent_outputs
from harnesses.endpoints import Protocol
from harnesses.model_record import ProxyRecord
from harnesses.node_script import node_script_runtime
from harnesses.stream_json import ParsedStream, read_stream_json
from schemas.trajectory import Event, ToolCallEvent

INNER_PACKAGE = "/run/skill-eval-qwen"
"""Where the package's folder is bound read-only inside the sandbox."""
SCRIPT = "cli.js"
REPO_CONFIG_DIRS = (".qwen",)
HIDDEN_CONTEXT_FILE = ".qwen/QWEN.md"
"""``context.fileName``: looked up from the workspace upwards, so only inside the hidden ``.qwen/``."""
AUXILIARY_MODELS = ("fastModel", "compactionModel", "visionModel", "advisorModel")
"""Its settings naming a model it calls on its own: each names the shard's model."""
DISABLED_SKILL_LEVELS = ("project", "extension", "bundled")
BASH_ENV_FILE = ".qwen/skill-eval-bash-env"
BASH_ENV = b"""# Qwen Code 0.24.4 returns from a shell call on the shell's exit without draining its pipes, so
# a command that exits at once can lose its output: its shell lingers a moment after the command
# (its exit status kept). Only that shell: the commands it starts do not read this file.
trap 'sleep 1' EXIT
unset BASH_ENV
"""
"""Read by the ``bash -c`` each shell call runs (``BASH_ENV``); a workaround of the pinned version's race."""
ENVIRONMENT = {
    "QWEN_CODE_NO_RELAUNCH": "true",
    "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
    "NO_BROWSER": "true",
    "NO_COLOR": "1",
}


class QwenCode(HarnessAdapter):
    """:class:`harnesses.base.Harness` for Qwen Code."""

    name = "qwen-code"
    package = "@qwen-code/qwen-code@0.24.4"
    binary_name = "qwen"
    protocol: Protocol = "openai"
    records_triggers = True
    read_tools = frozenset({"read_file", "run_shell_command", "grep_search", "glob"})
    write_tools = MappingProxyType(
        {"write_file": ("file_path",), "edit": ("file_path",), "notebook_edit": ("notebook_path",)}
    )
    # forward_headers: the JSON ones; its user-agent and x-stainless-* headers are not forwarded.

    def settings(self, model: str) -> dict[str, Any]:
        """The private HOME's ``~/.qwen/settings.json``: the proxy's endpoint, one model everywhere."""
        return {
            "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "chatRecording": False},
            "ide": {"enabled": False},
            "model": {"name": model},
            **{key: model for key in AUXILIARY_MODELS},
            "context": {"fileName": HIDDEN_CONTEXT_FILE},
            "skills": {"disabledLevels": list(DISABLED_SKILL_LEVELS)},
            # Its pseudo-terminal shell loses the middle of a long output line; a plain child
            # process gives the model (and the judge) all of it.
            "tools": {"shell": {"enableInteractiveShell": False}},
        }

    def plan(self, request: HarnessRequest) -> HarnessPlan:
        model = bare_model(request.model)
        home_files = stage_skills(request, ".qwen/skills")
        home_files[".qwen/settings.json"] = json.dumps(self.settings(model), indent=2).encode()
        home_files[BASH_ENV_FILE] = BASH_ENV
        argv = (
            request.binary,
            posixpath.join(INNER_PACKAGE, SCRIPT),
            "--auth-type",
            "openai",
            "--model",
            model,
            "--output-format",
            "stream-json",
            "--yolo",
            "--chat-recording=false",
        )
        absent = posixpath.join(request.home, ".qwen", "no-system")
        env = {
            "HOME": request.home,
            "QWEN_CODE_SYSTEM_SETTINGS_PATH": posixpath.join(absent, "settings.json"),
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH": posixpath.join(absent, "system-defaults.json"),
            "OPENAI_BASE_URL": f"http://127.0.0.1:{FORWARDER_PORT}/v1",
            "OPENAI_API_KEY": PLACEHOLDER_KEY,
            "OPENAI_MODEL": model,
            "BASH_ENV": posixpath.join(request.home, BASH_ENV_FILE),
            **ENVIRONMENT,
        }
        return HarnessPlan(
            argv=argv,
            env=env,
            stdin=case_prompt(request, request.skill),
            home_files=home_files,
            skill_ref=request.skill,
        )

    def prepare(self, found: Path, workspace: Path, inner_root: str, scratch: Path) -> tuple[Path, list[str]]:
        """The host's node to seal, the package bound read-only, the repo's ``.qwen/`` hidden."""
        return node_script_runtime(
            self.name, found.parent, INNER_PACKAGE, REPO_CONFIG_DIRS, workspace, inner_root, scratch
        )

    def read_stream(self, lines: Iterable[str]) -> ParsedStream:
        return read_stream_json(lines)

    def cross_check(self, stream_events: Iterable[Event], record: ProxyRecord) -> CheckedEvents:
        """Claimed by the model's call ids; each result is the one it sent the model (its stream
        cuts a long result to a display budget)."""
        return with_sent_outputs(super().cross_check(stream_events, record), record)

    def loads_skill(self, event: ToolCallEvent, skill: str, skill_ref: str) -> bool:
        """A ``skill`` call naming it (its result holds the body)."""
        return named_skill(_skill_argument(event), frozenset({skill, skill_ref})) is not None

    def skills_in(self, event: ToolCallEvent, installed: frozenset[str]) -> list[str]:
        """A ``skill`` call naming an installed skill, or a read of its SKILL.md."""
        if _skill_argument(event) is not None:
            found = named_skill(_skill_argument(event), installed)
            return [found] if found else []
        return skill_md_reads(event.arguments, installed) if event.name in self.read_tools else []


def _skill_argument(event: ToolCallEvent) -> object | None:
    """The skill a ``skill`` call names, also when made through ``tool_call`` (its deferred-tool
    runner, ``{"name": "skill", "arguments": {...}}``); None for any other call."""
    if event.name == "skill":
        return event.arguments.get("skill")
    inner = event.arguments.get("arguments")
    if event.name == "tool_call" and event.arguments.get("name") == "skill" and isinstance(inner, dict):
        return inner.get("skill")
    return None
