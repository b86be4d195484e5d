"""``skill-eval view`` as a person uses it: the real command serving, real Chromium at desktop and phone width.

Chromium is Debian's package, driven by Playwright (never a downloaded browser). Screenshots
are kept under ``test-artifacts/viewer/`` (``SKILL_EVAL_TEST_ARTIFACTS`` moves them).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright

from engine.keys import limiter_keys
from engine.redis_server import RedisServer, free_port
from engine.state import RunState
from schemas.status import ShardState
from tests.test_harness_e2e import CODEX_MODEL
from tests.test_html_browser import ARTIFACTS, WIDTHS, chromium_path
from tests.viewer.conftest import HOSTILE_EXPECTED, HOSTILE_PROMPT, SCRIPT_MODEL, FeatureRuns, ViewedRun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
SHOTS = ARTIFACTS / "viewer"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path())
        yield b
        b.close()


@contextlib.contextmanager
def serving(run: ViewedRun, store: Path, *extra: str) -> Iterator[str]:
    """``skill-eval view`` on a free loopback port, until the block ends; its base URL."""
    port = free_port()
    proc = run.env.start("view", "--store", str(store), "--port", str(port), *extra)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/api/runs", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "skill-eval view did not answer within 60 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1


def shown_whole(page: Page, verdict: Locator, width: int) -> None:
    """A verdict (or a shard's state and assertions) is shown whole within the page's width, not in
    a table box scrolled sideways."""
    expect(verdict).to_be_visible()
    box = verdict.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
    inner = verdict.evaluate(
        "e => { const b = e.closest('.scroll'); return b ? b.scrollWidth <= b.clientWidth + 1 : true; }"
    )
    assert inner, "the verdict's table scrolls sideways inside its box"


def nothing_ran(page: Page) -> None:
    assert (
        page.evaluate("[window.pwnedResult, window.pwnedAssertion, window.pwnedModel, window.pwnedNote]") == [None] * 4
    )


@pytest.mark.parametrize("layout", sorted(WIDTHS))
def test_a_reviewer_finds_a_failure_sees_its_evidence_and_labels_three_verdicts(
    browser: Browser, viewed_run: ViewedRun, tmp_path: Path, layout: str
) -> None:
    width, height = WIDTHS[layout]
    store = viewed_run.store_copy(tmp_path / "store")
    page = browser.new_page(viewport={"width": width, "height": height})
    with serving(viewed_run, store, "--review") as url:
        page.goto(url + "/")
        expect(page.locator("tr.run")).to_have_count(1)
        page.screenshot(path=str(SHOTS / f"runs-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
        shown_whole(page, page.locator("tr.run .verdict").first, width)
        page.click(f"a[href='/runs/{viewed_run.run_id}']")
        expect(page.locator("#verdict-value")).to_have_text("FAIL")
        # Every rate's interval and its graded shards on screen, at phone width too (one card a row).
        for label in ("95% CI (by case)", "95% CI (Wilson)", "graded / shards"):
            for row in ("corpus", "model"):
                shown_whole(page, page.locator(f"table.rates tr.{row} td[data-label='{label}']").first, width)
        shown_whole(page, page.locator("tr.leader td[data-label='graded / shards']").last, width)
        expect(page.locator("#live .count.graded .n")).to_have_text("4")
        expect(page.locator("#live .count.blocked .n")).to_have_text("0")
        expect(page.locator("tr.shard")).to_have_count(4)
        page.select_option("select[name=model]", SCRIPT_MODEL)
        page.check("input[name=failing]")
        page.fill("input[name=q]", "viewer-two")
        page.click("#apply")
        expect(page.locator("tr.shard")).to_have_count(1)
        expect(page.locator("tr.shard.failing")).to_have_count(1)
        shown_whole(page, page.locator("tr.shard td[data-label='assertions']").first, width)
        page.screenshot(path=str(SHOTS / f"run-filtered-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
        page.click("tr.shard a")
        expect(page.locator("article.assertion")).to_have_count(3)
        page.locator("#a1 a.jump").click()
        focused = page.locator("mark.ev.focus")
        expect(focused).to_have_count(1)
        expect(focused).to_contain_text("echo viewer-two-a")
        expect(focused).to_be_in_viewport()
        for n, choice in ((1, "agree"), (2, "disagree"), (3, "agree")):
            page.locator(f"#a{n} button.label:text-is('{choice}')").click()
            expect(page.locator(f"#a{n} .label-state")).to_contain_text(f"saved: {choice}")
        # judge pass, pass, fail; people pass, fail, fail: agreement 2/3, kappa 0.40
        agreement = "agreement 66.7% (2 of 3 labelled verdicts agree), kappa 0.40"
        expect(page.locator("#agreement-live")).to_contain_text(agreement)
        page.screenshot(path=str(SHOTS / f"shard-labelled-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
        nothing_ran(page)
        page.goto(f"{url}/runs/{viewed_run.run_id}")
        expect(page.locator("#agreement td.kappa").first).to_have_text("0.40")
        nothing_ran(page)
    page.close()


def test_live_counts_follow_the_broker_without_a_reload(
    browser: Browser, viewed_run: ViewedRun, tmp_path: Path
) -> None:
    with RedisServer(workdir=tmp_path / "redis") as server:
        client = redis.Redis.from_url(server.url)
        state = RunState(client)
        run = viewed_run.run_id
        with httpx.Client() as http, serving(viewed_run, viewed_run.env.store, "--broker", server.url) as url:
            shards = [r["shard_id"] for r in http.get(f"{url}/api/runs/{run}/shards").json()["items"]]
            state.register(run, shards, f"runs/{run}/manifest.json", "2026-01-01T00:00:00Z")
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url}/runs/{run}")
            expect(page.locator("[data-live=source]")).to_have_text("live, from the run's broker")
            expect(page.locator("[data-group=queued]")).to_have_text("4")
            page.evaluate("window.notReloaded = true")
            state.transition(run, shards[0], ShardState.EXECUTING)
            state.transition(run, shards[1], ShardState.EXECUTING)
            changed = time.monotonic()
            expect(page.locator("[data-group=executing]")).to_have_text("2", timeout=15_000)
            lag = time.monotonic() - changed
            state.transition(run, shards[0], ShardState.GRADED)
            state.transition(run, shards[1], ShardState.EXECUTOR_FAILED)
            expect(page.locator("[data-group=failed]")).to_have_text("1", timeout=15_000)
            expect(page.locator("[data-group=graded]")).to_have_text("1")
            expect(page.locator("[data-group=executing]")).to_have_text("0", timeout=15_000)
            expect(page.locator("[data-group=queued]")).to_have_text("2")
            # Two calls of the executor model in flight and a 429 cool-down, as the fleet's limiter holds them.
            state_key, leases_key = limiter_keys("openai/exec-a")
            seconds, micros = client.time()
            now_ms = seconds * 1000 + micros // 1000
            client.zadd(leases_key, {"lease-1": now_ms + 120_000, "lease-2": now_ms + 120_000})
            client.hset(state_key, mapping={"cooldown_until": now_ms + 90_000, "factor": 0.5})
            row = page.locator("#limits tr", has_text="openai/exec-a")
            expect(row.locator("td").nth(1)).to_have_text("2", timeout=15_000)
            expect(row.locator("td").nth(4)).to_have_text("50%")
            cooldown = float(row.locator("td").nth(3).inner_text().removesuffix(" s"))
            assert 30 < cooldown <= 90
            assert page.evaluate("window.notReloaded") is True
            page.screenshot(path=str(SHOTS / "run-live.png"), full_page=True)
            page.close()
            print(f"live counts followed the broker after {lag:.2f} s")
            assert lag < 15
        client.close()


@pytest.mark.parametrize("layout", sorted(WIDTHS))
def test_a_trigger_runs_rows_and_an_adaptive_runs_look_read_at_any_width(
    browser: Browser, feature_runs: FeatureRuns, layout: str
) -> None:
    width, height = WIDTHS[layout]
    page = browser.new_page(viewport={"width": width, "height": height})
    with serving(feature_runs.viewed(), feature_runs.env.store) as url:
        page.goto(f"{url}/runs/{feature_runs.trigger_run}")
        rows = page.locator("#triggers article.trigger-row")
        expect(rows).to_have_count(2)
        first = rows.first
        expect(first.locator("tr.recall td").nth(1)).to_have_text("1 of 2 positive runs")
        expect(first.locator("tr.precision td").nth(1)).to_have_text("1 of 2 activations")
        # The gate's verdict closes the row's figures and is on screen whole, at phone width too.
        verdict = first.locator("p.gate .verdict")
        verdict.scroll_into_view_if_needed()
        expect(verdict).to_have_text("FAIL")
        expect(verdict).to_be_in_viewport(ratio=1)
        box = verdict.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
        expect(rows.nth(1).locator("p.gate .verdict")).to_have_text("PASS")
        hostile = first.locator("tr.query td.query-text").nth(1)
        expect(hostile).to_contain_text("<script>window.pwnedQuery=1</script>")
        expect(hostile).to_contain_text("verdict: PASS")
        expect(page.locator("#verdict-value")).to_have_text("FAIL")
        page.screenshot(path=str(SHOTS / f"run-triggers-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
        assert page.evaluate("window.pwnedQuery") is None
        page.goto(f"{url}/runs/{feature_runs.adaptive_run}")
        look = page.locator("#adaptive article.look")
        expect(look).to_have_count(1)
        decision = look.locator("td.decision")
        expect(decision).to_have_text(
            "undecided (0.75 inside its interval), so the look stopped no case; the verdict does not read it"
        )
        expect(look.locator("td.stops")).to_have_text("2 stable, 2 max-epochs")
        decision.scroll_into_view_if_needed()
        expect(decision).to_be_in_viewport(ratio=1)
        page.locator("#adaptive details.cases summary").click()
        expect(page.locator("#adaptive tr.case")).to_have_count(4)
        page.screenshot(path=str(SHOTS / f"run-adaptive-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
        # A sweep over Codex and the agent: each harness × model row with its own figures and verdict.
        page.goto(f"{url}/runs/{feature_runs.sweep_trigger_run}")
        names = page.locator("#triggers article.trigger-row .row-name")
        expect(names).to_have_text([f"codex × {CODEX_MODEL}", f"agent × {CODEX_MODEL}"])
        codex = page.locator("#triggers article.trigger-row").first.locator("p.gate .verdict")
        codex.scroll_into_view_if_needed()
        expect(codex).to_have_text("FAIL")
        expect(codex).to_be_in_viewport(ratio=1)
        page.screenshot(path=str(SHOTS / f"run-sweep-triggers-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
        page.goto(f"{url}/runs/{feature_runs.sweep_adaptive_run}")
        expect(page.locator("#adaptive article.look .row-name")).to_have_text(
            [f"codex × {CODEX_MODEL}", f"agent × {CODEX_MODEL}"]
        )
        page.screenshot(path=str(SHOTS / f"run-sweep-adaptive-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
    page.close()


@pytest.mark.parametrize("layout", sorted(WIDTHS))
def test_a_reviewer_reads_the_cases_prompt_and_expected_output_above_the_trajectory(
    browser: Browser, viewed_run: ViewedRun, layout: str
) -> None:
    width, height = WIDTHS[layout]
    page = browser.new_page(viewport={"width": width, "height": height})
    run = viewed_run.run_id
    with httpx.Client() as http, serving(viewed_run, viewed_run.env.store, "--review") as url:
        shards = http.get(f"{url}/api/runs/{run}/shards", params={"model": "openai/exec-a"}).json()["items"]
        one, two = sorted(shards, key=lambda r: r["case_id"])
        page.goto(f"{url}/runs/{run}/shards/{one['shard_id']}")
        prompt = page.locator("#task details.prompt pre.task")
        expect(prompt).to_have_text(HOSTILE_PROMPT)
        expect(page.locator("#task details.expected pre.task")).to_have_text(HOSTILE_EXPECTED)
        shown_whole(page, prompt, width)
        task_box, trajectory = page.locator("#task").bounding_box(), page.locator("#trajectory").bounding_box()
        assert task_box is not None and trajectory is not None and task_box["y"] < trajectory["y"]
        page.screenshot(path=str(SHOTS / f"shard-task-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
        assert page.evaluate("[window.pwnedPrompt, window.pwnedExpected]") == [None, None]
        assert page.locator("#task img").count() == 0
        # A long expected output is folded to its first line; opened, it wraps within the page.
        page.goto(f"{url}/runs/{run}/shards/{two['shard_id']}")
        expected = page.locator("#task details.expected")
        expect(expected.locator("summary")).to_contain_text("Line 0 of what a good run prints.")
        expect(expected.locator("pre.task")).to_be_hidden()
        expected.locator("summary").click()
        expect(expected.locator("pre.task")).to_be_visible()
        shown_whole(page, expected.locator("pre.task"), width)
        page.screenshot(path=str(SHOTS / f"shard-task-long-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
    page.close()


@pytest.mark.parametrize("layout", sorted(WIDTHS))
def test_a_trigger_shard_reads_its_query_and_what_fired_at_any_width(
    browser: Browser, feature_runs: FeatureRuns, layout: str
) -> None:
    width, height = WIDTHS[layout]
    page = browser.new_page(viewport={"width": width, "height": height})
    run = feature_runs.trigger_run
    with httpx.Client() as http, serving(feature_runs.viewed(), feature_runs.env.store, "--review") as url:
        rows = http.get(f"{url}/api/runs/{run}/shards", params={"failing": "1", "model": "openai/exec-a"}).json()
        missed = next(r for r in rows["items"] if r["case_id"] == 2)
        page.goto(f"{url}/runs/{run}/shards/{missed['shard_id']}")
        expect(page.locator("#trigger pre.task")).to_contain_text("<script>window.pwnedQuery=1</script>")
        expect(page.locator("#trigger .should")).to_have_text("yes")
        expect(page.locator("#trigger .fired")).to_have_text("nothing")
        shown_whole(page, page.locator("#trigger-outcome"), width)
        expect(page.locator("#assertions")).to_have_count(0)
        expect(page.locator("button.label")).to_have_count(0)
        page.screenshot(path=str(SHOTS / f"shard-trigger-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
        assert page.evaluate("window.pwnedQuery") is None
    page.close()


@pytest.mark.parametrize("layout", sorted(WIDTHS))
def test_a_plugin_suites_run_page_shows_the_scores_that_decided_it_at_any_width(
    browser: Browser, plugin_run: ViewedRun, layout: str
) -> None:
    width, height = WIDTHS[layout]
    page = browser.new_page(viewport={"width": width, "height": height})
    with serving(plugin_run, plugin_run.env.store) as url:
        # The runs list and the run's headline say what decided the suite beside its assertions' rate.
        decided = (
            "forecast [current]: 18/22 (81.8%) — FAIL: a plugin eval case below --threshold 0.5; "
            "lowest: case 1 (oslo-rain)"
        )
        page.goto(url + "/")
        expect(page.locator("tr.run td[data-label='result']")).to_contain_text(decided)
        no_sideways_scroll(page)
        page.goto(f"{url}/runs/{plugin_run.run_id}")
        expect(page.locator("#verdict-value")).to_have_text("FAIL")
        expect(page.locator("#verdict")).to_contain_text(decided)
        section = page.locator("#plugin-eval")
        expect(section.locator("p.rule")).to_contain_text(
            "A plugin eval suite passes when every case's score, per executor model, reaches --threshold 0.5"
        )
        # The suite's gate, decided by its case scores (18/22 of its assertions passed: not the point).
        gate = section.locator("article.plugin-suite").first.locator("p.gate")
        expect(gate.locator(".verdict")).to_have_text("FAIL")
        expect(gate.locator(".basis")).to_contain_text(
            "a plugin eval case below --threshold 0.5; lowest: case 1 (oslo-rain), 0.333"
        )
        shown_whole(page, gate.locator(".verdict"), width)
        expect(section.locator("tr.suite-score")).to_have_count(2)
        expect(section.locator("tr.case-score")).to_have_count(4)
        below = section.locator("tr.case-score.below")
        expect(below).to_have_count(2)  # oslo-rain, for each model
        expect(below.first.locator("td[data-label='score']")).to_have_text("0.333")
        expect(below.first.locator("td[data-label='scored']")).to_have_text("case 1 (oslo-rain)")  # its folder
        shown_whole(page, below.first.locator("td[data-label='vs threshold']"), width)
        model_cells = section.locator("tr.suite-score td[data-label='model']")
        expect(model_cells).to_have_text(sorted(["openai/exec-a", SCRIPT_MODEL]))  # the markup is text
        cases = page.locator("tr.shard td[data-label='case']").all_inner_texts()
        assert sorted(set(cases)) == ["1 (oslo-rain)", "2 (sunny-day)"], cases  # each case's folder
        page.screenshot(path=str(SHOTS / f"run-plugin-{layout}.png"), full_page=True)
        no_sideways_scroll(page)
        nothing_ran(page)
    page.close()


LINES = """(el) => {
  const lines = []; let top = null;
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.data.length; i++) {
      const range = document.createRange(); range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getBoundingClientRect();
      const unseen = !rect.width && !rect.height;  // a space or comma at a line's end
      if (unseen && lines.length) { lines[lines.length - 1] += node.data[i]; continue; }
      if (top === null || rect.top > top + 2) { lines.push(""); top = rect.top; }
      lines[lines.length - 1] += node.data[i];
    }
  }
  return lines;
}"""
"""The lines a browser laid an element's text out in."""

