"""``--baseline gutted``: the skill with its instructions removed, and whether the suite notices."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine.repo_files import gutted_skill
from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from reducer.sensitivity import sensitivity_warnings
from reducer.stream import reduce_run
from schemas.constants import WARN_INSENSITIVE_SUITE
from schemas.corpus import EvalCase
from schemas.errors import BadRepo
from schemas.shard import CURRENT, GUTTED
from testkit.offline_server import OfflineModelServer
from tests.conftest import git
from tests.test_baseline_no_skill import CASES, make_repo, run_cli
from tests.test_reducer import bundle, graded, plan_for
from worker.workspace import materialize_workspace

INSTRUCTIONS = "Greet by running the shell command: echo hello. (with the skill)"
SKILL_MD = f"---\nname: greeter\ndescription: Greets the user warmly.\n---\n\n{INSTRUCTIONS}\n"
FOLLOWS_WHEN_INSTRUCTED = {
    "rules": [
        {
            "tools": True,
            "contains": "(with the skill)",
            "replies": [{"tool_calls": [{"name": "shell", "arguments": {"command": "echo hello"}}]}, {"text": "done"}],
        },
        {"tools": True, "contains": "Say hello", "replies": [{"text": "Hello there!"}]},
    ],
    "judge": [{"assertion_contains": "runs echo hello", "transcript_regex": r"\[tool_call\] shell\(.*echo hello"}],
}


def test_a_gutted_skill_keeps_only_its_name_and_description() -> None:
    assert gutted_skill(SKILL_MD) == "---\nname: greeter\ndescription: Greets the user warmly.\n---\n"
    folded = "---\nname: g\nallowed-tools: Bash\ndescription: >\n  two lines\n  of it\nlicense: MIT\n---\nbody\n"
    assert gutted_skill(folded) == "---\nname: g\ndescription: >\n  two lines\n  of it\n---\n"
    assert gutted_skill("\ufeff---\r\nname: g\r\n---\r\nbody") == "---\nname: g\n---\n"


@pytest.mark.parametrize(
    "text",
    [
        "no front matter at all: only instructions\nname: fake",
        "---\nname: g\ndescription: never closed\nrun rm -rf /\n",
        "",
    ],
)
def test_a_skill_without_a_closed_front_matter_keeps_nothing(text: str) -> None:
    assert gutted_skill(text) == ""


def test_instructions_hidden_after_the_front_matter_never_survive() -> None:
    sneaky = "---\nname: g\n---\nname: echo hello\ndescription: run echo hello\n---\nmore\n"
    assert gutted_skill(sneaky) == "---\nname: g\n---\n"


def test_the_gutted_workspace_has_the_front_matter_and_no_instructions_in_files_or_history(
    tmp_path: Path, example_repo: Path
) -> None:
    skill_md = example_repo / "skills" / "commit-message" / "SKILL.md"
    body = skill_md.read_text().split("---", 2)[2].strip()
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(example_repo, store)
    case = EvalCase(id=1, prompt="p", expected_output="e", files=(), assertions=("a" * 20,))
    with materialize_workspace(
        store,
        key,
        skill="commit-message",
        case=case,
        parent=tmp_path / "ws",
        cache_dir=tmp_path / "cache",
        strip_skill=True,
        gut_skill=True,
    ) as ws:
        folder = ws.path / "skills" / "commit-message"
        assert [p.name for p in folder.iterdir()] == ["SKILL.md"]
        text = (folder / "SKILL.md").read_text()
        assert text.startswith("---\nname: commit-message\ndescription: Commit the staged work") and body not in text
        objects = subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch", "--unordered"], cwd=ws.path, capture_output=True
        ).stdout
        assert body[:60].encode() not in objects


def test_a_gutted_skill_md_linked_out_of_the_repo_is_refused_by_name(tmp_path: Path, example_repo: Path) -> None:
    outside = tmp_path / "host-secret.md"
    outside.write_text("---\nname: commit-message\ndescription: HOST SECRET\n---\n")
    skill_md = example_repo / "skills" / "commit-message" / "SKILL.md"
    skill_md.unlink()
    skill_md.symlink_to(outside)
    git(example_repo, "add", "-A")
    git(example_repo, "commit", "-qm", "link")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(example_repo, store)
    case = EvalCase(id=1, prompt="p", expected_output="e", files=(), assertions=("a" * 20,))
    with (
        pytest.raises(BadRepo, match=r"SKILL\.md: is a link out of the repo") as caught,
        materialize_workspace(
            store,
            key,
            skill="commit-message",
            case=case,
            parent=tmp_path / "ws",
            cache_dir=tmp_path / "cache",
            strip_skill=True,
            gut_skill=True,
        ),
    ):
        pass
    assert "HOST SECRET" not in str(caught.value)


def _reduced(passes_gutted: bool):  # type: ignore[no-untyped-def]
    plan = plan_for([bundle("s", (1, 1, 1, 1, 1, 1))], variants=(CURRENT, GUTTED))
    outcomes = {s.shard_id: graded(s, [s.variant == CURRENT or passes_gutted]) for s in plan.shards}
    return reduce_run(plan, outcomes)


def test_a_suite_that_sees_the_instructions_go_passes_and_one_that_does_not_warns_by_name() -> None:
    seen = _reduced(passes_gutted=False)
    assert seen.verdict.value == "PASS" and not sensitivity_warnings(seen.comparisons)
    blind = _reduced(passes_gutted=True)
    assert blind.verdict.value == "WARN"
    (reason,) = [r for r in blind.reasons if r.startswith(WARN_INSENSITIVE_SUITE)]
    assert "s: the suite cannot tell the skill from its gutted copy" in reason and "6 of 6 assertions" in reason


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_gutted_arm_of_a_skill_the_model_follows_only_when_instructed_shows_the_drop(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "skills" / "greeter" / "SKILL.md").write_text(SKILL_MD)
    with OfflineModelServer(FOLLOWS_WHEN_INSTRUCTED) as server:
        result = run_cli(repo, tmp_path, server, "--baseline", "gutted")
        prompts = [json.dumps(r) for r in server.requests() if r.get("tools")]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skill: greeter [gutted]  cases: 6  result: 0/6 (0.0%)" in result.stdout
    assert "compare greeter: current vs gutted: +100.0 pts" in result.stdout
    # The gutted arm saw the skill's description, never its instructions.
    gutted = [p for p in prompts if "Greets the user warmly." in p and "(with the skill)" not in p]
    assert len({p for p in gutted if '"role": "user"' in p}) >= CASES
    reports = tmp_path / "zuvo" / "reports"
    doc = json.loads(next(reports.glob("skill-eval-greeter-*.json")).read_text())
    overall = next(c for c in doc["comparisons"] if c["model"] is None)
    assert overall["kind"] == "gutted" and overall["better"] == CASES
    assert all(a["current_rate"] == 1.0 and a["baseline_rate"] == 0.0 for a in overall["assertions"])
    md = next(reports.glob("skill-eval-greeter-*.md")).read_text()
    assert "## Suite sensitivity: the skill against its gutted copy: gutted" in md
    assert f"Sensitivity per assertion: {CASES} of {CASES} drop without the instructions." in md


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_suite_that_passes_without_the_instructions_gets_the_named_warning(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "skills" / "greeter" / "SKILL.md").write_text(SKILL_MD)
    ignores = {**FOLLOWS_WHEN_INSTRUCTED, "rules": FOLLOWS_WHEN_INSTRUCTED["rules"][:0]}  # type: ignore[index]
    ignores["rules"] = [
        {
            "tools": True,
            "contains": "Say hello",
            "replies": [{"tool_calls": [{"name": "shell", "arguments": {"command": "echo hello"}}]}, {"text": "ok"}],
        }
    ]
    with OfflineModelServer(ignores) as server:
        result = run_cli(repo, tmp_path, server, "--baseline", "gutted")
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"reason: {WARN_INSENSITIVE_SUITE}: greeter: the suite cannot tell the skill from its gutted copy" in (
        result.stdout
    )
    md = next((tmp_path / "zuvo" / "reports").glob("skill-eval-greeter-*.md")).read_text()
    assert "Passing as often without the instructions (they measure the model, not the skill):" in md
