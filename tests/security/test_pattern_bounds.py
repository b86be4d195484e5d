"""A corpus pattern the agent's text makes backtrack for ever is bounded, and decided against the
agent: ``(a+)+$`` over 34 ``a`` and a ``!`` took Python's ``re`` about half an hour, holding the
GIL, so one request froze a worker's mock proxy past its shard's timeout and SIGTERM."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from schemas.checks_http import HttpCallCheck, HttpMatcher
from schemas.corpus import FileContainsCheck, ToolCallCheck
from schemas.http_mocks import HttpCall, HttpMock
from schemas.mocks import MockTool, answer
from schemas.trajectory import ToolCallEvent, Trajectory
from tests.executor_support import open_test_sandbox
from worker.grading.deterministic import check_assertion
from worker.http_mock_sandbox import http_mocked
from worker.sandbox import SandboxLimits

EVIL = r"(x+x+)+y"
BAIT = "x" * 5000  # backtracks for ever in any backtracking engine, the bounded one included
BOUND_S = 30.0  # the bound is about a second a match; the unbounded one never ends

pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly:UserWarning")


def made(*events: ToolCallEvent, files: dict[str, str] | None = None, calls: tuple[HttpCall, ...] = ()) -> Trajectory:
    return Trajectory(
        skill="demo", case_id=1, model="m", events=list(events), final_files=files or {}, http_calls=list(calls)
    )


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.monotonic()
    value = fn()
    assert time.monotonic() - start < BOUND_S
    return value


def test_a_file_check_whose_pattern_gives_up_fails() -> None:
    check = FileContainsCheck(text="t", path="out.txt", pattern=EVIL)
    verdict = timed(lambda: check_assertion(check, made(files={"out.txt": BAIT})))
    assert not verdict.passed and "gave up" in verdict.evidence


def test_an_absence_check_the_agent_makes_give_up_fails_rather_than_passes() -> None:
    # "never calls the paid endpoint": max 0; a URL that makes the pattern give up would read as absent.
    check = HttpCallCheck(text="t", request=HttpMatcher(url=EVIL), min=0, max=0)
    call = HttpCall(method="GET", url="https://paid.test/" + BAIT, status=200, mocked=True)
    verdict = timed(lambda: check_assertion(check, made(calls=(call,))))
    assert not verdict.passed and "counted as failed" in verdict.evidence


def test_a_tool_call_check_gives_up_and_fails() -> None:
    check = ToolCallCheck(text="t", pattern=EVIL, tool="shell", argument="cmd", absent=True)
    event = ToolCallEvent(call_id="1", name="shell", arguments={"cmd": BAIT})
    assert not timed(lambda: check_assertion(check, made(event))).passed


def test_a_mock_tool_expectation_that_gives_up_is_an_unexpected_input() -> None:
    tool = MockTool(name="lookup", answer="ok", expect={"q": EVIL})
    reply = timed(lambda: answer("db", tool, {"q": BAIT}))
    assert reply.is_error and reply.finding is not None and "unexpected input" in reply.finding


def test_the_mock_proxy_refuses_a_url_its_pattern_gives_up_on(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    box = open_test_sandbox(tmp_path / "ws", SandboxLimits(timeout_s=120))
    mocks = (HttpMock(url=r"^http://redos\.invalid/(x+x+)+y", body="never"),)
    with http_mocked(box, mocks, case_id=1) as (sandbox, proxy):
        url = shlex.quote(f"http://redos.invalid/{BAIT}")
        output = timed(lambda: sandbox.run(f"curl -sS -o /dev/null -w '%{{http_code}}' {url}").output)
    [call] = proxy.calls
    assert not call.mocked and call.body != "never"
    assert output.strip() == str(call.status)
