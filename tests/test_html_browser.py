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

from producer.planning import plan_run
from reducer.render_html import render_html
from reducer.scoring import ShardOutcome, reduce_run
from schemas.corpus import Corpus, EvalCase
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import RunResult
from schemas.shard import CURRENT, NO_SKILL, SkillBundle, baseline_variant
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
SECTIONS = ("headline", "models", "comparisons", "heatmap", "usage", "quality", "verdicts")
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


@pytest.mark.parametrize("layout", list(WIDTHS))
def test_the_report_reads_whole_at_desktop_and_phone_width(browser: Browser, tmp_path: Path, layout: str) -> None:
    result, transcripts = rich_result()
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(result, transcripts), encoding="utf-8")
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
    links = page.locator("a[href$='-transcript.txt']")
    assert links.count() == len(transcripts)
    context.close()
    assert (ARTIFACTS / "html" / f"report-{layout}.png").stat().st_size > 10_000
