"""A command a user waits on says what is wrong with an S3 store, and soon: a missing bucket is named
as the bucket (not as a missing run), and a dead endpoint fails in seconds, naming the endpoint."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.redis_server import free_port
from engine.store import open_store
from producer.commands.cli import app
from schemas.errors import StoreError

runner = CliRunner()
RUN = "20260101-000000-00000000"


@pytest.mark.parametrize("command", ["status", "report", "export"])
def test_a_missing_bucket_is_named_not_the_run(command: str, aws_env: str, tmp_path: Path) -> None:
    args = [command, RUN, "--store", "s3://nosuchbucket/se"]
    if command != "status":
        args += ["--out", str(tmp_path / "out")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("STORE_ERROR: no bucket 'nosuchbucket'"), result.output
    assert aws_env in result.output


def test_a_missing_run_in_an_existing_bucket_still_names_the_run(aws_env: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=aws_env).create_bucket(Bucket="havebucket")
    result = runner.invoke(app, ["status", RUN, "--store", "s3://havebucket/se"])
    assert result.exit_code == 2, result.output
    assert f"STORE_ERROR: run {RUN}: no manifest" in result.output


def test_a_dead_endpoint_fails_a_waited_on_read_in_seconds_naming_it(
    aws_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("SKILL_EVAL_S3_ENDPOINT", dead)
    started = time.monotonic()
    result = runner.invoke(app, ["status", RUN, "--store", "s3://b/se"])
    assert time.monotonic() - started < 15
    assert result.exit_code == 2, result.output
    assert result.output.startswith("STORE_ERROR: ") and dead in result.output, result.output


def test_a_workers_store_keeps_its_patient_retries(aws_env: str) -> None:
    patient, quick = open_store("s3://b/se"), open_store("s3://b/se", waited_on=True)
    config, quick_config = patient._client.meta.config, quick._client.meta.config  # type: ignore[attr-defined]
    assert (config.retries["total_max_attempts"], config.connect_timeout) == (11, 60)
    assert (quick_config.retries["total_max_attempts"], quick_config.connect_timeout) == (3, 3)
    with pytest.raises(StoreError, match="no bucket 'b'"):
        quick.exists("runs/x/manifest.json")
