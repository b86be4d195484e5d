"""The offline model server: scripted replies over real HTTP, faults, the rpm ceiling, the judge."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas.trajectory import ToolCallEvent, ToolResultEvent, Trajectory
from testkit.judge import judge_request, split_grading_request
from testkit.offline_server import OfflineModelServer, RateWindow, load_scenario
from testkit.scenario import ScenarioError, parse_scenario
from tests.model_support import server_fixtures
from worker.grading.transcript import build_grader_prompt, prepare_transcript

ROOT = Path(__file__).resolve().parent.parent
TOOLS = [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}]

SCENARIO: dict[str, Any] = {
    "rules": [
        {
            "contains": "list files",
            "tools": True,
            "replies": [
                {"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]},
                {"text": "done"},
            ],
        },
        {"contains": "flaky", "replies": [{"status": 503, "times": 2, "text": "recovered"}]},
        {"contains": "slow", "replies": [{"delay_s": 0.3, "text": "late"}]},
        {"contains": "broken", "replies": [{"malformed": True}]},
        {"contains": "busy", "replies": [{"status": 429, "retry_after": 7}]},
        {"contains": "stuck", "replies": [{"hang": True}]},
        {"model": "other-model", "replies": [{"text": "model-specific"}]},
    ],
    "default": {"text": "fallback"},
}


server = server_fixtures(lambda: SCENARIO, scope="function")[0]


def chat(base: str, content: str, *, messages: list[dict[str, Any]] | None = None, **extra: Any) -> httpx.Response:
    body = {"model": extra.pop("model", "scripted"), "messages": messages or [{"role": "user", "content": content}]}
    return httpx.post(f"{base}/chat/completions", json={**body, **extra}, timeout=extra.pop("timeout", 5))


def test_a_tool_loop_is_scripted_by_the_turn_index_of_each_request(server: OfflineModelServer) -> None:
    first = chat(server.base_url, "please list files", tools=TOOLS).json()
    call = first["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "shell", "arguments": '{"command": "ls"}'}
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert first["usage"]["total_tokens"] == first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
    history = [
        {"role": "user", "content": "please list files"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "a.txt"},
    ]
    second = chat(server.base_url, "", messages=history, tools=TOOLS).json()
    assert second["choices"][0]["message"]["content"] == "done"


def test_a_rule_that_requires_tools_does_not_answer_a_request_without_them(server: OfflineModelServer) -> None:
    assert chat(server.base_url, "please list files").json()["choices"][0]["message"]["content"] == "fallback"


def test_rules_can_be_bound_to_a_model_name(server: OfflineModelServer) -> None:
    reply = chat(server.base_url, "hi", model="other-model").json()
    assert reply["choices"][0]["message"]["content"] == "model-specific"


def test_a_fault_with_times_fails_each_conversation_that_often_then_answers(server: OfflineModelServer) -> None:
    assert [chat(server.base_url, "flaky one").status_code for _ in range(3)] == [503, 503, 200]
    # Another conversation has its own count: concurrent conversations stay deterministic.
    assert chat(server.base_url, "flaky two").status_code == 503


def test_scripted_faults_are_served_as_scripted(server: OfflineModelServer) -> None:
    started = time.monotonic()
    assert chat(server.base_url, "slow").json()["choices"][0]["message"]["content"] == "late"
    assert time.monotonic() - started >= 0.3
    broken = chat(server.base_url, "broken")
    assert broken.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken.text)
    busy = chat(server.base_url, "busy")
    assert (busy.status_code, busy.headers["retry-after"]) == (429, "7")
    with pytest.raises(httpx.ReadTimeout):
        chat(server.base_url, "stuck", timeout=0.5)


def test_every_request_is_recorded_and_counted_until_reset(server: OfflineModelServer) -> None:
    chat(server.base_url, "hello")
    chat(server.base_url, "busy")
    recorded = httpx.get(server.base_url.removesuffix("/v1") + "/_control/requests").json()
    assert [r["messages"][0]["content"] for r in recorded] == ["hello", "busy"]
    stats = httpx.get(server.base_url.removesuffix("/v1") + "/_control/stats").json()
    assert (stats["total"], stats["ok"], stats["rate_limited"]) == (2, 1, 1)
    httpx.post(server.base_url.removesuffix("/v1") + "/_control/reset")
    assert server.requests() == [] and server.stats()["total"] == 0


def test_each_successful_call_is_timed_from_its_arrival_to_its_reply(server: OfflineModelServer) -> None:
    before = time.time()
    chat(server.base_url, "busy")  # a 429: counted as the first request, not on the timeline
    chat(server.base_url, "slow")
    (arrived, replied, model), *rest = server.timeline()
    assert rest == [] and model == "scripted"
    assert before <= server.stats()["first_request_at"] < arrived
    assert replied - arrived >= 0.3  # the scripted delay is inside the call's span


def test_the_scenario_can_be_replaced_at_runtime_and_a_bad_one_is_refused(server: OfflineModelServer) -> None:
    root = server.base_url.removesuffix("/v1")
    ok = httpx.post(root + "/_control/scenario", json={"rules": [{"contains": "x", "replies": [{"text": "new"}]}]})
    assert ok.status_code == 200
    assert chat(server.base_url, "x").json()["choices"][0]["message"]["content"] == "new"
    bad = httpx.post(root + "/_control/scenario", json={"rules": [{"regex": "(", "replies": [{}]}]})
    assert bad.status_code == 400 and "rules[0].regex" in bad.json()["error"]["message"]


def test_the_rpm_ceiling_answers_429_with_retry_after_once_the_window_is_full() -> None:
    with OfflineModelServer(None, rpm=60, window_s=2.0) as srv:  # 2 requests per 2 s
        codes = [chat(srv.base_url, "hi").status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        assert int(chat(srv.base_url, "hi").headers["retry-after"]) >= 1
        assert srv.stats()["ceiling_rate_limited"] == 2


def test_the_sliding_window_admits_again_once_old_requests_leave_it() -> None:
    window = RateWindow(rpm=60, window_s=0.2)  # a limit of 1 per 0.2 s (never below one)
    assert window.admit() is None
    wait = window.admit()
    assert wait is not None and 0 < wait <= 0.2
    time.sleep(wait + 0.01)
    assert window.admit() is None


def test_stop_returns_promptly_while_a_request_hangs() -> None:
    srv = OfflineModelServer(SCENARIO)
    srv.start()
    errors: list[BaseException] = []

    def hung_call() -> None:
        try:
            chat(srv.base_url, "stuck")
        except httpx.HTTPError as err:
            errors.append(err)

    thread = threading.Thread(target=hung_call)
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 3
    thread.join(5)
    assert errors, "the hung call ends with a connection error once the server stops"


def test_bad_scenarios_are_named_errors() -> None:
    with pytest.raises(ScenarioError, match=r"rules\[0\]\.replies"):
        parse_scenario({"rules": [{"contains": "x"}]})
    with pytest.raises(ScenarioError, match=r"judge\[0\]"):
        parse_scenario({"judge": [{"assertion_contains": "x"}]})
    with pytest.raises(ScenarioError, match=r"nope\.json"):
        load_scenario("nope.json")


def test_the_process_mode_prints_its_url_and_serves(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"default": {"text": "from a process"}}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "testkit.offline_server", "--scenario", str(scenario), "--rpm", "100"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        assert chat(url, "hi").json()["choices"][0]["message"]["content"] == "from a process"
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


# --- the rule-based judge ------------------------------------------------------------------


def test_a_grading_request_is_split_into_assertions_and_the_fenced_transcript() -> None:
    prompt = build_grader_prompt("s", ["first one", "second one"], "[tool_call] shell({})\n", "0123456789abcdef")
    assertions, transcript = split_grading_request(prompt)
    assert assertions == ["first one", "second one"]
    assert transcript.strip() == "[tool_call] shell({})"


def _demo_trajectory(skill: str, case_id: int, prompt: str) -> Trajectory:
    """Play the demo scenario's executor script for a case, with plausible tool results."""
    scenario = json.loads((ROOT / "testkit" / "scenarios" / "demo.json").read_text())
    rule = next(r for r in scenario["rules"] if r["contains"] in prompt)
    events: list[ToolCallEvent | ToolResultEvent] = []
    for turn, reply in enumerate(rule["replies"]):
        for call in reply.get("tool_calls", []):
            events.append(ToolCallEvent(call_id=f"c{turn}", name=call["name"], arguments=call["arguments"]))
            events.append(ToolResultEvent(call_id=f"c{turn}", output="ok", exit_code=0))
    return Trajectory(skill=skill, case_id=case_id, model="openai/scripted-demo", events=list(events))


