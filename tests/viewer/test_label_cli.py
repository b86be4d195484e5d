"""``skill-eval label`` for scripts, and ``skill-eval report`` showing the judge against the people."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from starlette.testclient import TestClient

from engine.store import open_store
from schemas.label import NOTE_CHARS
from tests.viewer.conftest import LOCAL, ViewedRun
from viewer.app import create_app


def test_labels_from_the_command_line_show_in_the_report(viewed_run: ViewedRun, tmp_path: Path) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    api = TestClient(create_app(open_store(str(store))), base_url=LOCAL)
    shard = api.get(f"/api/runs/{run}/shards", params={"q": "viewer-two", "model": "openai/exec-a"}).json()["items"][0]
    env = viewed_run.env
    first = env.cli("label", run, "--shard", shard["shard_id"], "--assertion", "1", "--agree", "--store", str(store))
    assert first.code == 0, first.stderr
    assert "kappa undefined" in first.stdout  # one label: both sides said pass
    env.cli(
        "label",
        run,
        "--shard",
        shard["shard_id"],
        "--assertion",
        "2",
        "--disagree",
        "--note",
        "quote is the call, not its output",
        "--store",
        str(store),
    )
    third = env.cli("label", run, "--shard", shard["shard_id"], "--assertion", "3", "--agree", "--store", str(store))
    assert "openai/judge [all]: agreement 66.7% (2 of 3 labelled verdicts agree), kappa 0.40" in third.stdout
    bad = env.cli("label", run, "--shard", shard["shard_id"], "--assertion", "7", "--agree", "--store", str(store))
    assert bad.code == 2 and "no assertion 7 (it has 3)" in bad.stderr + bad.stdout
    out = tmp_path / "reports"
    report = env.cli("report", run, "--store", str(store), "--out", str(out))
    assert report.code == 1  # the verdict's exit code is unchanged by labels
    line = "judge vs people: openai/judge [all]: agreement 66.7% (2 of 3 labelled verdicts agree), kappa 0.40"
    assert line in report.stdout
    md = (out / f"skill-eval-hostile-{run}.md").read_text()
    assert "## Judge vs people" in md and "kappa 0.40" in md
    doc = json.loads((out / f"skill-eval-hostile-{run}.json").read_text())
    overall = [a for a in doc["human_agreement"] if a["scope"] == "all"]
    assert [(a["judge"], a["n"], a["agreed"]) for a in overall] == [("openai/judge", 3, 2)]
    per_assertion = {a["scope"] for a in doc["human_agreement"]} - {"all"}
    assert "hostile case 2 #2: The agent runs echo viewer-two-b in the shell" in per_assertion


def test_a_long_note_or_a_hostile_run_id_is_a_named_one_line_error(viewed_run: ViewedRun, tmp_path: Path) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    api = TestClient(create_app(open_store(str(store))), base_url=LOCAL)
    shard = api.get(f"/api/runs/{run}/shards", params={"q": "viewer-two"}).json()["items"][0]["shard_id"]
    flags = ("--shard", shard, "--assertion", "1", "--agree", "--store", str(store))
    long = viewed_run.env.cli("label", run, *flags, "--note", "n" * (NOTE_CHARS + 1))
    assert long.code == 2 and long.stderr.startswith("CONFIG_ERROR: --note: ") and "Traceback" not in long.stderr
    hostile = "\x1b]0;pwned-title\x1b\\\x1b[41m\nCONFIG_ERROR: forged line"
    typed = viewed_run.env.cli("label", hostile, *flags)
    assert typed.code == 2 and "\x1b" not in typed.stdout + typed.stderr
    assert typed.stderr.count("\n") == 1 and "\\x1b]0;pwned-title" in typed.stderr
    assert not list((store / "runs" / run).glob("labels/**/*.json"))


def test_view_names_a_bad_store_or_a_busy_port_and_exits_2(viewed_run: ViewedRun) -> None:
    bad = viewed_run.env.cli("view", "--store", "ftp://nowhere/x")
    assert bad.code == 2 and "STORE_ERROR" in bad.stderr and "ftp://nowhere/x" in bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = viewed_run.env.cli("view", "--store", str(viewed_run.env.store), "--port", str(port))
        # A store folder that does not exist (a typo) is named, not served as an empty list.
        missing = viewed_run.env.cli("view", "--store", f"{viewed_run.env.store}-nonexistent", "--port", str(port))
    assert missing.code == 2 and "STORE_ERROR" in missing.stderr and "-nonexistent does not exist" in missing.stderr
    assert busy.code == 2 and f"--port {port}: cannot listen there" in busy.stderr
