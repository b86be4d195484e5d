"""End to end: ``skill-eval grade`` grades recorded trajectories on the embedded cluster, no execution.

The recordings are the product's own trajectory JSON in the importer's layout; the judge is the
offline server's rule-based one. The command's preflight stores the manifest before the grade
messages go out, and the shards are graded from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent, Trajectory
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, checked_env, git_init, new_repo, ran, scenario, write_skill

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SKILL = "replayed"


def _recording(case_id: int, command: str) -> str:
    events: list[Event] = [
        ToolCallEvent(call_id="c1", name="shell", arguments={"command": command}),
        ToolResultEvent(call_id="c1", output="done\n", exit_code=0),
        AssistantEvent(text="Finished."),
    ]
    return Trajectory(skill=SKILL, case_id=case_id, model="recorded-exec", events=events).model_dump_json()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with (
        OfflineModelServer(scenario([], [ran("MARK-ONE"), ran("MARK-TWO")])) as server,
        checked_env(tmp_path / "e2e", server.base_url) as e,
    ):
        yield e


def test_recorded_trajectories_are_graded_against_the_corpus_and_reported(tmp_path: Path, env: Env) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(
        repo,
        SKILL,
        [
            case(1, "Run the first step.", ["runs the shell command echo MARK-ONE"]),
            case(2, "Run the second step.", ["runs the shell command echo MARK-TWO"]),
        ],
    )
    git_init(repo)
    recorded = tmp_path / "recorded" / SKILL
    recorded.mkdir(parents=True)
    (recorded / "case-1.json").write_text(_recording(1, "echo MARK-ONE"))
    (recorded / "case-2.json").write_text(_recording(2, "echo something else"))

    result = env.cli(
        "grade",
        "--trajectories",
        str(tmp_path / "recorded"),
        "--repo",
        str(repo),
        "--judge",
        "openai/judge",
        "--api-base",
        env.api_base,
        *env.place_args(),
        "--workers",
        "2",
    )

    # A verdict, not an error: one of two assertions failed, below the default threshold 1.0: FAIL, exit 1.
    assert result.code == 1, result.stdout + result.stderr
    assert "cases: 2  result: 1/2 (50.0%)  FAIL (below threshold 1.0)" in result.stdout, result.stdout
    assert "not graded (infra): none" in result.stdout
    fails = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("FAIL replayed")]
    assert len(fails) == 1 and fails[0].startswith("FAIL replayed case 2 (recorded-exec e0)"), fails
    assert any(p.name.endswith(f"{result.run_id}.json") for p in env.out.iterdir())
