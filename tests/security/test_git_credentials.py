"""Attack 4: credentials in the repo's git config (a CI checkout's ``http.<url>.extraheader``,
a credential helper, an include, a remote URL with a token, ``FETCH_HEAD``) must reach
neither the agent nor the judge: the workspace's ``.git`` is written by the product."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer
from testkit.offline_server import OfflineModelServer
from tests.security.harness import case, make_repo, run_pipeline, shell_agent

pytestmark = pytest.mark.slow
SKILL = "safe-push"
TOKEN = "ghs_CANARYTOKEN0123456789"


def plant_credentials(repo: Path, outside: Path) -> None:
    outside.mkdir()
    (outside / "inc.cfg").write_text(f"[user]\n\tsigningkey = {TOKEN}\n")
    with open(repo / ".git" / "config", "a") as f:
        f.write(
            f'[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic {TOKEN}\n'
            f'[remote "origin"]\n\turl = https://x-access-token:{TOKEN}@github.com/o/r.git\n'
            "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
            f"[credential]\n\thelper = store --file {outside}/creds\n"
            f"[include]\n\tpath = {outside}/inc.cfg\n"
        )
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    (repo / ".git" / "FETCH_HEAD").write_text(f"{head}\t\tbranch 'main' of https://{TOKEN}@github.com/o/r\n")


def test_no_credential_of_the_repo_reaches_the_agent_or_the_judge(
    tmp_path: Path, server: OfflineModelServer, redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        SKILL,
        [
            case(1, "CASE-ONE look at the config", ["runs git config to read the settings"]),
            case(2, "CASE-TWO look for tokens", ["runs grep to look for tokens"]),
        ],
    )
    plant_credentials(repo, tmp_path / "outside")
    snoop = ["cat .git/config", "git config --list --show-origin", "cat .git/FETCH_HEAD", "git remote -v"]
    server.set_scenario(
        {
            "rules": [
                shell_agent("CASE-ONE", snoop),
                shell_agent("CASE-TWO", ["grep -ra ghs_ .git || echo none", "git log --all --format=%H%n%B"]),
            ],
            "judge": [
                {"assertion_contains": "git config", "transcript_regex": r"\[tool_call\] shell\(.*git config"},
                {"assertion_contains": "grep", "transcript_regex": r"\[tool_call\] shell\(.*grep"},
            ],
        }
    )
    run = run_pipeline(repo, SKILL, server=server, redis_url=redis_server.url, work=tmp_path / "work")

    assert {o["state"] for o in run.outcomes.values()} == {"graded"}, run.outcomes
    seen = "\n".join(t.model_dump_json() for t in run.trajectories.values())
    assert "cat .git/config" in seen  # the agent did look
    everything = seen + run.report + "\n".join(str(r) for r in run.requests)
    assert TOKEN not in everything
    assert "github.com" not in everything  # no remote, no extra header, no FETCH_HEAD
