"""A case's own terms for the built-in agent: ``allowed_tools``, ``max_turns`` and mocked MCP tools.

``allowed_tools`` names tools as Claude Code does (``Bash``, ``Read``, ``mcp__<server>__<tool>``)
or as the built-in agent does (``shell``, ``read_file``, ...); the agent is offered only those. A
call to a built-in tool not offered reaches nothing: it is recorded, and the agent is told the tool
is not available, as a harness answers a call to a tool it does not have.

Mocked MCP tools (``EvalCase.mocks``) are answered by the loop itself from the mock, never by a
server of the repo's: the call, its input and the answer are recorded by the product like any
tool call, and an input failing a mock's ``expect`` guard is a finding on the trajectory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from schemas.checks_plugin import BUILTIN_EQUIVALENTS
from schemas.corpus import EvalCase
from schemas.event_bounds import TOOL_RESULT_CAP_CHARS
from schemas.manifest import AgentBudget
from schemas.mocks import MockAnswer, MockTool, answer, function_specs
from schemas.trajectory import Event, ToolCallEvent
from worker.executor.tools import TOOL_NAMES, TOOL_SPECS
from worker.output import OutputBuffer

MOCK_ANSWER_CHARS = TOOL_RESULT_CAP_CHARS
"""A repo-written answer is capped like a command's output (the sandbox's default)."""


@dataclass(frozen=True)
class CaseTools:
    """The tools offered for one case."""

    specs: list[dict[str, Any]] = field(default_factory=lambda: list(TOOL_SPECS))
    builtin: frozenset[str] = TOOL_NAMES
    """Built-in tools offered."""
    mocks: dict[str, tuple[str, MockTool]] = field(default_factory=dict)
    """``mcp__<server>__<tool>`` -> (server, mocked tool), offered."""

    def answer(self, name: str, arguments: dict[str, Any]) -> MockAnswer:
        server, tool = self.mocks[name]
        return answer(server, tool, arguments)


def _allowed(name: str, allowed: tuple[str, ...] | None) -> bool:
    return allowed is None or name in allowed or any(BUILTIN_EQUIVALENTS.get(a) == name for a in allowed)


def case_tools(case: EvalCase) -> CaseTools:
    """The built-in tools and mocked MCP tools offered for ``case``."""
    builtin = frozenset(n for n in TOOL_NAMES if _allowed(n, case.allowed_tools))
    mocked = {n: v for n, v in function_specs(case.mocks).items() if _allowed(n, case.allowed_tools)}
    specs = [s for s in TOOL_SPECS if s["function"]["name"] in builtin] + [spec for _, _, spec in mocked.values()]
    return CaseTools(specs, builtin, {n: (server, tool) for n, (server, tool, _) in mocked.items()})


def capped(text: str, chars: int = MOCK_ANSWER_CHARS) -> tuple[str, bool]:
    """A mock's answer as a tool's output is kept: head and tail when it is longer than ``chars``."""
    buffer = OutputBuffer(chars)
    buffer.feed(text.encode("utf-8"), final=True)
    return buffer.render()


def refusal(name: str) -> str:
    return f"tool {name!r} is not available in this case (allowed tools only)"


def case_budget(budget: AgentBudget, case: EvalCase) -> AgentBudget:
    """The run's budget, with the case's ``max_turns`` and ``timeout_s`` where they are lower."""
    update: dict[str, Any] = {}
    if case.max_turns is not None and case.max_turns < budget.max_turns:
        update["max_turns"] = case.max_turns
    if case.timeout_s is not None and case.timeout_s < budget.wall_clock_s:
        update["wall_clock_s"] = case.timeout_s
    return budget.model_copy(update=update) if update else budget


def not_offered(events: Iterable[Event], offered: frozenset[str] | None) -> list[str]:
    """A finding per call the harness ran of a tool its proxy never offered the model (the case's
    allowed tools only): the model named it anyway, and the harness had it."""
    if offered is None:
        return []
    return [
        f"{e.name}: called, but the case does not allow it (never offered to the model)"
        for e in events
        if isinstance(e, ToolCallEvent) and e.name not in offered
    ]
