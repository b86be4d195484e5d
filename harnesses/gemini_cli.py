"""The Gemini CLI adapter: ``gemini -p`` (0.61) with ``--output-format stream-json`` over the Gemini API.

- Endpoint: ``GOOGLE_GEMINI_BASE_URL`` the forwarder's loopback root, the placeholder as
  ``GEMINI_API_KEY``, and ``security.auth.selectedType: gemini-api-key`` in the private HOME's
  ``~/.gemini/settings.json`` (the base URL alone selects a ``gateway`` auth type that headless
  mode refuses). Requests go to ``/v1beta/models/<model>:streamGenerateContent?alt=sse``.
- One model: ``-m`` and ``model.name`` name the shard's model, and a ``modelConfigs``
  override per model alias of the pinned version (the classifier, the next-speaker and loop
  checks, summarizers, the edit corrector, compression, ...) and per model name it knows
  resolves every call it makes on its own to the shard's model, so the proxy's pinning never
  refuses the harness's own calls. The next-speaker check is off (``skipNextSpeakerCheck``).
- Tools the provider runs (``google_web_search`` asks for ``googleSearch``, ``web_fetch`` for
  ``urlContext``) are excluded: the proxy would refuse them anyway.
- Skills: the skill folder staged in the private HOME at ``.gemini/skills/<name>/`` (a user
  skill); Gemini CLI offers it through its ``activate_skill`` tool, whose result is the body.
- The repo's own configuration never applies (docs/design/harnesses.md, "The repo's own agent
  configuration"): its ``.gemini/`` (settings, skills, commands, agents, extensions) and
  ``.agents/`` (skills) are hidden under empty read-only folders inside the sandbox, and every
  ``GEMINI.md`` of the workspace under an empty read-only file (:meth:`GeminiCli.prepare`). The
  pinned version has no switch for those: it loads them in every trusted folder (the
  workspace's at start, a subfolder's when a tool reaches it), ``context.fileName`` only adds
  names to ``GEMINI.md``, and an untrusted folder, which loads none of them, turns ``--yolo``
  into the default approval mode, where a command with a redirection or one its parser cannot
  read is refused in headless mode. So the agent sees its repo's ``GEMINI.md`` files empty.
  Its file tools look a subfolder's up at each call (``discoveryMaxDirs`` bounds only the
  start-up search), so one written while the case runs would still be appended: the proxy takes
  that ``Newly Discovered Project Context`` block out of every request
  (:mod:`harnesses.appended_context`).
- The host's machine-wide settings (``/etc/gemini-cli/``) do not apply either: the system
  settings and defaults paths name files that do not exist. Nor does a ``.env`` of the
  workspace or a folder above it (a trusted folder's sets every variable not already set, and
  ``GEMINI_SYSTEM_MD`` replaces the whole system prompt with a file): ``advanced.ignoreLocalEnv``
  skips them, and ``GEMINI_SYSTEM_MD`` / ``GEMINI_WRITE_SYSTEM_MD`` are pinned off.
- Traffic: telemetry, usage statistics, auto-update and the IDE companion off;
  ``GEMINI_CLI_NO_RELAUNCH`` keeps it one process. ``-y`` approves every tool (the sandbox is
  ours); ``GEMINI_CLI_TRUST_WORKSPACE`` trusts the workspace (headless mode refuses an
  untrusted one).
- Runtime: the package is a node script with its chunks beside it; the folder is bound
  read-only and the sandbox's node (sealed execute-only, so the process is non-dumpable like
  the other harnesses) runs it.
- Events (``stream-json``): ``tool_use`` (``tool_name``, ``tool_id``, ``parameters``),
  ``tool_result`` (``tool_id``, ``status``, ``output``, ``error``), ``message`` (assistant
  text deltas), ``error``, ``result``. The ids are Gemini CLI's own: calls are claimed by order,
  name and arguments (:func:`harnesses.gemini_stream.cross_check_by_content`).
- Activation: an ``activate_skill`` call naming the skill, or a read of its SKILL.md.
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
from harnesses.base import FORWARDER_URL, PLACEHOLDER_KEY, HarnessPlan, HarnessRequest, bare_model
from harnesses.crosscheck import CheckedEvents
from harnesses.endpoints import Protocol
from harnesses.gemini_stream import cross_check_by_content, read_gemini_stream
from harnesses.model_record import ProxyRecord
from harnesses.node_script import node_script_runtime
from harnesses.repo_hiding import HiddenFiles, hidden_file_binds
from harnesses.stream_json import ParsedStream
from schemas.trajectory import Event, ToolCallEvent

INNER_PACKAGE = "/run/skill-eval-gemini"
"""Where the package's ``bundle`` folder is bound read-only inside the sandbox."""
SCRIPT = "gemini.js"
REPO_CONFIG_DIRS = (".gemini", ".agents")
INSTRUCTION_FILES = HiddenFiles(("GEMINI.md",))
"""The instruction file names the pinned version loads (``context.fileName`` unset adds none)."""
MODEL_NAMES = (
    *("base", "chat-base", "chat-base-2.5", "chat-base-3", "auto", "pro", "flash", "flash-lite"),
    *("auto-gemini-2.5", "auto-gemini-3", "gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"),
    *("gemini-3-pro-preview", "gemini-3-flash", "gemini-3-flash-preview", "gemini-3.1-pro-preview"),
    *("gemini-3.1-pro-preview-customtools", "gemini-3.1-flash-lite-preview", "gemini-3.1-flash-lite"),
    *("gemini-3.5-flash-lite", "gemini-3.5-flash", "gemini-3.8-flash", "gemma-4-31b-it", "gemma-4-26b-a4b-it"),
    *("gemini-2.5-flash-base", "gemini-3-flash-base", "gemini-3.5-flash-base", "classifier", "prompt-completion"),
    *("fast-ack-helper", "edit-corrector", "summarizer-default", "summarizer-shell", "web-search", "web-fetch"),
    *("web-fetch-fallback", "loop-detection", "loop-detection-double-check", "llm-edit-fixer"),
    *("next-speaker-checker", "context-snapshotter", "chat-compression-3-pro", "chat-compression-3-flash"),
    *("chat-compression-3.1-flash-lite", "chat-compression-2.5-pro", "chat-compression-2.5-flash"),
    *("chat-compression-2.5-flash-lite", "chat-compression-default", "agent-history-provider-summarizer"),
)
"""Every model alias and model name of the pinned version (0.61.0's ``DEFAULT_MODEL_CONFIGS`` and
its model constants): each is overridden to the shard's model."""
EXCLUDED_TOOLS = ("google_web_search", "web_fetch")
ENVIRONMENT = {
    "GEMINI_CLI_TRUST_WORKSPACE": "true",
    "GEMINI_CLI_NO_RELAUNCH": "true",
    "GEMINI_TELEMETRY_ENABLED": "false",
    "NO_BROWSER": "true",
    "NO_COLOR": "1",
    # Pinned as well as the .env being ignored: set here, no .env file can set them.
    "GEMINI_SYSTEM_MD": "false",
    "GEMINI_WRITE_SYSTEM_MD": "false",
}


