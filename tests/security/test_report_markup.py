"""Attack 11: the Markdown report carries raw HTML from evidence, assertion texts, fixture
paths and error details. Every untrusted string is rendered inert: no tag, no comment, no
link or image, no extra line, the same visible text (evidence inside a code span, the rest
entity- and backslash-escaped)."""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from engine.redis_server import RedisServer
from producer.plan.planning import plan_run
from reducer.html_parts import name
from reducer.render import md
from reducer.render_html import render_html
from reducer.stream import reduce_run
from testkit.offline_server import OfflineModelServer
from tests.security.harness import case, make_repo, run_pipeline, scripted_judge_answer, shell_agent

SKILL = "markup-safe"
ASSERTION = "runs git status <script>alert(1)</script> before [anything](javascript:alert(2))"
EVIDENCE = "<img src=x onerror=alert(3)> ![x](http://evil.invalid/t.png) <!-- hide --> `code` | cell"
FIXTURE = "README.md/<img src=x onerror=alert(4)>.txt"


@pytest.mark.slow
def test_untrusted_strings_reach_the_report_as_inert_text(
    tmp_path: Path, server: OfflineModelServer, redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        SKILL,
        [
            case(1, "CASE-ONE status", [ASSERTION]),
            case(2, "CASE-TWO fixture", [ASSERTION], fixtures=[{"path": FIXTURE, "content": "x\n"}]),
        ],
    )
    answer = json.dumps([{"text": ASSERTION, "passed": True, "evidence": EVIDENCE}])
    server.set_scenario({"rules": [scripted_judge_answer(answer), shell_agent("CASE-", ["git status"])]})
    run = run_pipeline(repo, SKILL, server=server, redis_url=redis_server.url, work=tmp_path / "w")
    report = run.report
    assert "BLOCKED_BAD_FIXTURE" in report and "&lt;img src=x onerror=alert(4)&gt;" in report
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in report
    # Evidence is quoted as code: its text verbatim inside one code span, which a parser shows as text.
    assert f"``{EVIDENCE}``" in report
    tokens = [
        t for block in MarkdownIt("commonmark").enable("table").parse(report) for t in [block, *(block.children or [])]
    ]
    kinds = {t.type for t in tokens}
    assert not kinds & {"html_inline", "html_block", "link_open", "image"}  # no tag, comment, link or image
    assert [t.content for t in tokens if t.type == "code_inline" and "onerror" in t.content] == [EVIDENCE]
    outside = report.replace(f"``{EVIDENCE}``", "")
    assert "<" not in outside  # every other untrusted string is entity-escaped
    assert "](" not in outside.replace("\\](", "")  # no link or image syntax survives unescaped


@given(st.text())
def test_md_output_is_one_inert_line(text: str) -> None:
    out = md(text)
    assert len(out.splitlines()) <= 1 and "<" not in out and ">" not in out
    for i, char in enumerate(out):
        if char in "`*[]|" or (char == "~" and out[i + 1 : i + 2] == "~"):
            assert out[i - 1] == "\\" and (len(out[:i]) - len(out[:i].rstrip("\\"))) % 2 == 1, out


@given(st.text(min_size=1, max_size=60))
def test_names_and_run_facts_reach_the_page_as_text(hostile: str) -> None:
    # A branch name, a repo path or a ref comes from the repo: on the page it is text, never markup.
    shown = name(hostile)
    assert "<" not in shown.replace("<wbr>", "") and ">" not in shown.replace("<wbr>", "")
    assert unescape(shown.replace("<wbr>", "")) == hostile


def test_a_hostile_branch_name_and_repo_path_stay_inert_on_the_page() -> None:
    plan = plan_run("20260101-000000-00000000", [], ["m"])
    facts = {"repo": '"><img src=x onerror=alert(5)>', "commit": "<script>alert(6)</script> @ abc1234"}
    page = render_html(reduce_run(plan, {}), {}, facts)
    assert "<img" not in page and "<script" not in page
    assert "&lt;script&gt;alert(6)&lt;/script&gt;" in page.replace("<wbr>", "")
