"""Attacks on trigger evaluation: what the agent sends ``load_skill`` and what the repo's skills hold.

A ``load_skill`` name is agent output: a path, another folder's name, a non-string or a skill that
is not installed must never count as an activation nor read a file beside the skills. A SKILL.md
linking out of the workspace is neither listed with the host file's text nor loaded; the other
skills a harness stages are capped in bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnesses.model_record import ModelToolCall
from schemas.manifest import AgentBudget
from worker.executor.harness_stage import other_skills
from worker.executor.trigger import _TriggerLoop, skill_catalogue

SECRET = "HOST-SECRET-5e1f"


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "skills" / "real").mkdir(parents=True)
    (root / "skills" / "real" / "SKILL.md").write_text("---\nname: real\ndescription: The real one.\n---\nREAL BODY\n")
    (root / "notes").mkdir()
    (root / "notes" / "SKILL.md").write_text(f"{SECRET} outside skills/\n")
    host = tmp_path / "host.md"
    host.write_text(f"---\nname: linked\ndescription: {SECRET}\n---\n{SECRET}\n")
    (root / "skills" / "linked").mkdir()
    (root / "skills" / "linked" / "SKILL.md").symlink_to(host)
    return root


def _loop(root: Path) -> _TriggerLoop:
    # The loop's model client and sandbox are not reached by load_skill: it reads the workspace only.
    installed = frozenset(e.name for e in skill_catalogue(root))
    return _TriggerLoop(None, "m", None, AgentBudget(), root=root, installed=installed)  # type: ignore[arg-type]


def _load(loop: _TriggerLoop, name: Any) -> str:
    return loop.run_tool(ModelToolCall(call_id="c1", name="load_skill", arguments={"name": name})).output


def test_load_skill_names_that_are_not_an_installed_skill_fire_nothing_and_read_nothing(tmp_path: Path) -> None:
    loop = _loop(_workspace(tmp_path))
    for name in ("../notes", "../../host.md", "skills/real", "notes", "linked", "", None, ["real"], "real/../linked"):
        out = _load(loop, name)
        assert out.startswith("error: no installed skill"), (name, out)
        assert SECRET not in out
    assert loop.fired == []
    assert _load(loop, "plugin:real").startswith("---\nname: real")
    assert loop.fired == ["real"]


def test_a_skill_linking_out_of_the_workspace_is_not_listed(tmp_path: Path) -> None:
    entries = skill_catalogue(_workspace(tmp_path))
    assert [e.name for e in entries] == ["real"]
    assert all(SECRET not in e.description for e in entries)


def test_distractors_staged_for_a_harness_are_capped_in_bytes(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    for name in ("a-one", "b-two", "c-three", "under-test"):
        (root / "skills" / name).mkdir(parents=True)
        (root / "skills" / name / "SKILL.md").write_bytes(b"x" * 1000)
    (root / "skills" / "linked").symlink_to(root / "skills" / "a-one")  # a link is not installed
    assert sorted(other_skills(root, "under-test")) == ["a-one", "b-two", "c-three"]
    assert sorted(other_skills(root, "under-test", max_bytes=2500)) == ["a-one", "b-two"]
