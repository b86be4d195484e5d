"""A tool call's arguments as a trajectory keeps them: too deep or too large, elided with a marker."""

from __future__ import annotations

import json

import pytest

from schemas.event_bounds import ELIDED_KEY, MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, bound_arguments, capped_text
from schemas.trajectory import ToolCallEvent, Trajectory


def nested(levels: int) -> object:
    value: object = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


def test_ordinary_arguments_are_kept_as_they_are() -> None:
    arguments = {"command": "git status", "deep": nested(MAX_ARGUMENT_DEPTH - 1), "body": "x" * 500_000}
    assert bound_arguments(arguments) == (arguments, None)


@pytest.mark.parametrize("levels", [MAX_ARGUMENT_DEPTH, 300, 5_000])
def test_a_value_nested_too_deep_is_elided_and_the_command_kept(levels: int) -> None:
    kept, why = bound_arguments({"command": "echo hi", "x": nested(levels)})
    assert kept == {"command": "echo hi", "x": f"[elided by skill-eval: nests deeper than {MAX_ARGUMENT_DEPTH} levels]"}
    assert why == f"its arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels (elided in the record)"


def test_arguments_past_the_size_bound_are_cut_saying_how_much_and_stay_bounded() -> None:
    huge = {"command": "c" * (3 * MAX_ARGUMENT_CHARS), "list": ["z" * 1000] * 2000, "long" * 500: 1}
    huge.update({f"k{i}": "v" for i in range(10)})
    kept, why = bound_arguments(huge)
    assert why == f"its arguments are over {MAX_ARGUMENT_CHARS} characters (elided in the record)"
    assert len(json.dumps(kept)) <= MAX_ARGUMENT_CHARS
    assert kept["command"].startswith("ccc") and "chars elided]" in kept["command"]
    assert kept["list"].startswith("[elided by skill-eval: about ")
    assert kept[ELIDED_KEY].startswith("11 more arguments left out")
    assert bound_arguments(kept) == (kept, None)  # bounding twice changes nothing


def test_every_call_entering_a_trajectory_is_bounded_and_can_be_stored() -> None:
    event = ToolCallEvent(call_id="c1", name="mcp__db__query", arguments={"filter": nested(300)})
    assert event.arguments == {"filter": f"[elided by skill-eval: nests deeper than {MAX_ARGUMENT_DEPTH} levels]"}
    trajectory = Trajectory(skill="s", case_id=1, model="m", events=[event])
    assert Trajectory.model_validate_json(trajectory.model_dump_json()) == trajectory


def test_a_result_is_cut_to_head_and_tail_saying_how_much() -> None:
    assert capped_text("short", 10) == ("short", False)
    assert capped_text("a" * 5 + "b" * 10 + "c" * 5, 10) == ("aaaaa\n... [10 chars elided] ...\nccccc", True)
