"""The executor names a run accepts, and the harness adapter behind each harness name.

``agent`` is the built-in tool loop; ``cmd:<command line>`` any CLI speaking Claude Code's
stream-json; the adapters in :data:`ADAPTERS` are real agent harnesses run natively, each
known by its ``name``. Any other value is a :class:`ConfigError` that lists the known ones (a
typo never silently runs the built-in agent).

Adding a harness is one module in ``harnesses/`` (a :class:`harnesses.adapter.HarnessAdapter`
subclass) and its class in :data:`ADAPTERS`: the CLI's ``--executor`` check and help, the
case-term and trigger checks, the worker's dispatch and the canary all read this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from harnesses.base import Harness
from harnesses.claude_code import ClaudeCode
from harnesses.codex import Codex
from harnesses.copilot_cli import CopilotCli
from harnesses.gemini_cli import GeminiCli
from harnesses.opencode import OpenCode
from harnesses.providers import provider_of
from schemas.constants import BUILTIN_EXECUTOR, CMD_EXECUTOR_PREFIX
from schemas.errors import ConfigError

ADAPTERS: tuple[Callable[[], Harness], ...] = (ClaudeCode, Codex, OpenCode, GeminiCli, CopilotCli)
"""Every harness executor, in the order the CLI lists them."""
HARNESSES: Mapping[str, Callable[[], Harness]] = {factory().name: factory for factory in ADAPTERS}
BUILTIN = BUILTIN_EXECUTOR
CMD_PREFIX = CMD_EXECUTOR_PREFIX
KNOWN = (BUILTIN, *HARNESSES, f"{CMD_PREFIX}'<command line>'")


def check_executor(value: str) -> str:
    """Return ``value`` when it names an executor; raise ConfigError listing the known ones."""
    if value == BUILTIN or value in HARNESSES:
        return value
    if value.startswith(CMD_PREFIX) and value[len(CMD_PREFIX) :].strip():
        return value
    raise ConfigError(f"--executor: unknown executor {value!r}; known: {', '.join(KNOWN)}")


def harness_for(value: str) -> Harness | None:
    """The adapter of a harness executor name; None for ``agent`` and ``cmd:``."""
    factory = HARNESSES.get(value)
    return factory() if factory is not None else None


def executor_help() -> str:
    """The ``--executor`` values, for the CLI's help."""
    return f"{BUILTIN}, {', '.join(HARNESSES)}, or {CMD_PREFIX}'<agent CLI command line>'."


def honoured_terms() -> dict[str, frozenset[str]]:
    """Executor -> the case terms it applies: the built-in agent's and each harness's (a ``cmd:``
    executor applies none)."""
    agent = frozenset(
        {"mocks", "agent_mocks", "http_mocks", "history", "allowed_tools", "max_turns", "timeout_s", "scaffold_script"}
    )
    return {BUILTIN: agent, **{name: factory().honours for name, factory in HARNESSES.items()}}


def trigger_executors() -> tuple[str, ...]:
    """The executors whose activations a trigger run can read: the built-in agent and every
    harness whose adapter reads them."""
    return (BUILTIN, *(name for name, factory in HARNESSES.items() if factory().records_triggers))


def speaks(executor: str, model: str) -> bool:
    """Whether ``executor`` can run ``model``: the built-in agent any litellm model, a ``cmd:`` agent
    whatever it calls on its own, a harness the models of its providers."""
    harness = harness_for(executor)
    return harness is None or provider_of(model) in harness.providers


def spoken(executor: str) -> str:
    """What ``executor`` can run, for an error naming a model it cannot."""
    harness = harness_for(executor)
    if harness is None:
        return "any model"
    names = ", ".join(f"{p}/<model>" for p in sorted(harness.providers))
    return f"{names} models only (its proxy speaks the {harness.protocol} protocol)"
