"""The built-in agent's sandbox when its case has HTTP mocks: every command reaches the mock proxy.

Each tool call of the built-in agent is its own bubblewrap, so each one starts the in-sandbox
forwarder to the shard's :class:`~worker.http_mock.HttpMockProxy` before the command and gets
the proxy's environment; otherwise it is :class:`~worker.sandbox.BwrapSandbox` exactly (same
limits, same uid, same workspace). Only bubblewrap: unconfined, the proxy variables would be
advice over a real network, so a case with HTTP mocks is blocked there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from schemas.errors import SandboxOnly
from schemas.http_mocks import HttpMock
from schemas.status import SandboxMode
from worker.http_mock import HttpMockProxy
from worker.sandbox import INNER_HOME, BwrapSandbox, CommandResult, Sandbox


class HttpMockedSandbox:
    """``inner`` with the HTTP mock proxy in reach of every command."""

    mode = SandboxMode.BWRAP

    def __init__(self, inner: BwrapSandbox, proxy: HttpMockProxy) -> None:
        self.inner, self.proxy = inner, proxy
        self.workspace, self.inner_root, self.limits, self.uid = (
            inner.workspace,
            inner.inner_root,
            inner.limits,
            inner.uid,
        )

    def run(self, command: str, *, timeout_s: float | None = None, stdin: str | None = None) -> CommandResult:
        from worker.sandbox_exec import bwrap_argv, inner_argv, sandbox_env

        env = {**sandbox_env(home=INNER_HOME, tmp="/tmp"), **self.proxy.env()}
        inner = inner_argv(self.proxy.prelude() + command, self.limits, uid=self.uid)
        argv = bwrap_argv(self.workspace, self.limits, uid=self.uid, inner=inner, env=env)
        cut = len(argv) - len(inner) - 1  # the "--" before the inner command
        return self.inner.execute(argv[:cut] + self.proxy.binds() + argv[cut:], env, timeout_s, stdin)


@contextmanager
def http_mocked(
    sandbox: Sandbox, mocks: tuple[HttpMock, ...], *, case_id: int
) -> Iterator[tuple[Sandbox, HttpMockProxy]]:
    """(the sandbox the agent's commands run in, the proxy whose ``calls`` are the record); the
    sandbox itself and an inert proxy when the case has no HTTP mocks."""
    import shutil
    import tempfile

    if not mocks:
        yield sandbox, HttpMockProxy((), Path("/nonexistent"))
        return
    if not isinstance(sandbox, BwrapSandbox):
        raise SandboxOnly(f"case {case_id}: http_mocks run only inside the bwrap sandbox (it has no network)")
    parent = tempfile.gettempdir()
    short = parent if len(parent) + 50 < 108 else "/tmp"  # the socket's path must fit the kernel's 108 bytes
    folder = Path(tempfile.mkdtemp(prefix="skill-eval-http-", dir=short))
    folder.chmod(0o711)
    try:
        with HttpMockProxy(mocks, folder / "p") as proxy:
            yield HttpMockedSandbox(sandbox, proxy), proxy
    finally:
        shutil.rmtree(folder, ignore_errors=True)
