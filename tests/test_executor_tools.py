"""The executor's six tools, run for real inside a bubblewrap sandbox on a workspace."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.executor_support import open_test_sandbox
from worker.executor.final_files import collect_final_files, repo_relative
from worker.executor.tools import TOOL_SPECS, execute_tool
from worker.sandbox import Sandbox, SandboxLimits


@pytest.fixture
def sandbox(example_repo: Path) -> Sandbox:
    return open_test_sandbox(example_repo, SandboxLimits(timeout_s=10))


def test_the_model_is_offered_exactly_the_six_tools_with_their_argument_keys() -> None:
    offered = {spec["function"]["name"]: sorted(spec["function"]["parameters"]["properties"]) for spec in TOOL_SPECS}

    assert offered == {
        "shell": ["command"],
        "read_file": ["path"],
        "write_file": ["content", "path"],
        "edit_file": ["new", "old", "path"],
        "glob": ["pattern"],
        "grep": ["path", "pattern"],
    }


def test_read_file_returns_the_file_text(sandbox: Sandbox, example_repo: Path) -> None:
    outcome = execute_tool(sandbox, "read_file", {"path": "CHANGELOG.md"})

    assert outcome.exit_code == 0
    assert outcome.output == (example_repo / "CHANGELOG.md").read_text()


def test_read_file_of_a_missing_file_fails_with_its_exit_code(sandbox: Sandbox) -> None:
    outcome = execute_tool(sandbox, "read_file", {"path": "no/such.txt"})

    assert outcome.exit_code not in (0, None)
    assert "No such file" in outcome.output


def test_write_file_creates_folders_and_writes_the_exact_content(sandbox: Sandbox, example_repo: Path) -> None:
    content = "line {one} $HOME `x` 'q' \"dq\"\nünï\n\tno newline at end"

    outcome = execute_tool(sandbox, "write_file", {"path": "docs/new/notes.md", "content": content})

    assert outcome.exit_code == 0 and outcome.wrote == "docs/new/notes.md"
    assert (example_repo / "docs/new/notes.md").read_text(encoding="utf-8") == content


def test_a_write_aimed_outside_the_workspace_never_reaches_the_host(
    sandbox: Sandbox, example_repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "escape.txt"

    execute_tool(sandbox, "write_file", {"path": str(outside), "content": "pwned"})
    execute_tool(sandbox, "write_file", {"path": "../escape.txt", "content": "pwned"})
    execute_tool(sandbox, "shell", {"command": f"echo pwned > {outside}"})

    assert not outside.exists()


def test_a_read_aimed_outside_the_workspace_does_not_see_host_files(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")

    outcome = execute_tool(sandbox, "read_file", {"path": str(secret)})

    assert "TOP-SECRET-VALUE" not in outcome.output
    assert outcome.exit_code != 0


def test_edit_file_replaces_one_exact_unique_match(sandbox: Sandbox, example_repo: Path) -> None:
    before = (example_repo / "CHANGELOG.md").read_text()
    assert before.count("## Unreleased") == 1

    outcome = execute_tool(
        sandbox, "edit_file", {"path": "CHANGELOG.md", "old": "## Unreleased", "new": "## Unreleased\n\n### Fixed"}
    )

    assert outcome.exit_code == 0 and outcome.wrote == "CHANGELOG.md"
    assert (example_repo / "CHANGELOG.md").read_text() == before.replace(
        "## Unreleased", "## Unreleased\n\n### Fixed", 1
    )


@pytest.mark.parametrize(("old", "why"), [("NOT-IN-THE-FILE", "not found"), ("#", "times")])
def test_edit_file_refuses_a_missing_or_ambiguous_match_and_leaves_the_file(
    sandbox: Sandbox, example_repo: Path, old: str, why: str
) -> None:
    before = (example_repo / "CHANGELOG.md").read_text()

    outcome = execute_tool(sandbox, "edit_file", {"path": "CHANGELOG.md", "old": old, "new": "X"})

    assert outcome.exit_code == 1 and outcome.wrote is None
    assert why in outcome.output
    assert (example_repo / "CHANGELOG.md").read_text() == before


def test_glob_lists_matching_paths_at_any_depth(sandbox: Sandbox) -> None:
    outcome = execute_tool(sandbox, "glob", {"pattern": "skills/**/*.md"})

    assert outcome.exit_code == 0
    listed = outcome.output.splitlines()
    assert "skills/changelog-entry/SKILL.md" in listed
    assert "skills/changelog-entry/agents/reviewer.md" in listed
    assert execute_tool(sandbox, "glob", {"pattern": "*.nothing"}).output.strip() == "(no matches)"


def test_grep_prints_file_and_line_and_says_when_nothing_matched(sandbox: Sandbox) -> None:
    hit = execute_tool(sandbox, "grep", {"pattern": "Unrel(eased)?", "path": "CHANGELOG.md"})
    everywhere = execute_tool(sandbox, "grep", {"pattern": "def greet"})
    miss = execute_tool(sandbox, "grep", {"pattern": "zzz-no-such-text"})

    assert hit.exit_code == 0 and "## Unreleased" in hit.output and hit.output.split(":")[0].isdigit()
    assert everywhere.output.startswith("./src/greeting.py:")
    assert (miss.exit_code, miss.output) == (1, "(no matches)")


def test_shell_reports_exit_code_and_a_hit_timeout(sandbox: Sandbox) -> None:
    failed = execute_tool(sandbox, "shell", {"command": "echo out; echo err >&2; exit 3"})
    slow = execute_tool(sandbox, "shell", {"command": "sleep 30"}, timeout_s=1)

    assert failed.exit_code == 3 and "out" in failed.output and "err" in failed.output
    assert slow.limit == "timeout" and slow.exit_code is None


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("rm_rf", {"path": "."}, "unknown tool"),
        ("read_file", {}, "needs a string argument 'path'"),
        ("write_file", {"path": "a.txt", "content": 42}, "'content'"),
        ("shell", {"_raw": "{not json"}, "not valid JSON"),
    ],
)
def test_a_bad_call_returns_an_error_to_the_model_and_runs_nothing(
    sandbox: Sandbox, example_repo: Path, name: str, arguments: dict[str, object], problem: str
) -> None:
    outcome = execute_tool(sandbox, name, arguments)

    assert outcome.output.startswith("error: ") and problem in outcome.output
    assert outcome.exit_code is None
    assert not (example_repo / "a.txt").exists()


def test_final_files_hold_written_and_shell_changed_files_but_not_untouched_ones(
    sandbox: Sandbox, example_repo: Path
) -> None:
    since = time.time()
    time.sleep(0.02)  # mtimes are coarse; keep the baseline strictly before the changes
    execute_tool(sandbox, "write_file", {"path": "notes.txt", "content": "hello"})
    execute_tool(sandbox, "shell", {"command": "echo '- Fixed a crash.' >> CHANGELOG.md"})
    execute_tool(sandbox, "shell", {"command": "head -c 100000 /dev/zero | tr '\\0' y > big.txt"})
    execute_tool(sandbox, "shell", {"command": "printf '\\0\\1\\2' > blob.bin"})

    files = collect_final_files(sandbox, since_epoch=since, wrote=["notes.txt", "/etc/passwd", "../x"])

    assert files["notes.txt"] == "hello"
    assert files["CHANGELOG.md"] == (example_repo / "CHANGELOG.md").read_text()
    assert files["big.txt"].endswith("[... truncated by skill-eval ...]") and len(files["big.txt"]) < 21_000
    assert set(files) == {"notes.txt", "CHANGELOG.md", "big.txt"}  # no binary, nothing outside, nothing untouched


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("a/b.txt", "a/b.txt"),
        ("./a/../b.txt", "b.txt"),
        ("/workspace/src/x.py", "src/x.py"),
        ("/etc/passwd", None),
        ("../outside", None),
        (".", None),
    ],
)
def test_paths_the_agent_names_map_to_repo_relative_ones_or_none(path: str, expected: str | None) -> None:
    assert repo_relative(path, "/workspace") == expected


@given(st.text(alphabet="ab./\\", max_size=24))
def test_a_mapped_path_never_leaves_the_repo(path: str) -> None:
    relative = repo_relative(path, "/workspace")

    if relative is not None:
        assert not relative.startswith("/") and ".." not in relative.split("/")
