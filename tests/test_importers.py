"""Grade-only runs: recorded trajectories are found by layout, decoded by format, refused by name."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import boto3
import pytest

from engine.importers import load_trajectories, parse_key
from schemas.errors import ConfigError
from schemas.event_bounds import ELISION_MARKER, TOOL_RESULT_CAP_CHARS
from schemas.trajectory import ToolCallEvent, Trajectory
from tests.grading_support import good_trajectory

STREAM = [
    json.dumps({"type": "system", "subtype": "init", "session_id": "s", "model": "m", "tools": ["Bash"]}),
    json.dumps(
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "git diff"}}],
            },
        }
    ),
    json.dumps(
        {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "+x"}]},
        }
    ),
    json.dumps({"type": "result", "subtype": "success", "num_turns": 1, "usage": {}}),
]


def product_json(skill: str = "commit-message", case_id: int = 1) -> str:
    return good_trajectory().model_copy(update={"skill": skill, "case_id": case_id}).model_dump_json()


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    root = tmp_path / "recorded"
    (root / "commit-message").mkdir(parents=True)
    (root / "changelog-entry").mkdir()
    (root / "commit-message" / "case-1.json").write_text(product_json())
    (root / "commit-message" / "case-2.epoch-1.jsonl").write_text("\n".join(STREAM) + "\n")
    (root / "commit-message" / "case-2.epoch-0.jsonl").write_text("\n".join(STREAM) + "\nnot json\n")
    (root / "changelog-entry" / "case-3.json").write_text(product_json("changelog-entry", 3))
    (root / "commit-message" / "NOTES.md").write_text("ignored")
    return root


def test_both_formats_load_with_skill_case_and_epoch_from_the_path(recorded: Path) -> None:
    loaded = load_trajectories(recorded)
    assert [(s, c, e) for s, c, e, _t in loaded] == [
        ("changelog-entry", 3, 0),
        ("commit-message", 1, 0),
        ("commit-message", 2, 0),
        ("commit-message", 2, 1),
    ]
    stream = loaded[2][3]
    assert stream.skill == "commit-message" and stream.case_id == 2
    assert isinstance(stream.events[0], ToolCallEvent) and stream.events[0].arguments == {"command": "git diff"}
    assert isinstance(loaded[1][3], Trajectory)
    assert loaded[1][3].render() == good_trajectory().render()


def test_a_single_file_loads_by_its_folder_name(recorded: Path) -> None:
    ((skill, case_id, epoch, _t),) = load_trajectories(recorded / "commit-message" / "case-1.json")
    assert (skill, case_id, epoch) == ("commit-message", 1, 0)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("s/case-7.json", ("s", 7, 0, "json")),
        ("s/case-7.epoch-3.jsonl", ("s", 7, 3, "jsonl")),
        ("s/readme.md", None),
    ],
)
def test_keys_follow_the_layout(key: str, expected: object) -> None:
    assert parse_key(key) == expected


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("commit-message/case-one.json", "{}", "must be <skill>/case-<id>"),
        ("commit-message/deep/case-1.json", "{}", "must be <skill>/case-<id>"),
        ("Commit_Message/case-1.json", "{}", "not a kebab-case skill name"),
        ("commit-message/case-5.json", '{"skill": 1}', "not a trajectory"),
        ("commit-message/case-5.json", product_json("commit-message", 9), "its path says"),
        ("commit-message/case-5.jsonl", "garbage\n", "no stream-json event"),
        ("commit-message/case-1.epoch-0.json", product_json(), "a second recording"),
        ("commit-message/Case-4.JSON", product_json("commit-message", 4), "(file names are lower-case)"),
    ],
)
def test_a_bad_recording_is_a_named_error(recorded: Path, name: str, content: str, needle: str) -> None:
    target = recorded / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_trajectories(recorded)
    assert needle in str(info.value)
    assert name.split("/")[-1] in str(info.value)


def test_an_empty_or_missing_root_is_a_named_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no recorded trajectories"):
        load_trajectories(tmp_path)
    with pytest.raises(ConfigError, match="no such trajectory directory"):
        load_trajectories(tmp_path / "missing")


def test_recordings_load_from_s3_over_http(aws_env: str, recorded: Path) -> None:
    s3_endpoint = aws_env
    bucket = f"rec-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket=bucket)
    for path in recorded.rglob("*"):
        if path.is_file():
            s3.put_object(Bucket=bucket, Key=f"runs/r1/{path.relative_to(recorded).as_posix()}", Body=path.read_bytes())
    loaded = load_trajectories(f"s3://{bucket}/runs/r1")
    assert [(s, c, e) for s, c, e, _t in loaded] == [(s, c, e) for s, c, e, _t in load_trajectories(recorded)]


@pytest.mark.parametrize(
    "line",
    ['{"type": "system", "n": 1' + "0" * 4999 + "}", "[" * 100_000 + "]" * 100_000],
    ids=["5000-digit-integer", "deep-nesting"],
)
def test_a_stream_json_line_past_the_parsers_limits_is_a_config_error_naming_the_file(
    tmp_path: Path, line: str
) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "case-1.jsonl").write_text(line + "\n")
    with pytest.raises(ConfigError, match=r"demo/case-1\.jsonl: cannot be read"):
        load_trajectories(tmp_path)


def test_a_recording_read_through_a_link_is_refused_and_never_parsed(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "case-1.json").write_text('{"secret": "HOST-SECRET-3b7e"}')
    root = tmp_path / "recorded"
    root.mkdir()
    (root / "demo").symlink_to(host)  # a skill folder that is a link: named, never entered
    (root / "other").mkdir()
    (root / "other" / "case-1.json").symlink_to(host / "case-1.json")
    with pytest.raises(ConfigError, match=r"demo: is a link; recorded trajectories are read only in real folders"):
        load_trajectories(root)
    (root / "demo").unlink()
    with pytest.raises(ConfigError, match=r"other/case-1\.json: is read through a link") as caught:
        load_trajectories(root)
    assert "HOST-SECRET" not in str(caught.value)


def test_ignored_files_and_skipped_stream_lines_are_named(recorded: Path) -> None:
    notes: list[str] = []
    load_trajectories(recorded, notes)
    assert notes == [
        "commit-message/NOTES.md: ignored, not a recording (<skill>/case-<id>[.epoch-<n>].json|.jsonl)",
        "commit-message/case-2.epoch-0.jsonl: line 5 not JSON, skipped (the rest of the recording is graded)",
    ]


def _nested(levels: int) -> object:
    value: object = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_imported_tool_results_are_cut_to_the_executors_cap_saying_how_much(tmp_path: Path) -> None:
    big = "HEAD " + "y" * 5_000_000 + " TAIL"
    (tmp_path / "demo").mkdir()
    stream = [*STREAM]
    stream[2] = stream[2].replace('"content": "+x"', '"content": ' + json.dumps(big))
    (tmp_path / "demo" / "case-1.jsonl").write_text("\n".join(stream) + "\n")
    trajectory = good_trajectory().model_copy(update={"skill": "demo", "case_id": 2})
    events = [e.model_copy(update={"output": big}) if e.kind == "tool_result" else e for e in trajectory.events]
    (tmp_path / "demo" / "case-2.json").write_text(trajectory.model_copy(update={"events": events}).model_dump_json())
    for _skill, _case, _epoch, loaded in load_trajectories(tmp_path):
        results = [e for e in loaded.events if e.kind == "tool_result"]
        assert results and all(e.truncated for e in results)
        for event in results:
            kept = len(event.output) - len(ELISION_MARKER.format(n=len(big) - TOOL_RESULT_CAP_CHARS))
            assert kept == TOOL_RESULT_CAP_CHARS, len(event.output)
            assert event.output.startswith("HEAD ") and event.output.endswith(" TAIL")
            assert f"[{len(big) - TOOL_RESULT_CAP_CHARS} chars elided]" in event.output


def test_an_imported_call_nested_300_deep_keeps_its_command_and_elides_the_rest(tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    stream = [*STREAM]
    deep = json.dumps({"command": "git diff", "x": _nested(300)})
    stream[1] = stream[1].replace('"input": {"command": "git diff"}', '"input": ' + deep)
    (tmp_path / "demo" / "case-1.jsonl").write_text("\n".join(stream) + "\n")
    [(_s, _c, _e, loaded)] = load_trajectories(tmp_path)
    [call] = [e for e in loaded.events if isinstance(e, ToolCallEvent)]
    assert call.arguments == {"command": "git diff", "x": "[elided by skill-eval: nests deeper than 32 levels]"}
    assert Trajectory.model_validate_json(loaded.model_dump_json()) == loaded  # it can be stored and read back
