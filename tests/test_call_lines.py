"""The reports list each shard's mocked tool calls and HTTP requests with their status, escaped like
any agent text: a call's input or a URL written to break the report's Markdown or HTML stays text."""

from __future__ import annotations

from producer.plan.planning import plan_run
from reducer.render import render_markdown
from reducer.render_html import render_html
from reducer.stream import reduce_run
from schemas.call_lines import MAX_LINES, http_call_lines, mock_call_lines
from schemas.corpus import Corpus, EvalCase
from schemas.http_mocks import HttpCall
from schemas.shard import SkillBundle
from schemas.shard_outcome import ShardOutcome
from schemas.status import ShardState
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent, Trajectory
from schemas.verdict import AssertionVerdict, ShardGrade

HOSTILE = "</code><script>alert(1)</script>`| x |"
TRAJECTORY = Trajectory(
    skill="forecast",
    case_id=1,
    model="m",
    events=[
        ToolCallEvent(call_id="1", name="mcp__weather__get_forecast", arguments={"city": "Paris"}),
        ToolResultEvent(call_id="1", output="Paris: sunny", exit_code=0),
        ToolCallEvent(call_id="2", name="mcp__weather__get_forecast", arguments={"city": HOSTILE}),
        ToolResultEvent(call_id="2", output="error: unexpected input:\ncity is wrong", exit_code=1),
        ToolCallEvent(call_id="3", name="shell", arguments={"command": "curl x"}),
        ToolCallEvent(call_id="4", name="mcp__weather__get_alerts", arguments={}),
        AssistantEvent(text="done"),
    ],
    http_calls=[
        HttpCall(method="GET", url="https://api.example.com/v1/items", status=200, mocked=True),
        HttpCall(method="POST", url=f"https://evil.example/{HOSTILE}", status=403, mocked=False, note="no mock"),
    ],
)


def test_each_mock_call_and_http_request_is_one_line_with_its_status() -> None:
    assert mock_call_lines(TRAJECTORY) == [
        'mcp__weather__get_forecast {"city":"Paris"} -> ok',
        f'mcp__weather__get_forecast {{"city":"{HOSTILE}"}} -> error: unexpected input: city is wrong',
        "mcp__weather__get_alerts {} -> no result",
    ]
    lines = http_call_lines(TRAJECTORY)
    assert lines[0] == 'GET "https://api.example.com/v1/items" -> 200 mocked'
    assert lines[1].startswith('POST "https://evil.example/') and lines[1].endswith("-> 403 refused (no mock)")


def test_a_flood_of_calls_is_listed_up_to_the_cap_and_counted() -> None:
    calls = [HttpCall(method="GET", url=f"https://x.example/{i}", status=403, mocked=False) for i in range(80)]
    lines = http_call_lines(TRAJECTORY.model_copy(update={"http_calls": calls}))
    assert len(lines) == MAX_LINES + 1 and lines[-1] == f"... and {80 - MAX_LINES} more"


def test_markdown_and_html_reports_list_them_per_shard_as_inert_text() -> None:
    case = EvalCase(id=1, prompt="p", expected_output="-", files=(), assertions=("The agent answers",))
    bundle = SkillBundle(
        skill="forecast",
        bundle_key="forecast-0123456789ab",
        corpus_file="evals/forecast.evals.json",
        corpus=Corpus(skill_name="forecast", evals=(case, case.model_copy(update={"id": 2}))),
    )
    plan = plan_run("20260102-030405-0a1b2c3d", [bundle], ["exec"], judges=["judge-1"])
    shard = next(s for s in plan.shards if s.case_id == 1)
    verdicts = [AssertionVerdict(text="The agent answers", passed=True, evidence="[assistant] done")]
    outcome = ShardOutcome(
        shard,
        ShardState.GRADED,
        grade=ShardGrade(shard_id=shard.shard_id, state=ShardState.GRADED, verdicts=verdicts),
        mock_calls=tuple(mock_call_lines(TRAJECTORY)),
        http_calls=tuple(http_call_lines(TRAJECTORY)),
    )
    result = reduce_run(plan, {shard.shard_id: outcome})
    [run] = [r for r in result.skills[0].runs if r.case_id == 1]
    assert run.mock_calls[0] == 'mcp__weather__get_forecast {"city":"Paris"} -> ok'
    markdown = render_markdown(result, "forecast", {})
    assert '- mock call: `mcp__weather__get_forecast {"city":"Paris"} -> ok`' in markdown
    assert '- HTTP call: `GET "https://api.example.com/v1/items" -> 200 mocked`' in markdown
    # The input's backtick cannot close its code span: the span's fence is a longer run.
    hostile = [line for line in markdown.splitlines() if "evil.example" in line or "alert(1)" in line]
    assert len(hostile) == 2 and all(line.split(": ", 1)[1].startswith("``") for line in hostile), hostile
    page = render_html(result)
    assert "<p>Mock calls:</p>" in page and "<p>HTTP calls:</p>" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