class GeminiCli(HarnessAdapter):
    """:class:`harnesses.base.Harness` for Gemini CLI."""

    name = "gemini-cli"
    package = "@google/gemini-cli@0.61.0"
    binary_name = "gemini"
    protocol: Protocol = "gemini"
    stream_call_ids = False
    """Its ``tool_id`` values are its own: :meth:`cross_check` claims the record's calls by content."""
    records_triggers = True
    hidden_files: HiddenFiles | None = INSTRUCTION_FILES
    read_tools = frozenset({"read_file", "read_many_files", "run_shell_command", "grep_search", "glob"})
    write_tools = MappingProxyType({"write_file": ("file_path",), "replace": ("file_path",)})
    # forward_headers: the JSON ones; its ``user-agent`` and ``x-goog-api-client`` are not forwarded.

    def settings(self, model: str) -> dict[str, Any]:
        """The private HOME's ``~/.gemini/settings.json``: the proxy's key, one model everywhere."""
        return {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "ide": {"enabled": False},
            "model": {"name": model, "skipNextSpeakerCheck": True},
            "modelConfigs": {
                "customOverrides": [{"match": {"model": name}, "modelConfig": {"model": model}} for name in MODEL_NAMES]
            },
            "tools": {"exclude": list(EXCLUDED_TOOLS)},
            "skills": {"enabled": True},
            # A trusted folder's .env sets every variable not already set (GEMINI_SYSTEM_MD
            # replaces the whole system prompt): only the private HOME's may load.
            "advanced": {"ignoreLocalEnv": True},
        }

    def plan(self, request: HarnessRequest) -> HarnessPlan:
        model = bare_model(request.model)
        home_files = stage_skills(request, ".gemini/skills")
        home_files[".gemini/settings.json"] = json.dumps(self.settings(model), indent=2).encode()
        argv = (
            request.binary,
            posixpath.join(INNER_PACKAGE, SCRIPT),
            "--model",
            model,
            "--output-format",
            "stream-json",
            "--yolo",
            "--prompt",
            "",
        )
        # The host's machine-wide settings (/etc/gemini-cli/) are the operator's, not this shard's:
        # the paths name files that do not exist in the private HOME.
        absent = posixpath.join(request.home, ".gemini", "no-system")
        env = {
            "HOME": request.home,
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH": posixpath.join(absent, "settings.json"),
            "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": posixpath.join(absent, "system-defaults.json"),
            "GOOGLE_GEMINI_BASE_URL": FORWARDER_URL,
            "GEMINI_API_KEY": PLACEHOLDER_KEY,
            **ENVIRONMENT,
        }
        return HarnessPlan.prompted(request, argv, env, home_files)

    def prepare(self, found: Path, workspace: Path, inner_root: str, scratch: Path) -> tuple[Path, list[str]]:
        """The executable to seal (the host's node), and the bwrap arguments that bind the package
        read-only and hide the repo's own Gemini CLI configuration under empty folders and its
        ``GEMINI.md`` files under empty files."""
        runtime, binds = node_script_runtime(
            self.name, found.parent, INNER_PACKAGE, REPO_CONFIG_DIRS, workspace, inner_root, scratch
        )
        return runtime, binds + hidden_file_binds(INSTRUCTION_FILES, workspace, inner_root, scratch)

    def read_stream(self, lines: Iterable[str]) -> ParsedStream:
        return read_gemini_stream(lines)

    def cross_check(self, stream_events: Iterable[Event], record: ProxyRecord) -> CheckedEvents:
        """Claimed by order, name and arguments: its stream's ids are not the model's."""
        return cross_check_by_content(stream_events, record)

    def loads_skill(self, event: ToolCallEvent, skill: str, skill_ref: str) -> bool:
        """An ``activate_skill`` call naming it (its result holds the body)."""
        return event.name == "activate_skill" and str(event.arguments.get("name", "")) in (skill, skill_ref)

    def skills_in(self, event: ToolCallEvent, installed: frozenset[str]) -> list[str]:
        """An ``activate_skill`` call naming an installed skill, or a read of its SKILL.md."""
        if event.name == "activate_skill":
            found = named_skill(event.arguments.get("name"), installed)
            return [found] if found else []
        return skill_md_reads(event.arguments, installed) if event.name in self.read_tools else []
