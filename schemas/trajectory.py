"""The executor's recorded trajectory: structured events, rendered as text for the judge."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from enum import Enum
from typing import Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.base import FrozenModel
from schemas.event_bounds import bound_arguments
from schemas.http_mocks import HttpCall
from schemas.status import SandboxMode


def _now() -> datetime:
    return datetime.now(UTC)


class AssistantEvent(FrozenModel):
    """Text the agent said; never evidence for the judge, but part of the record."""

    kind: Literal["assistant"] = "assistant"
    text: str
    """The assistant's message text."""
    ts: datetime = Field(default_factory=_now)
    """When the event was recorded (UTC)."""


class ToolCallEvent(FrozenModel):
    """A tool call the agent made."""

    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    """Pairs the call with its result."""
    name: str
    """Tool name (shell, read_file, write_file, edit_file, glob, grep, or an external agent's own)."""
    arguments: dict[str, Any]
    """Arguments as the agent gave them; nested too deep or too large, bounded with a marker saying
    what was elided (:func:`schemas.event_bounds.bound_arguments`), so every record can be stored."""
    ts: datetime = Field(default_factory=_now)
    """When the call was made (UTC)."""

    @field_validator("arguments", mode="before")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        # Every way a call enters a trajectory (agent loop, harness streams, imported recordings)
        # builds this event: the bound holds for all of them.
        return bound_arguments(value)[0] if isinstance(value, dict) else value


class ToolResultEvent(FrozenModel):
    """What a tool call returned."""

    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    """The call this result answers."""
    output: str
    """Output as the agent saw it (head and tail kept when large)."""
    exit_code: int | None = None
    """Exit code of a shell command; None for tools without one."""
    truncated: bool = False
    """True when the middle of the output was elided."""
    limit: str | None = None
    """Which sandbox limit the command hit (timeout, cpu, memory, processes, file-size, workspace-quota), if any."""
    contested: bool = False
    """The agent sent its model a second, different result for this call (a forged tool result):
    this output is the harness's stream's, and the case fails (:attr:`Trajectory.forged_results`)."""
    ts: datetime = Field(default_factory=_now)
    """When the result was recorded (UTC)."""

    def head(self, tool: str, label: Callable[[str], str] = str) -> str:
        """The result's first line as the judge reads it: ``[tool_result] <tool>``, its exit code
        and the limit it hit; ``label`` makes a name safe to show (the judge's view quotes them)."""
        head = f"[tool_result] {label(tool)}"
        if self.exit_code is not None:
            head += f" exit={self.exit_code}"
        if self.limit:
            head += f" limit={label(self.limit)}"
        if self.contested:
            head += " (contested: the agent sent its model a second, different result for this call)"
        return head


Event = Annotated[AssistantEvent | ToolCallEvent | ToolResultEvent, Field(discriminator="kind")]


class EndReason(str, Enum):
    """Why the trajectory ended. Hitting a budget is behaviour, not infra."""

    COMPLETED = "completed"
    MAX_TURNS = "max-turns"
    MAX_TOKENS = "max-tokens"
    WALL_CLOCK = "wall-clock"
    CONTEXT_OVERFLOW = "context-overflow"
    """The provider refused the agent's conversation as longer than the model's context."""
    WORKSPACE_QUOTA = "workspace-quota"
    """The agent filled the workspace past its byte or file quota."""
    BUDGET_SHARE = "budget-share"
    """The run's cap refused a call after the shard spent past its share (cap / the run's shards)."""
    SKILL_ACTIVATED = "skill-activated"
    """A trigger shard: the agent activated a skill, which is all the shard asks."""
    NO_MODEL_CALL = "no-model-call"
    """A harness ended before it asked its model anything, though its canary proved it starts and
    asks: what the case added (the repo's plugin hooks, the agent's commands) stopped it."""
    UPSTREAM_FAILED_OWN_REQUESTS = "upstream-failed-own-requests"
    """The upstream failed what the proxy took for the harness's conversation, but answered the
    worker's own call to the same model right after: the agent (or the repo's code) can send its
    proxy requests that copy the case prompt, so that failure alone is no proof of infra."""
    STREAM_CUT = "stream-cut"
    """A harness's event stream passed the sandbox's output cap (what the agent's commands printed):
    graded on what was recorded before the cut."""


