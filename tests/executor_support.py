"""Helpers shared by the executor tests: a real bubblewrap sandbox on a workspace, the fake agent CLI."""

from __future__ import annotations

import shlex
from pathlib import Path

from schemas.status import SandboxMode
from worker.sandbox import Sandbox, SandboxLimits, open_sandbox

FAKE_AGENT_CLI = Path(__file__).resolve().parent / "fake_agent_cli.py"


def open_test_sandbox(workspace: Path, limits: SandboxLimits | None = None) -> Sandbox:
    """A real bwrap sandbox confined to ``workspace``."""
    return open_sandbox(workspace, SandboxMode.BWRAP, limits or SandboxLimits(timeout_s=20))


def fake_cli_command(*args: str) -> str:
    """A shell command line running the fake agent CLI inside a sandbox.

    The script's text travels in the command line itself (``python3 -c``), so it needs no
    bind of the tests folder into the sandbox.
    """
    return (
        "python3 -c "
        + shlex.quote(FAKE_AGENT_CLI.read_text(encoding="utf-8"))
        + "".join(" " + shlex.quote(a) for a in args)
    )
