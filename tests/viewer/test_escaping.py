"""Attack tests: markup from the agent, the corpus, a model name or a reviewer's note is text on every page."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from engine.records import put_run_end
from engine.store import open_store
from schemas.run_end import RunEnd
from tests.viewer.conftest import LOCAL, SCRIPT_ASSERTION, SCRIPT_MODEL, SCRIPT_RESULT, ViewedRun
from viewer.app import create_app

NOTE = "<script>window.pwnedNote=1</script><img src=x onerror=alert(1)>"


def escaped(raw: str) -> str:
    return raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def text_of(html: str) -> str:
    """The page without the break points a model name is given (``<wbr>``: the viewer's own markup)."""
    return html.replace("<wbr>", "")


def assert_inert(html: str) -> None:
    assert "<script>window.pwned" not in html
    assert "<img src=x" not in html
    assert html.count("<script") == 1  # the viewer's own script, loaded from /static


def test_every_page_shows_hostile_strings_as_text(viewed_run: ViewedRun, tmp_path: Path) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    c = TestClient(create_app(open_store(str(store)), review=True), base_url=LOCAL)
    run = viewed_run.run_id
    runs_page = c.get("/").text
    assert_inert(runs_page)
    assert escaped(SCRIPT_MODEL) in text_of(runs_page)
    run_page = c.get(f"/runs/{run}").text
    assert_inert(run_page)
    assert escaped(SCRIPT_MODEL) in text_of(run_page)
    rows = c.get(f"/api/runs/{run}/shards", params={"q": "viewer-one", "model": SCRIPT_MODEL}).json()["items"]
    (row,) = rows
    label = {"shard_id": row["shard_id"], "assertion": 2, "agree": False, "note": NOTE}
    assert c.post(f"/api/runs/{run}/labels", json=label).status_code == 200
    page = c.get(f"/runs/{run}/shards/{row['shard_id']}")
    assert page.headers["content-security-policy"].startswith("default-src 'self'; script-src 'self'")
    html = page.text
    assert_inert(html)
    for raw in (SCRIPT_RESULT, SCRIPT_ASSERTION, SCRIPT_MODEL, NOTE):
        assert escaped(raw) in text_of(html), raw
    filtered = c.get(f"/runs/{run}", params={"q": SCRIPT_ASSERTION}).text  # the search box echoes the query
    assert_inert(filtered)
    assert escaped(SCRIPT_ASSERTION) in filtered


def test_a_request_for_another_host_name_is_refused(viewed_run: ViewedRun) -> None:
    """A page on another site that rebinds its name to 127.0.0.1 reaches the viewer with its own Host."""
    c = TestClient(create_app(open_store(str(viewed_run.env.store))), base_url="http://evil.example")
    assert c.get("/api/runs").status_code == 400


def test_ids_that_are_not_ids_name_no_key_and_answer_404(viewed_run: ViewedRun) -> None:
    c = TestClient(create_app(open_store(str(viewed_run.env.store))), base_url=LOCAL)
    for path in (
        "/api/runs/%2E%2E",
        "/api/runs/.hidden",
        "/runs/.hidden",
        f"/api/runs/{viewed_run.run_id}/shards/..%5C..",
    ):
        response = c.get(path)
        assert response.status_code == 404, (path, response.status_code)


def test_a_refused_runs_reason_is_text_on_the_runs_list_and_its_page(viewed_run: ViewedRun, tmp_path: Path) -> None:
    """A refusal's reason can quote a model name or a repo path: it stays text wherever the viewer shows it."""
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    (store / "runs" / run / "result.json").unlink()
    reason = f"BLOCKED_MODEL_UNAVAILABLE: {NOTE}: no key"
    put_run_end(open_store(str(store)), RunEnd(run_id=run, how="blocked", reason=reason))
    c = TestClient(create_app(open_store(str(store))), base_url=LOCAL)
    for html in (c.get("/").text, c.get(f"/runs/{run}").text):
        assert_inert(html)
        assert escaped(NOTE) in html
