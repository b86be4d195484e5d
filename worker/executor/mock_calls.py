"""Mock calls of a harness run, settled by the product from the recorded calls.

A harness's mocked MCP tools are answered inside the sandbox (harnesses/mcp_mock_server.py), where
the agent also runs. The calls themselves are unforgeable (a harness trajectory keeps only calls
its proxied model responses contained); the answers are recomputed here from each call and the
case's mocks, so the result the judge reads is the mock's, whatever the sandbox printed, and an
input failing an ``expect`` guard is a finding.
"""

from __future__ import annotations

from schemas.corpus import EvalCase
from schemas.mocks import answer, function_specs
from schemas.trajectory import ToolCallEvent, ToolResultEvent, Trajectory


def settle_mock_calls(trajectory: Trajectory, case: EvalCase) -> Trajectory:
    """``trajectory`` with every mocked tool's result replaced by the mock's answer, and its findings."""
    mocks = function_specs(case.mocks)
    if not mocks:
        return trajectory
    calls = {e.call_id: e for e in trajectory.events if isinstance(e, ToolCallEvent) and e.name in mocks}
    events, findings = [], list(trajectory.mock_findings)
    for event in trajectory.events:
        if isinstance(event, ToolResultEvent) and event.call_id in calls:
            call = calls[event.call_id]
            server, tool, _ = mocks[call.name]
            reply = answer(server, tool, call.arguments)
            if reply.finding:
                findings.append(reply.finding)
            event = event.model_copy(update={"output": reply.text, "exit_code": 1 if reply.is_error else 0})
        events.append(event)
    return trajectory.model_copy(update={"events": events, "mock_findings": findings})
