"""The one small interface every agent harness adapter implements, and the plan it returns.

An adapter is pure: given the shard's model, skill, case prompt and the proxy's loopback
base URL, it says which files to stage in the private HOME, which command line and
environment to run, and how to read the event stream back and recognise the skill being
activated. The worker (``worker/executor/harness.py``) does the I/O: sandbox, proxy,
staging, running, cross-checking. Decisions per harness: ``docs/design/harnesses.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from harnesses.endpoints import Protocol as WireProtocol
from harnesses.stream_json import ParsedStream
from schemas.trajectory import Event

PLACEHOLDER_KEY = "sk-skill-eval-placeholder-not-a-key"
"""The only key a harness is ever given; the proxy swaps it for the real one."""
FORWARDER_PORT = 8377
"""The loopback port of the in-sandbox forwarder (the sandbox has its own network namespace)."""


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


class Harness(Protocol):
    """One agent CLI behind the executor interface."""

    name: str
    """Registry name (``claude-code``, ``codex``)."""
    protocol: WireProtocol
    """The model API it speaks (decides the proxy's upstream and paths)."""
    binary_env: str
    """Environment variable naming the binary (else it is looked up on PATH as ``binary_name``)."""
    binary_name: str
    install_hint: str
    """How to install it, for ``BLOCKED_NO_HARNESS``."""
    stream_call_ids: bool
    """True when the event stream names tool calls by the model's own call ids (else: paired by order)."""
    forward_headers: frozenset[str]
    """The request headers (lower case) its proxy forwards: the ones the pinned version sends and needs."""
    betas: frozenset[str] | None
    """The ``anthropic-beta`` values its proxy forwards (None: the protocol has none)."""

    def plan(self, request: HarnessRequest) -> HarnessPlan:
        """The staging, command line, environment and stdin of one shard."""
        ...

    def read_stream(self, lines: Iterable[str]) -> ParsedStream:
        """Parse the harness's event stream (junk lines skipped)."""
        ...

    def activated(self, events: Iterable[Event], skill: str, skill_ref: str, body_sent: bool) -> bool:
        """True when the trajectory shows the skill being loaded.

        ``body_sent``: the proxy saw the skill's body (past its frontmatter) in a request to the model.
        """
        ...


def explicit_prompt(skill_ref: str, prompt: str) -> str:
    """The case prompt with the instruction to use the skill."""
    return f'Use the "{skill_ref}" skill for this task.\n\n{prompt.strip()}\n'


def case_prompt(request: HarnessRequest, skill_ref: str) -> str:
    """The prompt a harness receives for ``request``, per its invoke mode, with the case's files."""
    text = request.prompt.strip()
    if request.case_files:
        text += "\n\nRelevant files: " + ", ".join(request.case_files)
    return explicit_prompt(skill_ref, text) if request.invoke is Invoke.EXPLICIT else text + "\n"


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
