"""The same run seen through an S3 store (moto's server over HTTP): listed, opened, labelled."""

from __future__ import annotations

import boto3
from starlette.testclient import TestClient

from engine.store import open_store
from tests.viewer.conftest import LOCAL, ViewedRun
from viewer.app import create_app


def test_a_run_in_s3_lists_opens_and_takes_labels(viewed_run: ViewedRun, aws_env: str) -> None:
    boto3.client("s3", endpoint_url=aws_env).create_bucket(Bucket="viewer-runs")
    s3 = open_store("s3://viewer-runs/team")
    local = viewed_run.env.store
    for path in (local / "runs").rglob("*"):
        if path.is_file():
            s3.put(path.relative_to(local).as_posix(), path.read_bytes())
    c = TestClient(create_app(s3, review=True), base_url=LOCAL)
    (run,) = c.get("/api/runs").json()["items"]
    assert run["run_id"] == viewed_run.run_id and run["verdict"] == "FAIL"
    rows = c.get(f"/api/runs/{viewed_run.run_id}/shards", params={"failing": "1", "q": "viewer-one"}).json()
    assert rows["total"] == 2
    shard = rows["items"][0]["shard_id"]
    doc = c.get(f"/api/runs/{viewed_run.run_id}/shards/{shard}").json()
    assert doc["trajectory"]["events"] and doc["assertions"][0]["verdict"]["passed"] is True
    body = {"shard_id": shard, "assertion": 1, "agree": True, "reviewer": "s3-reviewer"}
    labelled = c.post(f"/api/runs/{viewed_run.run_id}/labels", json=body).json()
    assert labelled["label"]["reviewer"] == "s3-reviewer" and labelled["agreement"]["labels"] == 1
    assert [k for k in s3.list(f"runs/{viewed_run.run_id}/labels/") if k.endswith(".json")]
