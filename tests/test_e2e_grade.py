"""End to end: ``skill-eval grade`` grades recorded trajectories on the embedded cluster, no execution.

The recordings are the product's own trajectory JSON in the importer's layout; the judge is the
offline server's rule-based one. The command's preflight stores the manifest before the grade
messages go out, and the shards are graded from it.
"""

from __future__ import annotations

import json
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


def _stream_json(command: str) -> str:
    """A Claude Code stream-json log running ``command``, with a line that is not JSON in it."""
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s", "model": "m", "tools": ["Bash"]},
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": command}}],
            },
        },
        {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]},
        },
        {"type": "result", "subtype": "success", "num_turns": 1, "usage": {}},
    ]
    text = [json.dumps(line) for line in lines]
    return "\n".join([*text[:3], "Warning: not json", text[3]]) + "\n"


def test_only_the_recordings_that_exist_are_graded_whatever_their_epoch_numbers(tmp_path: Path) -> None:
    """Epochs numbered from 1, one more epoch in one skill only, .json beside .jsonl, a case with no
    recording: each recording is one shard under its own number; nothing absent counts as an
    executor failure; the unrecorded case, the junk line and the stray file are named."""
    judge = [
        ran("MARK-ONE"),
        ran("MARK-TWO"),
        {"assertion_contains": "MARK-LOG", "transcript_regex": r"Bash\(.*MARK-LOG"},
    ]
    with (
        OfflineModelServer(scenario([], judge)) as server,
        checked_env(tmp_path / "e2e", server.base_url) as env,
    ):
        repo = new_repo(tmp_path / "repo")
        write_skill(
            repo,
            SKILL,
            [
                case(1, "Run the first step.", ["runs the shell command echo MARK-ONE"]),
                case(2, "Run the second step.", ["runs the shell command echo MARK-TWO"]),
            ],
        )
        write_skill(
            repo,
            "mixed",
            [
                case(1, "Run the first step.", ["runs the shell command echo MARK-ONE"]),
                case(2, "Run the log step.", ["runs the shell command echo MARK-LOG"]),
                case(3, "Run the third step.", ["runs the shell command echo MARK-TWO"]),
            ],
        )
        git_init(repo)
        root = tmp_path / "recorded"
        (root / SKILL).mkdir(parents=True)
        for case_id, marker in ((1, "MARK-ONE"), (2, "MARK-TWO")):
            for epoch in (1, 2):
                (root / SKILL / f"case-{case_id}.epoch-{epoch}.json").write_text(_recording(case_id, f"echo {marker}"))
        (root / SKILL / "case-1.epoch-3.json").write_text(_recording(1, "echo MARK-ONE"))
        (root / "mixed").mkdir()
        (root / "mixed" / "case-1.json").write_text(
            _recording(1, "echo MARK-ONE").replace(f'"skill":"{SKILL}"', '"skill":"mixed"')
        )
        (root / "mixed" / "case-2.jsonl").write_text(_stream_json("echo MARK-LOG"))
        (root / "mixed" / "notes.txt").write_text("how these were recorded")

        result = env.cli(
            "grade",
            "--trajectories",
            str(root),
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

    out = result.stdout + result.stderr
    assert "executor-failed" not in out, out
    assert "not graded (infra): none" in result.stdout, out
    assert "warning: mixed/case-2.jsonl: line 4 not JSON, skipped" in result.stderr, out
    assert "warning: mixed/notes.txt: ignored, not a recording" in result.stderr, out
    assert "mixed case 3: no recording under" in result.stderr, out
    assert result.code == 3 and result.stdout.splitlines()[-1] == "verdict: WARN", out  # the unrecorded case warns
    # Each corpus's line says its real status: a case never graded keeps "mixed" from reading as a PASS.
    assert f"skill: {SKILL} [current]  cases: 2  result: 5/5 (100.0%)  PASS" in result.stdout, out
    assert "skill: mixed [current]  cases: 3  result: 2/2 (100.0%)  WARN (1 case of 3 not graded: no recording)" in (
        result.stdout
    ), out
    report = json.loads(next(env.out.glob(f"skill-eval-{SKILL}-*.json")).read_text())
    runs = report["variants"][0]["runs"]
    assert sorted((r["case_id"], r["model"], r["epoch"], r["state"]) for r in runs) == [
        (1, "recorded-exec", 1, "graded"),
        (1, "recorded-exec", 2, "graded"),
        (1, "recorded-exec", 3, "graded"),
        (2, "recorded-exec", 1, "graded"),
        (2, "recorded-exec", 2, "graded"),
    ]
    mixed = json.loads(next(env.out.glob("skill-eval-mixed-*.json")).read_text())["variants"][0]
    assert sorted((r["case_id"], r["model"], r["state"]) for r in mixed["runs"]) == [
        (1, "recorded-exec", "graded"),
        (2, "imported", "graded"),
    ]
    assert mixed["not_graded"] == 0 and mixed["shard_count"] == 2


def test_a_recording_nested_too_deep_or_printing_megabytes_is_graded_and_bounded(tmp_path: Path, env: Env) -> None:
    """A stream-json call whose input nests 300 levels (past what a trajectory can be stored at) and a
    5 MB tool result: the case is graded on what it did, not an INFRA_ERROR; the deep input is
    elided with a marker, the result cut to the executors' cap, and no file written grows with it."""
    repo = new_repo(tmp_path / "repo")
    write_skill(
        repo,
        SKILL,
        [
            case(1, "Run the first step.", ["runs the shell command echo MARK-TWO"]),
            case(2, "Run the second step.", ["runs the shell command echo MARK-TWO"]),
        ],
    )
    git_init(repo)
    recorded = tmp_path / "recorded" / SKILL
    recorded.mkdir(parents=True)
    deep: list[object] = []
    for _ in range(299):
        deep = [deep]
    log = _stream_json("echo MARK-ONE").replace('"input": {"command": "echo MARK-ONE"}', "%INPUT%")
    log = log.replace("%INPUT%", '"input": ' + json.dumps({"command": "echo MARK-ONE", "x": deep}))
    log = log.replace('"content": "done"', '"content": ' + json.dumps("HEAD-OF-RESULT " + "y" * 5_000_000 + " TAIL"))
    (recorded / "case-1.jsonl").write_text(log)
    (recorded / "case-2.json").write_text(_recording(2, "echo MARK-TWO"))

    result = env.cli(
        "grade", "--trajectories", str(tmp_path / "recorded"), "--repo", str(repo), "--judge", "openai/judge",
        "--api-base", env.api_base, *env.place_args(), "--workers", "2",
    )  # fmt: skip

    out = result.stdout + result.stderr
    assert "INFRA_ERROR" not in out and result.code == 1, out
    assert "not graded (infra): none" in result.stdout, out
    assert "FAIL replayed case 1 (imported e0)" in result.stdout, out
    written = [p for p in [*env.out.rglob("*"), *env.store.rglob("*")] if p.is_file()]
    assert written and max(p.stat().st_size for p in written) < 1_000_000, sorted(
        (p.stat().st_size, str(p)) for p in written
    )[-3:]
    transcript = next(env.out.glob("*-transcript.txt")).read_text()
    assert "[elided by skill-eval: nests deeper than 32 levels]" in transcript, transcript[:2000]
    assert "chars elided]" in transcript and "HEAD-OF-RESULT" in transcript