NARROWEST = """(el) => {
  const probe = document.createElement("div");
  probe.className = el.className; probe.innerHTML = el.innerHTML;
  probe.style.cssText = "position:absolute; left:0; top:0; width:min-content";
  document.body.appendChild(probe); return probe;
}"""
"""A copy of a name's element laid out as narrow as its breaks let it be: every break is taken."""


def breaks_only_at_separators(lines: list[str]) -> None:
    """Each line but the last ends after a separator, or between two names of a list."""
    assert all(line.rstrip()[-1] in "/-_.," for line in lines[:-1]), lines


@pytest.mark.parametrize("layout", sorted(WIDTHS))
def test_model_names_wrap_only_at_separators_and_the_filters_fit_the_card(
    browser: Browser, viewed_run: ViewedRun, layout: str
) -> None:
    width, height = WIDTHS[layout]
    page = browser.new_page(viewport={"width": width, "height": height})
    with serving(viewed_run, viewed_run.env.store) as url:
        page.goto(url + "/")
        cell = page.locator("tr.run td[data-label='models']")
        breaks_only_at_separators(cell.evaluate(LINES))
        narrowest = page.evaluate_handle(NARROWEST, cell.element_handle())
        lines = narrowest.evaluate(LINES)
        assert len(lines) > 3 and "".join(lines) == "".join(cell.inner_text().split("\n")), lines
        breaks_only_at_separators(lines)
        page.goto(f"{url}/runs/{viewed_run.run_id}")
        expect(page.locator("#counts-source")).to_have_text("counts from the run's result")
        names = page.locator("td.name")
        assert names.count() >= 8
        for i in range(names.count()):
            breaks_only_at_separators(names.nth(i).evaluate(LINES))
        tokens = page.locator("section.card:has(h2:text-is('Tokens and cost')) td.name").first
        lines = page.evaluate_handle(NARROWEST, tokens.element_handle()).evaluate(LINES)
        assert lines[0] == "openai/" and "".join(lines) == "openai/exec-a", lines
        breaks_only_at_separators(lines)
        # The assertion filter stays inside its card and the page, with an assertion as long as the
        # filter shows one (its first 90 characters) among its options.
        page.locator("select.assertion-filter").evaluate(
            "(s) => { const o = document.createElement('option'); o.textContent = 'W'.repeat(90); s.appendChild(o); }"
        )
        inside = page.locator("select.assertion-filter").evaluate(
            """(s) => {
              const card = s.closest("section.card"), style = getComputedStyle(card);
              const box = card.getBoundingClientRect(), own = s.getBoundingClientRect();
              const left = box.left + parseFloat(style.paddingLeft), right = box.right - parseFloat(style.paddingRight);
              return [own.left >= left - 0.5 && own.right <= right + 0.5, own.left, own.right, left, right];
            }"""
        )
        assert inside[0], inside  # within the card's padding, not over it
        no_sideways_scroll(page)
        page.screenshot(path=str(SHOTS / f"run-names-{layout}.png"), full_page=True)
    page.close()


