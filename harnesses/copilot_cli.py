"""The GitHub Copilot CLI adapter: ``copilot`` (1.0) offline with a custom provider over OpenAI chat completions.

- Endpoint: ``COPILOT_OFFLINE`` turns off login and GitHub's services; the custom provider
  (``COPILOT_PROVIDER_TYPE=openai``, ``COPILOT_PROVIDER_BASE_URL`` the forwarder's loopback
  ``/v1``, the placeholder as ``COPILOT_PROVIDER_API_KEY``) takes every model call, to
  ``/v1/chat/completions``. No GitHub token is needed or given.
- One model: ``--model``, ``COPILOT_MODEL`` and ``COPILOT_AGENT_MODEL`` (its sub-agents')
  name the shard's model.
- Skills: the skill folder staged in the private HOME at ``.copilot/skills/<name>/`` (a
  personal skill); Copilot CLI offers it through its ``skill`` tool, whose result is a short
  confirmation, the body following as a user message.
- The repo's own configuration never applies (docs/design/harnesses.md, "The repo's own agent
  configuration"): ``--no-custom-instructions`` keeps its instruction files out of the prompt
  (``AGENTS.md``, ``CLAUDE.md``, ``GEMINI.md``, ``.github/copilot-instructions.md``,
  ``.github/instructions/``; the agent may still read them as files); it loads a project's
  skills (``.github/skills``, ``.agents/skills``, ``.claude/skills``) even in a folder it does
  not trust, with no switch, so those folders, and its agents, hooks and extensions folders,
  are hidden under empty read-only ones (:data:`REPO_CONFIG_DIRS`). The built-in GitHub MCP servers are
  off (``--disable-builtin-mcps``).
- Traffic: telemetry off, no auto-update (``--no-auto-update``), no ``ask_user`` tool.
  ``--allow-all`` approves every tool and path: the sandbox is ours.
- Runtime: the npm launcher starts a native single-executable binary that unpacks its
  JavaScript into ``COPILOT_PKG_CACHE_HOME`` on first start; :meth:`CopilotCli.prepare`
  unpacks it once per binary on the host and binds it read-only, so a shard never unpacks.
- Events (``--output-format json``, JSON lines): ``assistant.message`` (``content``,
  ``toolRequests`` with the model's call ids), ``tool.execution_complete`` (``toolCallId``,
  ``success``, ``result.content``, ``error``), ``session.error``, ``result`` (``exitCode``).
  Results are the ones the harness sent the model, as the proxy recorded them.
- Activation: a ``skill`` call naming the skill, or a read of its SKILL.md.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harnesses.activations import named_skill, skill_md_reads
from harnesses.adapter import HarnessAdapter, stage_skills
from harnesses.base import FORWARDER_URL, PLACEHOLDER_KEY, HarnessPlan, HarnessRequest, bare_model
from harnesses.crosscheck import CheckedEvents, with_sent_outputs
from harnesses.endpoints import Protocol
from harnesses.model_record import ProxyRecord
from harnesses.repo_hiding import hidden_binds
from harnesses.stream_json import ERROR_PREFIX, ParsedStream, json_objects, result_event
from schemas.errors import NoHarness
from schemas.trajectory import AssistantEvent, EndReason, Event, ToolCallEvent, Usage

INNER_PACKAGES = "/run/skill-eval-copilot"
"""Where the unpacked package cache is bound read-only inside the sandbox."""
UNPACK_ROOT = Path(os.environ.get("SKILL_EVAL_COPILOT_PKG_DIR", f"/var/tmp/skill-eval-copilot-{os.geteuid()}"))
REPO_CONFIG_DIRS = (
    *(".github/skills", ".github/agents", ".github/hooks", ".github/extensions", ".github/instructions"),
    *(".github/copilot", ".agents", ".claude", ".copilot"),
)
"""The repo's folders Copilot CLI reads skills, agents, hooks and extensions from, even in a folder
it does not trust: hidden under empty read-only folders inside the sandbox."""
FLAGS = (
    "--output-format",
    "json",
    "--allow-all",
    "--no-custom-instructions",
    "--disable-builtin-mcps",
    "--no-auto-update",
    "--no-ask-user",
    "--disable-client-telemetry",
    "--no-color",
)
ENVIRONMENT = {"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_TYPE": "openai", "NO_COLOR": "1"}


class CopilotCli(HarnessAdapter):
    """:class:`harnesses.base.Harness` for GitHub Copilot CLI."""

    name = "copilot-cli"
    package = "@github/copilot@1.0.102"
    binary_name = "copilot"
    protocol: Protocol = "openai"
    native_binaries: tuple[str, ...] = ("@github/copilot-linux-x64/copilot", "@github/copilot-linuxmusl-x64/copilot")
    records_triggers = True
    read_tools = frozenset({"view", "bash", "grep", "glob"})
    write_tools = MappingProxyType({"create": ("path",), "edit": ("path",)})
    # forward_headers: the JSON ones; its user-agent, x-stainless-* and x-initiator headers are not forwarded.

    def plan(self, request: HarnessRequest) -> HarnessPlan:
        model = bare_model(request.model)
        env = {
            "HOME": request.home,
            "COPILOT_PKG_CACHE_HOME": INNER_PACKAGES,
            "COPILOT_PROVIDER_BASE_URL": f"{FORWARDER_URL}/v1",
            "COPILOT_PROVIDER_API_KEY": PLACEHOLDER_KEY,
            "COPILOT_MODEL": model,
            "COPILOT_AGENT_MODEL": model,
            **ENVIRONMENT,
        }
        return HarnessPlan.prompted(
            request, (request.binary, "--model", model, *FLAGS), env, stage_skills(request, ".copilot/skills")
        )

    def prepare(self, found: Path, workspace: Path, inner_root: str, scratch: Path) -> tuple[Path, list[str]]:
        """The native binary, and its unpacked package cache bound read-only (unpacked once per binary)."""
        binds = hidden_binds(REPO_CONFIG_DIRS, workspace, inner_root, scratch)
        return found, ["--ro-bind", str(unpacked(found)), INNER_PACKAGES, *binds]

    def read_stream(self, lines: Iterable[str]) -> ParsedStream:
        return read_copilot_json(lines)

    def cross_check(self, stream_events: Iterable[Event], record: ProxyRecord) -> CheckedEvents:
        """Claimed by the model's call ids; each result is the one it sent the model."""
        return with_sent_outputs(super().cross_check(stream_events, record), record)

    def loads_skill(self, event: ToolCallEvent, skill: str, skill_ref: str) -> bool:
        """A ``skill`` call naming it."""
        return (
            event.name == "skill"
            and named_skill(event.arguments.get("skill"), frozenset({skill, skill_ref})) is not None
        )

    def skills_in(self, event: ToolCallEvent, installed: frozenset[str]) -> list[str]:
        """A ``skill`` call naming an installed skill, or a read of its SKILL.md."""
        if event.name == "skill":
            found = named_skill(event.arguments.get("skill"), installed)
            return [found] if found else []
        return skill_md_reads(event.arguments, installed) if event.name in self.read_tools else []


