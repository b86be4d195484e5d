"""The one small interface every agent harness adapter implements, and the plan it returns.

An adapter is pure: given the shard's model, skill, case prompt and the proxy's loopback
base URL, it says which files to stage in the private HOME, which command line and
environment to run, and how to read the event stream back and recognise the skill being
activated. The worker (``worker/executor/harness.py``) does the I/O: sandbox, proxy,
staging, running, cross-checking. Decisions per harness: ``docs/design/harnesses.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Protocol

from harnesses.crosscheck import CheckedEvents
from harnesses.endpoints import Protocol as WireProtocol
from harnesses.model_record import ProxyRecord
from harnesses.repo_hiding import HiddenFiles
from harnesses.stream_json import ParsedStream
from schemas.trajectory import Event, ToolCallEvent

PLACEHOLDER_KEY = "sk-skill-eval-placeholder-not-a-key"
"""The only key a harness is ever given; the proxy swaps it for the real one."""
FORWARDER_PORT = 8377
"""The loopback port of the in-sandbox forwarder (the sandbox has its own network namespace)."""
FORWARDER_URL = f"http://127.0.0.1:{FORWARDER_PORT}"
"""The forwarder's root, where every harness's model base URL points (plus its protocol's path)."""
INNER_MOCKS_DIR = "/run/skill-eval-mocks"
MOCK_SERVER = f"{INNER_MOCKS_DIR}/mcp_mock_server.py"
"""harnesses/mcp_mock_server.py, read-only in the sandbox."""
MOCK_FILE = f"{INNER_MOCKS_DIR}/mocks.json"
"""The case's mocks (schemas/mocks.py, as JSON), read-only in the sandbox."""


class Invoke(str, Enum):
    """How the case prompt reaches the harness."""

    EXPLICIT = "explicit"
    """Tell the harness to use the skill for the case prompt."""
    IMPLICIT = "implicit"
    """The bare prompt: measures whether the skill triggers by itself."""


@dataclass(frozen=True)
class HarnessRequest:
    """What an adapter needs to plan one shard."""

    binary: str
    """Path of the harness binary inside the sandbox."""
    model: str
    """The shard's model, a litellm name (``anthropic/claude-sonnet-4-5``)."""
    skill: str
    skill_files: Mapping[str, bytes]
    """The skill folder's files, relative path -> content (SKILL.md, agents/*.md, ...)."""
    prompt: str
    """The case prompt (never the assertions)."""
    invoke: Invoke
    workspace: str
    """The workspace as the harness sees it."""
    home: str
    """The private HOME as the harness sees it."""
    plugin_name: str | None = None
    """The repo's Claude Code plugin name when it ships ``.claude-plugin/plugin.json``."""
    case_files: tuple[str, ...] = ()
    allowed_tools: tuple[str, ...] | None = None
    """The case's only tools (harness names); None: the harness's own set."""
    mock_servers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Mocked MCP server name -> its tools; each runs as :func:`mock_server` says."""
    other_skills: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict)
    """A trigger run's distractors: every other skill of the repo, name -> its files, staged beside it."""


@dataclass(frozen=True)
class HarnessPlan:
    """How to run one shard: stage ``home_files``, run ``argv`` with ``env``, feed ``stdin``."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    stdin: str
    home_files: Mapping[str, bytes] = field(default_factory=dict)
    """HOME-relative path -> content, written before the run."""
    skill_ref: str = ""
    """The name the harness knows the skill by (``<plugin>:<skill>`` for a plugin)."""

    @classmethod
    def prompted(
        cls,
        request: HarnessRequest,
        argv: Sequence[str],
        env: Mapping[str, str],
        home_files: Mapping[str, bytes],
        skill_ref: str | None = None,
    ) -> HarnessPlan:
        """The plan of a harness told the case on stdin (:func:`case_prompt`), naming the skill by the
        ref it knows it by (default: the skill's own name), so the prompt and the ref always agree."""
        ref = skill_ref or request.skill
        return cls(argv=tuple(argv), env=env, stdin=case_prompt(request, ref), home_files=home_files, skill_ref=ref)


class Harness(Protocol):
    """One agent CLI behind the executor interface: everything the generic runner
    (``worker/executor/harness.py``) needs to know of it. Subclass
    :class:`harnesses.adapter.HarnessAdapter` for the defaults; register it in
    ``harnesses/registry.py``."""

    name: str
    """Registry name (``claude-code``, ``codex``)."""
    protocol: WireProtocol
    """The model API it speaks (decides the proxy's upstream and paths)."""
    providers: frozenset[str]
    """The litellm providers (the ``<provider>/`` of a model name) whose models it can run: the
    ones served over its protocol, the only one its proxy forwards (:mod:`harnesses.providers`)."""
    binary_env: str
    """Environment variable naming the binary (else it is looked up on PATH as ``binary_name``)."""
    binary_name: str
    native_binaries: tuple[str, ...]
    """Globs, beside its npm package's folder, of the native binary its node launcher would start
    (that one is run: no node runtime in the sandbox); empty when the found binary is native."""
    install_hint: str
    """How to install it, for ``BLOCKED_NO_HARNESS``."""
    forward_headers: frozenset[str]
    """The request headers (lower case) its proxy forwards: the ones the pinned version sends and needs."""
    betas: frozenset[str] | None
    """The ``anthropic-beta`` values its proxy forwards (None: the protocol has none)."""
    answered_empty: frozenset[str]
    """Paths of its own calls that are no model call, answered ``{}`` by its proxy (never forwarded)."""
    loads_plugins: bool
    """True when it loads the repo's ``.claude-plugin/plugin.json`` as a plugin."""
    honours: frozenset[str]
    """The case terms it applies (``mocks``, ``allowed_tools``, ``max_turns``, ``timeout_s``)."""
    records_triggers: bool
    """True when :meth:`skills_in` reads activations (it can run ``--triggers``)."""
    hidden_files: HiddenFiles | None
    """The repo's files it would read as instructions with no switch to stop it, covered in the
    sandbox (:mod:`harnesses.repo_hiding`); None: it has a switch, or reads none."""

    def plan(self, request: HarnessRequest) -> HarnessPlan:
        """The staging, command line, environment and stdin of one shard."""
        ...

    def prepare(self, found: Path, workspace: Path, inner_root: str, scratch: Path) -> tuple[Path, list[str]]:
        """The executable to seal and run for the binary ``found``, and the extra bwrap arguments
        it needs (``scratch``: a private folder that lives as long as the run). Most harnesses
        run ``found`` itself with none; one that is a script names its runtime and binds its package."""
        ...

    def read_stream(self, lines: Iterable[str]) -> ParsedStream:
        """Parse the harness's event stream (junk lines skipped)."""
        ...

    def offered_tools(self, request: HarnessRequest) -> frozenset[str] | None:
        """The tool names its proxy lets a request offer the model, for a case with allowed tools
        that the harness has no flag of its own for; None: no filter."""
        ...

    def cross_check(self, stream_events: Iterable[Event], record: ProxyRecord) -> CheckedEvents:
        """The record's calls its stream claims (by call id, or by order), with their results."""
        ...

    def activated(self, events: Iterable[Event], skill: str, skill_ref: str, body_sent: bool) -> bool:
        """True when the trajectory shows the skill being loaded.

        ``body_sent``: the proxy saw the skill's body (past its frontmatter) in a request to the model.
        """
        ...

    def skills_in(self, event: ToolCallEvent, installed: frozenset[str]) -> list[str]:
        """The installed skills one tool call activates, for a trigger run."""
        ...

    def written_paths(self, events: Iterable[Event]) -> list[str]:
        """The files its write tools name (kept as the final state even when unchanged)."""
        ...


def explicit_prompt(skill_ref: str, prompt: str) -> str:
    """The case prompt with the instruction to use the skill."""
    return f'Use the "{skill_ref}" skill for this task.\n\n{prompt.strip()}\n'


def case_text(request: HarnessRequest) -> str:
    """The case prompt with the case's files named (never the assertions)."""
    text = request.prompt.strip()
    if request.case_files:
        text += "\n\nRelevant files: " + ", ".join(request.case_files)
    return text


def case_prompt(request: HarnessRequest, skill_ref: str) -> str:
    """The prompt a harness receives for ``request``, per its invoke mode, with the case's files."""
    text = case_text(request)
    return explicit_prompt(skill_ref, text) if request.invoke is Invoke.EXPLICIT else text + "\n"


def mock_server(name: str) -> dict[str, str | list[str]]:
    """The mocked MCP server ``name`` as an MCP client configures a stdio server: its ``command``
    (the sandbox's ``python3``) and ``args`` (:data:`MOCK_SERVER` reading :data:`MOCK_FILE`)."""
    return {"command": "python3", "args": [MOCK_SERVER, MOCK_FILE, name]}


def bare_model(model: str) -> str:
    """``anthropic/claude-sonnet-4-5`` -> ``claude-sonnet-4-5``: the name the provider's API knows."""
    return model.split("/", 1)[1] if "/" in model else model


def skill_body_marker(skill_md: bytes) -> str:
    """A stretch of SKILL.md's body (past the frontmatter) whose presence in a request means it was loaded."""
    text = skill_md.decode("utf-8", errors="replace")
    if text.startswith("---"):
        end = text.find("\n---", 3)
        text = text[end + 4 :] if end >= 0 else text
    body = " ".join(text.split())
    return body[:80] if len(body) >= 24 else ""
