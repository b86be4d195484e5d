"""``run --calibrate-with``: a judge is checked against people's labels of an earlier run before it grades."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.viewer.conftest import LOCAL, ViewedRun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def run_args(viewed: ViewedRun, store: Path, *extra: str) -> tuple[str, ...]:
    args = list(viewed.env.run_args(viewed.repo, "hostile", *extra))
    args[args.index("--store") + 1] = str(store)
    return tuple(args)


def label(viewed: ViewedRun, store: Path, shard: str, n: int, choice: str) -> None:
    res = viewed.env.cli("label", viewed.run_id, "--shard", shard, "--assertion", str(n), choice, "--store", str(store))
    assert res.code == 0, res.stderr


def case_two_shard(store: Path, run_id: str) -> str:
    from starlette.testclient import TestClient

    from engine.store import open_store
    from viewer.app import create_app

    api = TestClient(create_app(open_store(str(store))), base_url=LOCAL)
    rows = api.get(f"/api/runs/{run_id}/shards", params={"q": "viewer-two", "model": "openai/exec-a"}).json()
    return str(rows["items"][0]["shard_id"])


def test_a_judge_that_agrees_with_the_people_calibrates_and_one_that_does_not_fails(
    viewed_run: ViewedRun, tmp_path: Path
) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    shard = case_two_shard(store, viewed_run.run_id)
    label(viewed_run, store, shard, 1, "--agree")  # the judge's pass of viewer-two-a is right
    label(viewed_run, store, shard, 3, "--agree")  # and so is its fail of viewer-two-c
    agreeing = viewed_run.env.cli(
        *run_args(viewed_run, store, "--calibrate-with", viewed_run.run_id, "--fail-under", "0.5")
    )
    assert agreeing.code == 0, agreeing.stdout + agreeing.stderr
    assert "verdict: PASS" in agreeing.stdout

    label(viewed_run, store, shard, 2, "--disagree")  # the people hold viewer-two-b was not shown
    disagreeing = viewed_run.env.cli(
        *run_args(viewed_run, store, "--calibrate-with", viewed_run.run_id, "--fail-under", "0.5")
    )
    assert disagreeing.code == 3, disagreeing.stdout + disagreeing.stderr  # calibration failed: at most WARN
    assert "verdict: WARN" in disagreeing.stdout
    assert f"labelled {viewed_run.run_id}/{shard}" in disagreeing.stdout + _reports(viewed_run)
    assert "viewer-two-b" in disagreeing.stdout + _reports(viewed_run)


def _reports(viewed: ViewedRun) -> str:
    return "".join(p.read_text() for p in viewed.env.out.glob("*.md"))


def test_calibrating_with_a_run_nobody_labelled_is_refused_before_anything_runs(
    viewed_run: ViewedRun, tmp_path: Path
) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    res = viewed_run.env.cli(*run_args(viewed_run, store, "--calibrate-with", viewed_run.run_id, "--fail-under", "0.5"))
    assert res.code == 2
    assert f"CONFIG_ERROR: --calibrate-with {viewed_run.run_id}: no labelled verdict" in res.stderr + res.stdout