@pytest.mark.parametrize("layout", sorted(WIDTHS))
def test_shard_ids_never_wrap_and_repo_paths_wrap_only_at_separators(
    browser: Browser, viewed_run: ViewedRun, layout: str
) -> None:
    width, height = WIDTHS[layout]
    page = browser.new_page(viewport={"width": width, "height": height})
    with serving(viewed_run, viewed_run.env.store) as url:
        page.goto(url + "/")
        cell = page.locator("tr.run td[data-label='repo @ commit']").first
        for lines in (cell.evaluate(LINES), page.evaluate_handle(NARROWEST, cell.element_handle()).evaluate(LINES)):
            # A break after a separator, or at a space ("… @ master"): never inside a folder's name.
            assert all(line[-1] in "/-_., " for line in lines[:-1]), lines
        narrowest = page.evaluate_handle(NARROWEST, cell.element_handle()).evaluate(LINES)
        assert len(narrowest) > 3 and narrowest[0].endswith("/"), narrowest  # the path did break at its "/"s
        no_sideways_scroll(page)
        page.goto(f"{url}/runs/{viewed_run.run_id}")
        ids = page.locator("td[data-label='shard']")
        assert ids.count() >= 4
        for i in range(ids.count()):
            assert len(ids.nth(i).evaluate(LINES)) == 1
            # However the table squeezes the column (a long model name beside it), the id stays whole.
            squeezed = page.evaluate_handle(NARROWEST, ids.nth(i).element_handle()).evaluate(LINES)
            assert len(squeezed) == 1, squeezed
        table = page.locator("td[data-label='shard']").first.evaluate(
            "e => { const b = e.closest('.scroll'); return b ? b.scrollWidth <= b.clientWidth + 1 : true; }"
        )
        assert table, "the shards table scrolls sideways inside its box"
        no_sideways_scroll(page)
        page.screenshot(path=str(SHOTS / f"run-ids-{layout}.png"), full_page=True)
    page.close()
