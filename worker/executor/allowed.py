"""A case's own limits on the built-in agent: ``allowed_tools`` and ``max_turns`` (EvalCase).

``allowed_tools`` names tools as Claude Code does (``Bash``, ``Read``, ...) or as the built-in
agent does (``shell``, ``read_file``, ...); the agent is offered only the built-in tools it names.
A call to any other tool reaches nothing: it is recorded, and the agent is told the tool is not
available, as a harness answers a call to a tool it does not have.
"""

from __future__ import annotations

from typing import Any

from schemas.checks_plugin import BUILTIN_EQUIVALENTS
from schemas.corpus import EvalCase
from schemas.manifest import AgentBudget
from worker.executor.tools import TOOL_NAMES, TOOL_SPECS


def offered_tools(case: EvalCase) -> tuple[list[dict[str, Any]], frozenset[str]]:
    """The tool specs the agent is offered for ``case``, and their names."""
    if case.allowed_tools is None:
        return TOOL_SPECS, TOOL_NAMES
    names = frozenset(BUILTIN_EQUIVALENTS.get(t, t) for t in case.allowed_tools) & TOOL_NAMES
    return [s for s in TOOL_SPECS if s["function"]["name"] in names], names


def refusal(name: str) -> str:
    return f"tool {name!r} is not available in this case (allowed tools only)"


def case_budget(budget: AgentBudget, case: EvalCase) -> AgentBudget:
    """The run's budget, with the case's ``max_turns`` when it is lower."""
    if case.max_turns is None or case.max_turns >= budget.max_turns:
        return budget
    return budget.model_copy(update={"max_turns": case.max_turns})