def unpacked(binary: Path) -> Path:
    """The folder holding ``pkg/`` as ``binary`` unpacks it, made once per binary (size and mtime)
    by running it with ``COPILOT_SEA_EXTRACT_ONLY``; built beside and renamed into place, so a
    concurrent shard never sees half of it."""
    st = binary.stat()
    target = UNPACK_ROOT / f"{st.st_size}-{int(st.st_mtime)}"
    if (target / "pkg").is_dir():
        return target
    UNPACK_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".unpack-", dir=UNPACK_ROOT))
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(partial), "COPILOT_SEA_EXTRACT_ONLY": "1"}
    done = subprocess.run(
        [str(binary)], env={**env, "COPILOT_PKG_CACHE_HOME": str(partial)}, capture_output=True, timeout=300
    )
    if done.returncode != 0 or not (partial / "pkg").is_dir():
        raise NoHarness(f"copilot-cli: {binary} did not unpack its package (exit {done.returncode})")
    os.chmod(partial, 0o755)
    try:
        os.rename(partial, target)
    except OSError:  # another shard put it there first
        subprocess.run(["rm", "-rf", str(partial)], check=False)
    return target


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (the stream is not trusted to be well formed)."""
    return value if isinstance(value, dict) else {}


def _message(out: ParsedStream, data: dict[str, Any]) -> None:
    content = data.get("content")
    if isinstance(content, str) and content.strip():
        out.events.append(AssistantEvent(text=content))
    for request in data.get("toolRequests") or []:
        request = _obj(request)
        arguments = request.get("arguments")
        out.events.append(
            ToolCallEvent(
                call_id=str(request.get("toolCallId", "")),
                name=str(request.get("name", "")),
                arguments=arguments if isinstance(arguments, dict) else {"input": arguments},
            )
        )


def _complete(out: ParsedStream, data: dict[str, Any]) -> None:
    call_id = str(data.get("toolCallId", ""))
    if data.get("success") is True:
        code = _obj(data.get("shellExecution")).get("exitCode")
        output = str(_obj(data.get("result")).get("content", ""))
        out.events.append(result_event(call_id, output, code if isinstance(code, int) else None))
    else:
        error = _obj(data.get("error")).get("message") or _obj(data.get("result")).get("content") or "failed"
        out.events.append(result_event(call_id, ERROR_PREFIX + str(error)))


def read_copilot_json(lines: Iterable[str]) -> ParsedStream:
    """Parse ``copilot --output-format json`` lines (junk skipped); call ids are the model's."""
    out = ParsedStream()
    calls = 0
    for line in json_objects(lines, out):
        kind, data = line.get("type"), _obj(line.get("data"))
        if kind == "assistant.message":
            calls += 1
            _message(out, data)
        elif kind == "tool.execution_complete":
            _complete(out, data)
        elif kind == "session.error":
            out.result_is_error = True
        elif kind == "result":
            out.saw_result = True
            out.result_is_error = out.result_is_error or line.get("exitCode") not in (0, None)
    out.usage = Usage(calls=calls)
    out.end_reason = EndReason.COMPLETED
    return out
