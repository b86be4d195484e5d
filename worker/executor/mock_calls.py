"""Mock calls of a harness run, settled by the product from the recorded calls.

A harness's mocked MCP tools are answered inside the sandbox (harnesses/mcp_mock_server.py), where
the agent also runs. The calls themselves are unforgeable (a harness trajectory keeps only calls
its proxied model responses contained); the answers are recomputed here from each call and the
case's mocks, so the result the judge reads is the mock's, whatever the sandbox printed; an answer
the harness reported differently, and an input failing an ``expect`` guard, are findings.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

from harnesses import mcp_mock_server
from harnesses.base import INNER_MOCKS_DIR
from schemas.corpus import EvalCase
from schemas.mocks import answer, function_specs
from schemas.trajectory import ToolCallEvent, ToolResultEvent, Trajectory
from worker.executor.allowed import capped


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
            text, truncated = capped(reply.text)
            if event.output.strip() != reply.text.strip() and not event.truncated:
                seen = event.output.strip()[:200]
                findings.append(f"{call.name}: the harness reported another answer than the mock's: {seen!r}")
            update = {"output": text, "exit_code": 1 if reply.is_error else 0, "truncated": truncated}
            event = event.model_copy(update=update)
        events.append(event)
    return trajectory.model_copy(update={"events": events, "mock_findings": findings})


def mock_servers(case: EvalCase) -> dict[str, tuple[str, ...]]:
    """Mocked server name -> its tool names, for the harness's MCP configuration."""
    return {s.name: tuple(t.name for t in s.tools) for s in case.mocks}


def stage_mocks(case: EvalCase, folder: Path) -> list[str]:
    """Write the mock server and the case's mocks to ``folder``; the bwrap arguments that show it,
    read-only, at ``INNER_MOCKS_DIR`` (nothing when the case has no mocks)."""
    if not case.mocks:
        return []
    folder.mkdir(mode=0o755)
    server = folder / "mcp_mock_server.py"
    server.write_text(inspect.getsource(mcp_mock_server))
    data = folder / "mocks.json"
    data.write_text(json.dumps([s.model_dump(mode="json") for s in case.mocks], ensure_ascii=False))
    for path in (server, data):
        path.chmod(0o644)
    return ["--perms", "0755", "--dir", INNER_MOCKS_DIR, "--ro-bind", str(folder), INNER_MOCKS_DIR]
