"""The eval corpus (``evals/<skill>.evals.json``), schema v1 of the contract.

These models describe a corpus that has already passed :mod:`producer.corpus.validation`;
the validator owns the contract's rules and their error messages, the models own
the shape that crosses queues and lands in the store.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.base import FrozenModel
from schemas.checks_base import Check
from schemas.checks_focus import BaselineCheck, FocusedCheck
from schemas.checks_http import HttpCallCheck, HttpOrderCheck
from schemas.checks_plugin import FileGlobCheck, JudgedCheck, TextMatchCheck, ToolCountCheck, ToolOrderCheck
from schemas.history import HistoryTurn
from schemas.http_mocks import HttpMock
from schemas.mocks import MockServer
from schemas.status import FixtureStage

DETERMINISTIC_ASSERTIONS = "deterministic-assertions"
"""The opt-in extension name: with it in ``extensions``, an assertion may be an object."""
KNOWN_EXTENSIONS = frozenset({DETERMINISTIC_ASSERTIONS})


class Fixture(FrozenModel):
    """A file written into the case's workspace before the executor starts."""

    path: str
    """Repo-relative literal path (no glob characters, no escape from the root)."""
    content: str
    """Exact file content, written verbatim."""
    stage: FixtureStage = FixtureStage.HEAD
    """``base`` is committed before the case starts; ``head`` is written last and left uncommitted."""


class ToolCallMatcher(FrozenModel):
    """Which recorded tool calls match: by tool name and a regular expression on arguments."""

    pattern: str
    """Python regular expression, searched (not anchored) in the matched text."""
    tool: str | None = None
    """Exact tool name; None matches every tool."""
    argument: str | None = None
    """Match this argument's value (strings as they are, others as JSON); None: all arguments as JSON."""


class ToolCallCheck(Check):
    """Passes when some tool call matches (or, with ``absent``, when none does)."""

    kind: Literal["tool_call"] = "tool_call"
    pattern: str
    """Python regular expression, searched (not anchored) in the matched text."""
    tool: str | None = None
    """Exact tool name; None matches every tool."""
    argument: str | None = None
    """Match this argument's value (strings as they are, others as JSON); None: all arguments as JSON."""
    absent: bool = False
    """True: pass only when no tool call matches."""

    @property
    def matcher(self) -> ToolCallMatcher:
        return ToolCallMatcher(pattern=self.pattern, tool=self.tool, argument=self.argument)


class CallOrderCheck(Check):
    """Passes when a call matching ``first`` is followed, later, by a call matching ``then``."""

    kind: Literal["call_order"] = "call_order"
    first: ToolCallMatcher
    """The call that must come first."""
    then: ToolCallMatcher
    """The call that must come after it."""


class FileContainsCheck(Check):
    """Passes when a file in the final workspace contains a pattern."""

    kind: Literal["file_contains"] = "file_contains"
    path: str
    """Normalised repo-relative path, looked up in ``Trajectory.final_files``."""
    pattern: str
    """Python regular expression, searched in the file's final content."""


class SkillActivatedCheck(Check):
    """Passes when the harness loaded the skill under test (``Trajectory.skill_activated``)."""

    kind: Literal["skill_activated"] = "skill_activated"
    text: str = "The agent activates the skill"
    """What the check means, as reports show it."""


DeterministicAssertion = (
    ToolCallCheck
    | CallOrderCheck
    | FileContainsCheck
    | SkillActivatedCheck
    | TextMatchCheck
    | ToolCountCheck
    | ToolOrderCheck
    | FileGlobCheck
    | HttpCallCheck
    | HttpOrderCheck
)
"""An assertion checked without a model (extension ``deterministic-assertions``)."""
AssertionObject = Annotated[
    DeterministicAssertion | JudgedCheck | FocusedCheck | BaselineCheck, Field(discriminator="kind")
]
"""An assertion written as an object: deterministic, judged with a weight, or voted on by its own judge."""
Assertion = str | AssertionObject
"""A judged assertion (its text, or a weighted ``judged`` object) or a deterministic one."""


def assertion_text(assertion: Assertion) -> str:
    """The text reports show for an assertion of either kind."""
    return assertion if isinstance(assertion, str) else assertion.text


def is_judged(assertion: Assertion) -> bool:
    """Whether the judge grades ``assertion`` (a string, or a weighted ``judged`` object)."""
    return isinstance(assertion, str | JudgedCheck)


class EvalCase(FrozenModel):
    """One eval case: a prompt for the executor and assertions for the judge."""

    id: int
    """Case id, unique within its corpus."""
    prompt: str
    """What the user asks the agent; the only task text the executor sees."""
    expected_output: str
    """What a good run produces; never shown to the executor."""
    files: tuple[str, ...]
    """Repo-relative files the case is about (exist in the repo or are fixture paths)."""
    assertions: tuple[Assertion, ...]
    """Observable facts about the agent's tool calls; graded one by one, never shown to the executor.
    Strings are judged; objects (only with the ``deterministic-assertions`` extension) are checked."""
    fixtures: tuple[Fixture, ...] = ()
    """Files to materialize in the workspace before the run."""
    max_turns: int | None = None
    """The case's own turn limit (lower than the run's wins); None: the run's budget only."""
    timeout_s: float | None = None
    """The case's own wall clock in seconds (lower than the run's wins); None: the run's only."""
    allowed_tools: tuple[str, ...] | None = None
    """The only tools the executor offers for this case (harness names); None: all of them."""
    scaffold_script: str | None = None
    """Shell script run with bash in the workspace, inside the sandbox, before the agent starts."""
    mocks: tuple[MockServer, ...] = ()
    """Mocked MCP servers the executor offers in place of the repo's own (schemas/mocks.py)."""
    http_mocks: tuple[HttpMock, ...] = ()
    """Answers to the agent's HTTP requests, served by a proxy in the sandbox (schemas/http_mocks.py)."""
    history: tuple[HistoryTurn, ...] = ()
    """Earlier turns of a conversation the case continues (schemas/history.py); empty: a fresh one."""
    name: str | None = None
    """The case's name where its format gives it one (a plugin eval case: its folder under
    ``evals/``); reports show it beside the id. Not a key of an ``evals.json`` case."""

    @property
    def has_base_fixtures(self) -> bool:
        return any(f.stage is FixtureStage.BASE for f in self.fixtures)


class Corpus(FrozenModel):
    """A skill's eval corpus."""

    skill_name: str
    """Kebab-case skill name; equals the corpus file stem."""
    evals: tuple[EvalCase, ...] = Field(min_length=2)
    """The cases, at least two."""
    extensions: tuple[str, ...] = ()
    """Opted-in extensions of schema v1 (empty for a plain v1 corpus)."""

    @property
    def assertion_count(self) -> int:
        return sum(len(case.assertions) for case in self.evals)

    def case(self, case_id: int) -> EvalCase:
        """Return the case with ``case_id``; raise ``KeyError`` when there is none."""
        for case in self.evals:
            if case.id == case_id:
                return case
        raise KeyError(case_id)
