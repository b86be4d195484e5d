"""The HTML report as a person sees it: rendered by a real headless Chromium at a desktop and a phone width.

Chromium is Debian's package (``make setup`` installs it); Playwright drives that binary and
never downloads a browser of its own. Screenshots are kept under ``test-artifacts/html/``
(``SKILL_EVAL_TEST_ARTIFACTS`` moves them).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from producer.plan.planning import plan_run
from reducer.render_html import render_html
from reducer.stream import reduce_run
from schemas.corpus import Corpus, EvalCase
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import RunResult
from schemas.shard import CURRENT, NO_SKILL, SkillBundle, baseline_variant
from schemas.shard_outcome import ShardOutcome
from schemas.status import ShardState
from schemas.trajectory import Usage
from schemas.verdict import AssertionVerdict, JudgeAnswer, ShardGrade

ARTIFACTS = Path(os.environ.get("SKILL_EVAL_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts"))
LONG_MODEL = "openrouter/anthropic/claude-sonnet-4-5-20250929-with-a-very-long-deployment-name"
LONG_ASSERTION = (
    "The agent runs `git diff --staged` before writing the message and quotes the changed path "
    "src/very/deeply/nested/module/with_a_really_long_file_name_that_never_breaks_naturally.py"
)
UNBROKEN = "x" * 180  # one token with no break opportunity, as a minified transcript line would be
SECTIONS = ("headline", "corpora", "models", "comparisons", "heatmap", "usage", "quality", "verdicts")
FACTS = {"repo": "/home/me/src/skills", "commit": "main @ 0a1b2c3", "models": "openai/gpt-4.1", "date": "2026-01-02"}
WIDTHS = {"desktop": (1280, 900), "narrow": (375, 740)}


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is not installed: run `make setup` (it installs Debian's chromium package)"
    return found


def rich_result() -> tuple[RunResult, dict[str, str]]:
    """Two models, three arms (current, an old ref, no skill), an ensemble, infra failures, usage and cost."""
    cases = tuple(
        EvalCase(
            id=i,
            prompt=f"case {i}",
            expected_output="-",
            files=(),
            assertions=(LONG_ASSERTION if i == 1 else f"The agent runs step {i} in the shell", f"assertion {i}.b"),
        )
        for i in range(1, 7)
    )
    bundle = SkillBundle(
        skill="commit-message",
        bundle_key="commit-message-0123456789ab",
        corpus_file="evals/commit-message.evals.json",
        corpus=Corpus(skill_name="commit-message", evals=cases),
    )
    variants = (CURRENT, baseline_variant("v1.2.0"), NO_SKILL)
    plan = plan_run(
        "20260102-030405-0a1b2c3d",
        [bundle],
        [LONG_MODEL, "openai/gpt-4.1"],
        judges=["j1", "j2"],
        epochs=2,
        variants=variants,
    )
    outcomes = {}
    transcripts = {}
    for n, sh in enumerate(plan.shards):
        if sh.case_id == 6 and sh.epoch == 1 and sh.variant == CURRENT:
            outcomes[sh.shard_id] = ShardOutcome(
                sh, ShardState.EXECUTOR_FAILED, detail="executor-failed: 503 " + UNBROKEN
            )
            transcripts[sh.shard_id] = f"skill-eval-commit-message-case6-{n}-transcript.txt"
            continue
        base = {CURRENT: 0.85, NO_SKILL: 0.2}.get(sh.variant, 0.6)
        passes = [((sh.case_id * 7 + sh.epoch * 3 + k + n % 3) % 10) / 10 < base for k in range(2)]
        verdicts = [
            AssertionVerdict(
                text=a, passed=p, evidence=("[tool_call] shell(git diff) " + UNBROKEN) if p else "absent: " + UNBROKEN
            )
            for a, p in zip(cases[sh.case_id - 1].assertions, passes, strict=True)
        ]
        judges = [
            JudgeAnswer(
                judge="j1", state=ShardState.GRADED, verdicts=verdicts, usage=Usage(prompt_tokens=900, calls=1)
            ),
            JudgeAnswer(
                judge="j2",
                state=ShardState.GRADED,
                verdicts=[v.model_copy(update={"passed": not v.passed}) if n % 5 == 0 else v for v in verdicts],
            ),
        ]
        grade = ShardGrade(shard_id=sh.shard_id, state=ShardState.GRADED, verdicts=verdicts, judges=judges)
        usage = Usage(prompt_tokens=12_000 + n, completion_tokens=800, calls=4, cost_usd=0.0123)
        outcomes[sh.shard_id] = ShardOutcome(sh, ShardState.GRADED, grade=grade, usage=usage)
        if not all(passes):
            transcripts[sh.shard_id] = f"skill-eval-commit-message-case{sh.case_id}-{n}-transcript.txt"
    result = reduce_run(
        plan,
        outcomes,
        regression_alpha=0.05,
        require_uplift=0.0,
        calibration={
            "j1": CalibrationRecord(judge="j1", status=CalibrationStatus.OK),
            "j2": CalibrationRecord(
                judge="j2", status=CalibrationStatus.FAILED, details=["passed the tempting bad run"]
            ),
        },
    )
    return result, transcripts


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path())
        yield b
        b.close()


# Every visible element must lie inside the viewport, and no element may clip its own text.
LAYOUT_CHECK = """
() => {
  const width = document.documentElement.clientWidth;
  const problems = [];
  if (document.documentElement.scrollWidth > width + 1) {
    problems.push(`page scrolls sideways: ${document.documentElement.scrollWidth} > ${width}`);
  }
  for (const el of document.body.querySelectorAll('*')) {
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden') continue;
    const rects = el.getClientRects();
    if (!rects.length) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    const what = `${el.tagName.toLowerCase()}.${el.className} "${(el.textContent || '').slice(0, 40)}"`;
    if (r.right > width + 1 || r.left < -1) problems.push(`outside the viewport: ${what} ${r.left}-${r.right}`);
    const clips = ['hidden', 'clip', 'scroll', 'auto'].includes(style.overflowX) || style.textOverflow === 'ellipsis';
    if (clips && el.scrollWidth > el.clientWidth + 1) problems.push(`clips its text: ${what}`);
  }
  return problems;
}
"""


# No header, name, label or figure breaks inside a word: every run of letters and digits lies on one
# line, and no such element is wider than its box. Free text (an assertion, evidence, an error
# detail) is left out: a minified line or a long path in it may break anywhere.
WORDS_WHOLE = """
() => {
  const problems = [];
  const names = 'th, td:not(.text), .bar-row .label, h1, h2, h3, summary, dl.meta dt, .verdict';
  for (const el of document.querySelectorAll(names)) {
    if (!el.getClientRects().length) continue;
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).display !== 'inline') {
      problems.push(`wider than its box: ${el.tagName} "${el.textContent.slice(0, 40)}"`);
    }
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest('td.text, .ev, .detail')) continue;
      const words = /[A-Za-z0-9]{2,}/g;
      let m;
      while ((m = words.exec(node.data))) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (tops.size > 1) problems.push(`word split: "${m[0]}" in ${el.tagName} "${el.textContent.slice(0, 40)}"`);
      }
    }
  }
  return problems;
}
"""

ONE_LINE = """
(selector) => [...document.querySelectorAll(selector)].filter((el) => {
  if (!el.getClientRects().length) return false;
  const range = document.createRange();
  range.selectNodeContents(el);
  const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
  return lines > 1 || range.getBoundingClientRect().right > el.getBoundingClientRect().right + 1;
}).map((el) => el.textContent)
"""


def sweep_result() -> RunResult:
    """26 corpora of 4 cases run by two models (one with a long name); model B fails one assertion of every case."""
    bundles = [
        SkillBundle(
            skill=f"architecture-review-{i:02d}",
            bundle_key=f"a{i:02d}-0123456789ab",
            corpus_file=f"evals/a{i:02d}.evals.json",
            corpus=Corpus(
                skill_name=f"architecture-review-{i:02d}",
                evals=tuple(
                    EvalCase(id=c, prompt="p", expected_output="-", files=(), assertions=(LONG_ASSERTION, "a2 holds"))
                    for c in range(1, 5)
                ),
            ),
        )
        for i in range(26)
    ]
    plan = plan_run("20260102-030405-0a1b2c3d", bundles, ["openai/gpt-4.1", LONG_MODEL], judges=["j1"])
    outcomes = {}
    for sh in plan.shards:
        passes = [sh.model == "openai/gpt-4.1", True]
        verdicts = [
            AssertionVerdict(text=t, passed=p, evidence="[tool_call] shell(make && make test) " + UNBROKEN)
            for t, p in zip((LONG_ASSERTION, "a2 holds"), passes, strict=True)
        ]
        grade = ShardGrade(shard_id=sh.shard_id, state=ShardState.GRADED, verdicts=verdicts)
        outcomes[sh.shard_id] = ShardOutcome(sh, ShardState.GRADED, grade=grade)
    return reduce_run(plan, outcomes)


@pytest.mark.parametrize("layout", list(WIDTHS))
def test_a_sweep_opens_on_its_overview_with_every_shard_collapsed(
    browser: Browser, tmp_path: Path, layout: str
) -> None:
    page_file = tmp_path / "sweep.html"
    page_file.write_text(render_html(sweep_result(), {}, FACTS), encoding="utf-8")
    width, height = WIDTHS[layout]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(page_file.as_uri())
    ARTIFACTS.joinpath("html").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "html" / f"sweep-{layout}.png"), full_page=True)
    # The overview (corpus by model, then the leaderboard) comes right after the verdict.
    order = page.evaluate("() => [...document.querySelectorAll('section')].map((s) => s.id)")
    assert order[:3] == ["headline", "overview", "corpora"], order
    overview = page.locator("section#overview")
    assert overview.locator("table").first.locator("tr").count() == 27  # a header and 26 corpora
    assert "Leaderboard" in overview.inner_text()
    top = overview.bounding_box()
    assert top is not None and top["y"] < 2 * height, top  # within the first two screens
    # Every corpus is below the threshold 1.0: no PASS anywhere for a corpus.
    assert page.locator(".verdict.PASS").count() == 0 and page.locator(".verdict.FAIL").count() == 1 + 2 * 26
    # 208 shards, every one collapsed: the page is a few screens, not a scroll through every evidence.
    assert page.locator("section#verdicts details.shard").count() == 26 * 4 * 2
    assert page.locator("section#verdicts details[open]").count() == 0  # corpora and their shards alike
    # (Before, the same sweep was about 16,000 px tall at 1280 px: every failing shard open.)
    assert page.evaluate("() => document.documentElement.scrollHeight") < {"desktop": 8, "narrow": 16}[layout] * height
    assert page.evaluate(LAYOUT_CHECK) == []
    if layout == "desktop":
        assert page.evaluate(WORDS_WHOLE) == []
    context.close()


TICKS_APART = """() => {
  const overlapping = [];
  for (const axis of document.querySelectorAll('.axis .ticks')) {
    const shown = [...axis.querySelectorAll('.tick')].map(t => t.getBoundingClientRect()).filter(r => r.width > 0);
    for (let i = 1; i < shown.length; i++)
      if (shown[i].left < shown[i - 1].right) overlapping.push(axis.textContent);
  }
  return overlapping;
}"""


@pytest.mark.parametrize("layout", list(WIDTHS))
def test_the_report_reads_whole_at_desktop_and_phone_width(browser: Browser, tmp_path: Path, layout: str) -> None:
    result, transcripts = rich_result()
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(result, transcripts, FACTS), encoding="utf-8")
    width, height = WIDTHS[layout]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors: list[str] = []
    external: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: external.append(r.url) if r.url != page_file.as_uri() else None)
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")

    ARTIFACTS.joinpath("html").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "html" / f"report-{layout}.png"), full_page=True)

    assert errors == [] and external == []  # no console errors; self-contained: nothing fetched
    for section in SECTIONS:
        box = page.locator(f"section#{section}").bounding_box()
        assert box is not None and box.get("height", 0) > 0, f"section {section} is not shown"
    assert page.evaluate(LAYOUT_CHECK) == []
    text = page.inner_text("body")
    assert LONG_MODEL in text and LONG_ASSERTION in text  # labels are whole, never shortened
    assert "With vs without the skill" in text and "Old vs new: baseline@v1.2.0" in text
    assert "McNemar" in text or "sign-flip" in text
    assert "Tokens and cost per model" in text and "$" in text
    assert "executor-failed" in text
    for fact in FACTS.values():
        assert fact in text  # repo, commit, models and date under the verdict
    if layout == "desktop":
        assert page.evaluate(WORDS_WHOLE) == []
    assert page.evaluate(ONE_LINE, ".bar-row .num") == []  # a rate and its interval stay on one line
    assert page.evaluate(TICKS_APART) == []  # an axis's labels never run into each other
    ticks = page.locator("section#comparisons .axis .tick").all_inner_texts()
    assert ticks[0] == "−100 pts" and "0" in ticks and ticks[-1] == "+100 pts"  # the paired strip has an axis
    heads = page.locator("section#corpora th").all_text_contents()  # a card shows them as its labels on a phone
    assert "assertions passed / graded" in heads and "shards not graded / run" in heads
    # Every shard is collapsed; opening one shows its evidence and the transcript link.
    assert page.locator("section#verdicts details[open]").count() == 0
    failing = page.locator("section#verdicts details.shard", has=page.locator("summary .fail"))
    assert failing.count() > 0
    failing.first.locator("summary").click()
    assert failing.first.locator(".ev").first.is_visible()
    links = page.locator("a[href$='-transcript.txt']")
    assert links.count() == len(transcripts)
    context.close()
    assert (ARTIFACTS / "html" / f"report-{layout}.png").stat().st_size > 10_000
