"""The shared shape of the harness adapters: defaults, derived names and the helpers they all use.

An adapter subclasses :class:`HarnessAdapter`, sets what is its own (name, pinned npm package,
wire protocol, tool names, how it stages a skill and reads its stream) and inherits the rest.
What every harness does the same way lives here once: where its binary is looked up and how to
install it, staging a skill folder (and a trigger run's distractors) under a HOME folder,
reading a JSON-lines stream, the usual activation signal (a read of
the skill's SKILL.md), and the cross-check chosen by whether its stream carries call ids.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from harnesses.base import HarnessRequest
from harnesses.crosscheck import CheckedEvents, OrderRules, cross_check, cross_check_by_order
from harnesses.endpoints import Protocol
from harnesses.model_record import ProxyRecord
from harnesses.providers import providers_for
from harnesses.repo_hiding import HiddenFiles
from schemas.trajectory import Event, ToolCallEvent

HARNESS_CASE_TERMS = frozenset({"max_turns", "timeout_s"})
"""The case terms every harness applies: ``max_turns`` (its proxy's turn cap) and ``timeout_s``
(its wall clock). Mocks and allowed tools need flags of the harness's own."""
JSON_HEADERS = frozenset({"content-type", "accept"})
"""The request headers every protocol's upstream needs: the body's and the stream's media types."""


class HarnessAdapter:
    """Defaults of :class:`harnesses.base.Harness`; a subclass names what is its own."""

    name: str
    """Registry name, as given to ``--executor``."""
    package: str
    """The pinned npm package ``make setup`` installs (``<package>@<version>``)."""
    binary_name: str
    """The executable looked up on PATH and in the harness cache."""
    protocol: Protocol
    providers: frozenset[str]
    """The litellm providers whose models it runs; unset: its protocol's (:mod:`harnesses.providers`)."""
    stream_call_ids: bool = True
    """True when its stream names tool calls by the model's own call ids; else it sets ``order_rules``."""
    order_rules: OrderRules | None = None
    """Its tool names, for pairing a stream without call ids with the record by order."""
    forward_headers: frozenset[str] = JSON_HEADERS
    betas: frozenset[str] | None = None
    answered_empty: frozenset[str] = frozenset()
    """Paths of its own calls that are no model call, which its proxy answers ``{}`` locally."""
    loads_plugins: bool = False
    """True when it loads a repo's ``.claude-plugin/plugin.json`` as a plugin (the skill is then
    ``<plugin>:<skill>``)."""
    write_tools: Mapping[str, tuple[str, ...]] = MappingProxyType({})
    """Its tools that write a file -> the argument keys naming it (so the file is kept as final state)."""
    native_binaries: tuple[str, ...] = ()
    """Globs, beside the npm package's folder, of the native binary its node launcher would start."""
    honours: frozenset[str] = HARNESS_CASE_TERMS
    """The case terms it applies (a case using another is refused before the run)."""
    records_triggers: bool = False
    """True when :meth:`skills_in` says which installed skills a tool call activates (``--triggers``)."""
    hidden_files: HiddenFiles | None = None
    """The repo's instruction files it would load with no switch to stop it (covered in the sandbox)."""
    read_tools: frozenset[str] = frozenset()
    """Its tools that can read a file: one naming the skill's SKILL.md loads the skill by hand."""
    binary_env: str
    install_hint: str

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.binary_env = f"SKILL_EVAL_{cls.name.upper().replace('-', '_')}_BIN"
        cls.install_hint = f"run `make setup` (installs {cls.package}), or set {cls.binary_env}"
        if "providers" not in cls.__dict__:
            cls.providers = providers_for(cls.protocol)

    def prepare(self, found: Path, workspace: Path, inner_root: str, scratch: Path) -> tuple[Path, list[str]]:
        """The found binary runs as it is, with no extra binds (a script harness names its runtime)."""
        return found, []

    def offered_tools(self, request: HarnessRequest) -> frozenset[str] | None:
        """No filter: a harness applies a case's allowed tools with its own flags, or not at all."""
        return None

    def cross_check(self, stream_events: Iterable[Event], record: ProxyRecord) -> CheckedEvents:
        """The trajectory's events: the record's calls its stream claims, by call id or by order."""
        if self.stream_call_ids:
            return cross_check(stream_events, record)
        if self.order_rules is None:
            raise TypeError(f"{self.name}: a stream without call ids needs order_rules")
        return cross_check_by_order(stream_events, record, self.order_rules)

    def written_paths(self, events: Iterable[Event]) -> list[str]:
        """The files its write tools name in ``events``."""
        return [
            str(e.arguments[key])
            for e in events
            if isinstance(e, ToolCallEvent) and e.name in self.write_tools
            for key in self.write_tools[e.name]
            if isinstance(e.arguments.get(key), str)
        ]

    def activated(self, events: Iterable[Event], skill: str, skill_ref: str, body_sent: bool) -> bool:
        """A call loading the skill by name, or a read of its SKILL.md. The body reaching the model
        is not enough by default: a project file the harness reads on its own may quote it."""
        for event in events:
            if not isinstance(event, ToolCallEvent):
                continue
            if self.loads_skill(event, skill, skill_ref):
                return True
            if event.name in self.read_tools and self.reads_skill_md(event, skill):
                return True
        return False

    def loads_skill(self, event: ToolCallEvent, skill: str, skill_ref: str) -> bool:
        """Whether one call of its skill tool names the skill (no skill tool: never)."""
        return False

    def reads_skill_md(self, event: ToolCallEvent, skill: str) -> bool:
        """Whether one call of a read tool names the skill's SKILL.md."""
        return names_skill_md(event, skill)

    def skills_in(self, event: ToolCallEvent, installed: frozenset[str]) -> list[str]:
        """The installed skills one of its tool calls activates (none unless :attr:`records_triggers`)."""
        return []


def stage_skills(request: HarnessRequest, folder: str) -> dict[str, bytes]:
    """HOME-relative path -> content: the skill, and a trigger run's other skills, each at ``folder/<name>/``."""
    return {
        posixpath.join(folder, name, relative): content
        for name, files in {**request.other_skills, request.skill: request.skill_files}.items()
        for relative, content in files.items()
    }


def names_skill_md(event: ToolCallEvent, skill: str) -> bool:
    """Whether a tool call's arguments name ``skills/<skill>/SKILL.md`` (the skill read by hand)."""
    return f"skills/{skill}/SKILL.md" in json.dumps(event.arguments, ensure_ascii=False)
