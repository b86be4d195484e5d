"""A case's ``scaffold_script``: run with bash in the workspace, inside the sandbox, before the agent.

Only in the bwrap sandbox: the script is repo content, so it never runs on the host (a worker
without bwrap blocks the case). It gets the sandbox's terms, no network among them. Its output
is not shown to the agent nor recorded as the agent's behaviour; a script that fails blocks the
case (``BLOCKED_BAD_FIXTURE``) with the tail of its output, since the case's setup did not happen.
"""

from __future__ import annotations

from schemas.errors import BadFixture, SandboxOnly
from schemas.status import SandboxMode
from worker.sandbox import Sandbox

TAIL_CHARS = 500


def run_scaffold(sandbox: Sandbox, script: str | None, *, case_id: int) -> None:
    """Run ``script`` (None: nothing to do); raise BadFixture when it cannot run or fails."""
    if script is None:
        return
    where = f"case {case_id}: scaffold_script"
    if sandbox.mode is not SandboxMode.BWRAP:
        raise SandboxOnly(f"{where} runs only inside the bwrap sandbox, never on the host")
    result = sandbox.run("bash -s", stdin=script)
    if result.exit_code != 0:
        tail = result.output[-TAIL_CHARS:].strip()
        raise BadFixture(f"{where} exited {result.exit_code} (limit: {result.limit or 'none'}): {tail}")