EXPECTED_DEMO = {
    ("changelog-entry", 1): [True, True, True],
    ("changelog-entry", 2): [False, True],
    ("commit-message", 1): [True, True, True],
    ("commit-message", 2): [True, False, False],
}


@pytest.mark.parametrize(("skill", "case_id"), sorted(EXPECTED_DEMO))
def test_the_demo_judge_passes_what_the_demo_script_did_and_fails_the_rest(skill: str, case_id: int) -> None:
    corpus = json.loads((ROOT / "examples" / "demo-repo" / "evals" / f"{skill}.evals.json").read_text())
    case = next(c for c in corpus["evals"] if c["id"] == case_id)
    assertions = case["assertions"]
    transcript = prepare_transcript(_demo_trajectory(skill, case_id, case["prompt"]).render())
    prompt = build_grader_prompt(skill, assertions, transcript, "00112233445566aa")
    verdicts = judge_request(prompt, load_scenario("demo").judge_rules)
    assert [v["text"] for v in verdicts] == assertions
    assert [v["passed"] for v in verdicts] == EXPECTED_DEMO[(skill, case_id)]
    for verdict in verdicts:  # a pass quotes the transcript verbatim; a fail says what is absent
        assert (verdict["evidence"] in transcript) if verdict["passed"] else verdict["evidence"].startswith("absent:")


def test_an_assertion_without_a_judge_rule_fails_as_absent() -> None:
    prompt = build_grader_prompt("s", ["The agent does something unscripted"], "[assistant] hi\n", "0" * 16)
    [verdict] = judge_request(prompt, load_scenario("demo").judge_rules)
    assert verdict["passed"] is False and verdict["evidence"].startswith("absent:")


def test_assertions_given_as_objects_are_still_found() -> None:
    text = 'Assertions:\n[{"text": "one"}, {"text": "two"}]\n<transcript-ab>\n["not", "these"]\n</transcript-ab>'
    assert split_grading_request(text) == (["one", "two"], '\n["not", "these"]\n')
