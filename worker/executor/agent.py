"""The built-in executor: a tool-calling agent loop over a model client and a sandbox.

Decisions: docs/design/executor.md.

One shard's loop: send the rendered executor prompt, execute every tool call the model
asks for in the sandbox, send the results back, until the model answers without tool
calls or a budget runs out. Budgets (turns, total tokens, wall clock) end the trajectory
with its ``EndReason``: running out is the agent's behaviour, graded like any other. A
model call that fails past its retry budget is the evaluator's failure: it is raised as
:class:`schemas.errors.ExecutorFailed` and never becomes a behavioural result, except when
the provider refuses the conversation as too long for the model's context: every tool
result is capped by the product, so the length is the agent's own doing, and the trajectory
ends with ``context-overflow`` and is graded (see docs/design/failure-taxonomy.md). Likewise
when the run's cap refuses a call after this shard spent past its share of the cap
(engine/budget.py): ``budget-share``, graded; a shard within its share that the cap refuses
raises ``BudgetExhausted`` and is counted apart.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from harnesses.model_record import ModelToolCall
from schemas.errors import ContextOverflow, ExecutorFailed, ModelCallFailed, ShareSpent
from schemas.event_bounds import bound_arguments
from schemas.history import HistoryTurn
from schemas.manifest import FLEET_WAIT_ALLOWANCE_S, AgentBudget
from schemas.mocks import MockAnswer, agent_messages
from schemas.trajectory import AssistantEvent, EndReason, ToolCallEvent, ToolResultEvent, Trajectory, Usage
from worker.executor.allowed import CaseTools, capped, case_budget, case_tools, refusal
from worker.executor.final_files import collect_final_files
from worker.executor.prompt import ExecutorInputs, render_executor_prompt
from worker.executor.scaffold import run_scaffold
from worker.executor.tools import TOOL_NAMES, ToolOutcome, execute_tool
from worker.http_mock_sandbox import http_mocked
from worker.models.base import ModelClient, ModelReply
from worker.sandbox import Sandbox, SandboxLimits
from worker.workspace_quota import WORKSPACE_LIMIT, quota_breach


def _assistant_message(reply: ModelReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {
                    "name": call.name,
                    # Send back exactly what the model sent, even when it was not valid JSON; arguments
                    # nested too deep or too large as the trajectory keeps them (a provider may refuse them).
                    "arguments": call.arguments["_raw"]
                    if set(call.arguments) == {"_raw"}
                    else json.dumps(bound_arguments(call.arguments)[0], ensure_ascii=False),
                },
            }
            for call in reply.tool_calls
        ]
    return message


def _result_for_model(outcome: ToolOutcome) -> str:
    notes = []
    if outcome.limit:
        notes.append(f"stopped by the {outcome.limit} limit")
    elif outcome.exit_code not in (0, None):
        notes.append(f"exit code {outcome.exit_code}")
    if outcome.truncated:
        notes.append("the middle of the output was cut")
    return outcome.output + (f"\n[{'; '.join(notes)}]" if notes else "")


@dataclass(eq=False)  # a running loop, compared by identity
class _Loop:
    """State of one run: events, usage, the clock. Kept private; ``run_agent`` is the API."""

    client: ModelClient
    model: str
    sandbox: Sandbox
    budget: AgentBudget
    tools: CaseTools = field(default_factory=CaseTools)
    """The tools offered to the model (a trigger shard adds ``load_skill``)."""
    history: tuple[HistoryTurn, ...] = ()
    """Earlier turns the run continues (a case's ``history``), sent before the prompt, never events."""
    system: str | None = None
    """A system message sent before the prompt (a trigger shard's skill catalogue); None: none."""
    mock_findings: list[str] = field(default_factory=list, init=False)
    events: list[AssistantEvent | ToolCallEvent | ToolResultEvent] = field(default_factory=list, init=False)
    usage: Usage = field(default_factory=Usage, init=False)
    wrote: list[str] = field(default_factory=list, init=False)
    started: float = field(default_factory=time.monotonic, init=False)
    waited_s: float = field(default=0.0, init=False)
    """What the model calls spent waiting on the fleet (limiter, cool-downs, retries): not the agent's time."""

    def remaining_s(self) -> float:
        """The wall clock left: time since the start, less what the model calls waited on the fleet
        (up to ``FLEET_WAIT_ALLOWANCE_S``)."""
        excused = min(self.waited_s, FLEET_WAIT_ALLOWANCE_S)
        return self.budget.wall_clock_s - (time.monotonic() - self.started - excused)

    def over_budget(self, turns: int) -> EndReason | None:
        if self.remaining_s() <= 0:
            return EndReason.WALL_CLOCK
        if turns >= self.budget.max_turns:
            return EndReason.MAX_TURNS
        if self.usage.total_tokens >= self.budget.max_tokens:
            return EndReason.MAX_TOKENS
        return None

    def call_model(self, messages: list[dict[str, Any]]) -> ModelReply:
        try:
            reply = self.client.complete(
                self.model, messages, tools=self.tools.specs, max_tokens=self.budget.max_output_tokens, own=self.usage
            )
        except (ContextOverflow, ShareSpent):
            raise  # the agent's own volume or spending: the loop ends it as behaviour
        except ModelCallFailed as exc:
            raise ExecutorFailed(f"executor model {self.model}: {exc.detail}") from exc
        self.usage = self.usage.add(reply.usage)
        self.waited_s += reply.waited_s
        return reply

    def label(self, name: str) -> str:
        """The tool name as recorded: a name the agent was not offered is escaped data, never a tool."""
        offered = {spec["function"]["name"] for spec in self.tools.specs}
        known = name in TOOL_NAMES or name in self.tools.mocks or name in offered
        return name if known else "unknown-tool:" + json.dumps(name, ensure_ascii=True)

    def refuse_malformed(self, call: ModelToolCall) -> ToolOutcome | None:
        """A call whose arguments nest too deep or are too large: recorded with them elided and answered
        with an error, never run (the agent's malformed call, graded as behaviour); None for any other."""
        arguments, why = bound_arguments(call.arguments)
        if why is None:
            return None
        self.events.append(ToolCallEvent(call_id=call.call_id, name=self.label(call.name), arguments=arguments))
        outcome = ToolOutcome.error(f"{self.label(call.name)[:120]} was not run: {why}")
        self.events.append(ToolResultEvent(call_id=call.call_id, output=outcome.output))
        return outcome

    def run_tool(self, call: ModelToolCall) -> ToolOutcome:
        name = self.label(call.name)
        self.events.append(ToolCallEvent(call_id=call.call_id, name=name, arguments=call.arguments))
        if name in self.tools.mocks:
            return self.answer_mock(call)
        if name in TOOL_NAMES and name not in self.tools.builtin:
            outcome = ToolOutcome.error(refusal(name))
            self.events.append(ToolResultEvent(call_id=call.call_id, output=outcome.output))
            return outcome
        remaining = self.remaining_s()
        timeout = max(1.0, remaining) if remaining < self.budget.command_timeout_s else None
        outcome = execute_tool(self.sandbox, call.name, call.arguments, timeout_s=timeout)
        self.events.append(
            ToolResultEvent(
                call_id=call.call_id,
                output=outcome.output,
                exit_code=outcome.exit_code,
                truncated=outcome.truncated,
                limit=outcome.limit,
            )
        )
        if outcome.wrote:
            self.wrote.append(outcome.wrote)
        return outcome

    def answer_mock(self, call: ModelToolCall) -> ToolOutcome:
        """A mocked MCP tool's answer, recorded here (the mock never runs code of the repo's)."""
        reply = self.tools.answer(call.name, call.arguments)
        if reply.by_model:
            reply = self.ask_agent_mock(call)
        if reply.finding:
            self.mock_findings.append(reply.finding)
        text, truncated = capped(reply.text)
        outcome = ToolOutcome(output=text, exit_code=1 if reply.is_error else 0, truncated=truncated)
        self.events.append(
            ToolResultEvent(call_id=call.call_id, output=text, exit_code=outcome.exit_code, truncated=truncated)
        )
        return outcome

    def ask_agent_mock(self, call: ModelToolCall) -> MockAnswer:
        """A ``type: agent`` mock's answer: the executor's model given the mock's instructions. Its
        tokens count against the shard's budget like the agent's own; it is offered no tools."""
        server, tool = self.tools.mocks[call.name]
        try:
            reply = self.client.complete(
                self.model,
                agent_messages(server, tool, call.arguments),
                max_tokens=self.budget.max_output_tokens,
                own=self.usage,
            )
        except (ContextOverflow, ShareSpent) as exc:  # the agent's volume: its next turn ends the run
            return MockAnswer(text=f"error: the mock could not answer: {exc.detail}", is_error=True)
        except ModelCallFailed as exc:
            raise ExecutorFailed(f"agent mock {call.name} ({self.model}): {exc.detail}") from exc
        self.usage = self.usage.add(reply.usage)
        self.waited_s += reply.waited_s
        return MockAnswer(text=reply.content or "")

    def ran_tools(self) -> bool:
        """Whether any tool call reached the sandbox. Without one nothing ran in the workspace
        since it was made, so no file can have changed, and the final-files walk is skipped."""
        return any(isinstance(e, ToolCallEvent) for e in self.events)

    def over_quota(self, outcome: ToolOutcome) -> str | None:
        """The workspace quota exceeded by a tool call (the agent's doing: behaviour), or None."""
        limits = getattr(self.sandbox, "limits", None)
        if not isinstance(limits, SandboxLimits):
            return None
        return quota_breach(self.sandbox.workspace, limits, stopped=outcome.limit == WORKSPACE_LIMIT)

    def run(self, prompt: str) -> EndReason:
        messages: list[dict[str, Any]] = [{"role": "system", "content": self.system}] if self.system else []
        messages += [{"role": t.role, "content": t.content} for t in self.history]  # a conversation it continues
        messages.append({"role": "user", "content": prompt})
        turns = 0
        while (stop := self.over_budget(turns)) is None:
            try:
                reply = self.call_model(messages)
            except ContextOverflow as exc:
                self.events.append(AssistantEvent(text=f"(the model refused the conversation: {exc.detail})"))
                return EndReason.CONTEXT_OVERFLOW
            except ShareSpent as exc:
                self.events.append(AssistantEvent(text=f"(run ended by the product: {exc.detail})"))
                return EndReason.BUDGET_SHARE
            turns += 1
            if reply.content and reply.content.strip():
                self.events.append(AssistantEvent(text=reply.content))
            if not reply.tool_calls:
                return EndReason.COMPLETED
            messages.append(_assistant_message(reply))
            for call in reply.tool_calls:
                # A tool call still pending when the clock ran out is never started.
                if self.remaining_s() <= 0:
                    return EndReason.WALL_CLOCK
                outcome = self.refuse_malformed(call) or self.run_tool(call)
                messages.append({"role": "tool", "tool_call_id": call.call_id, "content": _result_for_model(outcome)})
                over = self.over_quota(outcome)
                if over:
                    self.events.append(AssistantEvent(text=f"(run ended by the product: {over})"))
                    return EndReason.WORKSPACE_QUOTA
            if (done := self.after_turn()) is not None:
                return done
        return stop

    def after_turn(self) -> EndReason | None:
        """Why the loop ends after a turn's tool calls ran (None: it goes on)."""
        return None


def run_agent(
    client: ModelClient,
    model: str,
    inputs: ExecutorInputs,
    *,
    sandbox: Sandbox,
    budget: AgentBudget | None = None,
) -> Trajectory:
    """Run the executor for one case in ``sandbox`` and return its trajectory.

    Raises :class:`ExecutorFailed` when the model client gives up (retries spent); budgets end
    the trajectory normally with the matching ``end_reason``.
    """
    case = inputs.case
    started_at = datetime.now(UTC)
    run_scaffold(sandbox, case.scaffold_script, case_id=case.id)  # its files are the case's, not the agent's
    since_epoch = time.time()
    prompt = render_executor_prompt(inputs, workspace=sandbox.inner_root)
    with http_mocked(sandbox, case.http_mocks, case_id=case.id) as (box, http):
        loop = _Loop(client, model, box, case_budget(budget or AgentBudget(), case), case_tools(case), case.history)
        end_reason = loop.run(prompt.text)
    return Trajectory(
        **inputs.named(model),
        events=loop.events,
        end_reason=end_reason,
        sandbox=sandbox.mode,
        usage=loop.usage,
        waited_s=round(loop.waited_s, 3),
        final_files=collect_final_files(sandbox, since_epoch=since_epoch, wrote=loop.wrote) if loop.ran_tools() else {},
        template_hashes={"executor": prompt.template_sha256},
        mock_findings=loop.mock_findings + http.findings(),
        http_calls=list(http.calls),
        started_at=started_at,
        finished_at=datetime.now(UTC),
    )