class Usage(BaseModel):
    """Tokens and cost of the model calls behind one record."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    """Input tokens, as reported by the provider."""
    completion_tokens: int = 0
    """Output tokens, as reported by the provider."""
    calls: int = 0
    """Model calls made (retries included)."""
    cost_usd: float | None = None
    """Cost from litellm's cost map; None where the model is unknown to it."""

    def add(self, other: Usage) -> Usage:
        cost = (
            None
            if self.cost_usd is None and other.cost_usd is None
            else ((self.cost_usd or 0.0) + (other.cost_usd or 0.0))
        )
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            calls=self.calls + other.calls,
            cost_usd=cost,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class TrajectoryName(TypedDict):
    """The fields that say whose a trajectory is, as an executor fills them from what it knows of
    the shard (unpacked into :class:`Trajectory`): every executor names its trajectory alike."""

    shard_id: str
    skill: str
    case_id: int
    model: str


class Trajectory(BaseModel):
    """Everything the executor did for one shard."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    """Format version of this record."""
    shard_id: str = ""
    """The shard this trajectory belongs to ('' for imported or built-in ones)."""
    skill: str
    """Skill under test."""
    case_id: int
    """Eval case id."""
    model: str
    """Executor model or external command label."""
    events: list[Event] = Field(default_factory=list)
    """Assistant text, tool calls and tool results, in order."""
    end_reason: EndReason = EndReason.COMPLETED
    """Why the loop stopped."""
    sandbox: SandboxMode = SandboxMode.BWRAP
    """Sandbox mode the tool calls ran under."""
    usage: Usage = Field(default_factory=Usage)
    """Executor model usage."""
    waited_s: float = Field(default=0.0, ge=0)
    """Seconds the executor's model calls waited on the fleet (the limiter, a 429's cool-down,
    retries): left out of its wall clock, which measures the agent, not the fleet's contention."""
    final_files: dict[str, str] = Field(default_factory=dict)
    """Final content of files the executor touched (repo-relative path -> text), for deterministic checks."""
    template_hashes: dict[str, str] = Field(default_factory=dict)
    """SHA-256 of each prompt template the executor used, by template name."""
    executor: str = "agent"
    """Which executor ran: ``agent``, a harness name (``claude-code``, ``codex``) or ``cmd:...``."""
    skill_activated: bool | None = None
    """Harness executors: whether the harness loaded the skill (None: not recorded for this executor)."""
    mock_findings: list[str] = Field(default_factory=list)
    """Calls to a mocked MCP tool whose input failed the mock's ``expect`` guard (recorded by the product)."""
    http_calls: list[HttpCall] = Field(default_factory=list)
    """Every request the sandbox's HTTP mock proxy received, answered or refused, in order (recorded by
    the product's proxy outside the sandbox; empty when the case has no ``http_mocks``)."""
    rejected_calls: list[str] = Field(default_factory=list)
    """Tool calls the harness's stream claimed that no proxied model response contained (flagged, left out)."""
    forged_results: list[str] = Field(default_factory=list)
    """Call ids the agent sent its model proxy a second, different result for (a forged tool result):
    the agent tampered with its record, and grading fails the case (:mod:`worker.grading.tampering`)."""
    skills_fired: list[str] | None = None
    """Trigger runs: every installed skill the agent activated, in order of first activation (None: not a
    trigger run)."""
    proposed_calls: list[str] = Field(default_factory=list)
    """Tool calls a proxied model response held that the harness never ran (its stream never claimed
    them, or they answered a side request): "model proposed, never run". Listed in the report, never
    events, never counted as calls, never shown to the judge."""
    refused_requests: list[str] = Field(default_factory=list)
    """Model requests the harness's proxy refused for what they asked (another model, a provider-side
    tool): the agent's doing, listed in the report."""
    started_at: datetime = Field(default_factory=_now)
    """Start time (UTC)."""
    finished_at: datetime | None = None
    """End time (UTC)."""

    def render(self) -> str:
        """Render as the judge reads it: one block per event, each line-prefixed by its kind."""
        names = {e.call_id: e.name for e in self.events if isinstance(e, ToolCallEvent)}
        blocks: list[str] = []
        for event in self.events:
            if isinstance(event, AssistantEvent):
                blocks.append(f"[assistant] {event.text}")
            elif isinstance(event, ToolCallEvent):
                args = json.dumps(event.arguments, ensure_ascii=False, sort_keys=True)
                blocks.append(f"[tool_call] {event.name}({args})")
            else:
                blocks.append(f"{event.head(names.get(event.call_id, '?'))}\n{event.output}")
        for call in self.http_calls:
            answered = "mocked" if call.mocked else "refused"
            blocks.append(f"[http_call] {call.method} {json.dumps(call.url)} -> {call.status} {answered}\n{call.body}")
        if self.end_reason is not EndReason.COMPLETED:
            blocks.append(f"[assistant] (run ended: {self.end_reason.value})")
        return "\n".join(blocks) + ("\n" if blocks else "")
