"""Run planning: deterministic shard ids, per-skill bundle keys, run ids."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from producer.corpus.repo import Repo, bundle_key
from producer.plan.planning import new_run_id, plan_run
from schemas.errors import ConfigError
from schemas.shard import CURRENT, Shard, baseline_variant, shard_id_for
from tests.conftest import EXAMPLE_REPO


def test_shard_ids_are_deterministic_and_differ_in_every_field() -> None:
    base = ("r", CURRENT, "s", 1, "m", 0)
    assert shard_id_for(*base) == shard_id_for(*base)
    variants = {
        shard_id_for(*base),
        shard_id_for("r2", CURRENT, "s", 1, "m", 0),
        shard_id_for("r", baseline_variant("HEAD~1"), "s", 1, "m", 0),
        shard_id_for("r", CURRENT, "s2", 1, "m", 0),
        shard_id_for("r", CURRENT, "s", 2, "m", 0),
        shard_id_for("r", CURRENT, "s", 1, "m2", 0),
        shard_id_for("r", CURRENT, "s", 1, "m", 1),
    }
    assert len(variants) == 7


def test_a_shard_is_named_by_its_fields_and_refuses_an_id_that_is_not_theirs() -> None:
    shard = Shard.planned("r", CURRENT, "s", 1, "m", 0, "codex")
    assert shard.shard_id == shard_id_for("r", CURRENT, "s", 1, "m", 0, "codex")
    stored = shard.model_dump_json()
    assert Shard.model_validate_json(stored) == shard
    forged = stored.replace(shard.shard_id, shard_id_for("r", CURRENT, "s", 2, "m", 0, "codex"))
    with pytest.raises(ValidationError, match="is not the id of its fields"):
        Shard.model_validate_json(forged)


def test_replanning_the_same_run_gives_the_same_shards() -> None:
    bundles = Repo(EXAMPLE_REPO).load_many(Repo(EXAMPLE_REPO).targets([], all_evals=True))
    b = [o.bundle for o in bundles if o.bundle]
    one = plan_run("run-1", b, ["m1", "m2"], epochs=2, variants=[CURRENT, baseline_variant("v1")])
    two = plan_run("run-1", b, ["m1", "m2"], epochs=2, variants=[CURRENT, baseline_variant("v1")])
    assert [s.shard_id for s in one.shards] == [s.shard_id for s in two.shards]
    assert len(one.shards) == len({s.shard_id for s in one.shards}) == 2 * 4 * 2 * 2


@pytest.mark.parametrize(
    ("repeat", "named"),
    [
        (dict(bundles=2), "skill commit-message"),
        (dict(models=["m1", "m1"]), "model m1"),
        (dict(variants=[CURRENT, CURRENT]), "arm current"),
        (dict(harnesses={"agent": ("m1", "m1")}), "executor agent"),
    ],
    ids=["skill", "model", "arm", "harness-pair"],
)
def test_a_plan_that_would_hold_a_shard_twice_is_refused_before_anything_is_enqueued(
    repeat: dict[str, Any], named: str
) -> None:
    # Results are counted per shard id: a shard planned twice is one result short forever.
    [bundle] = [o.bundle for o in Repo(EXAMPLE_REPO).load_many(["evals/commit-message.evals.json"]) if o.bundle]
    bundles = [bundle] * repeat.pop("bundles", 1)
    with pytest.raises(ConfigError, match=f"the plan holds shard [0-9a-f]{{16}} \\(.*{named}.*\\) more than once"):
        plan_run("run-1", bundles, repeat.pop("models", ["m1"]), **repeat)


def test_bundle_key_changes_with_skill_text_but_not_with_file_order() -> None:
    files = [("skills/a/SKILL.md", b"one"), ("evals/a.evals.json", b"{}")]
    assert bundle_key("a", files) == bundle_key("a", list(reversed(files)))
    assert bundle_key("a", files) != bundle_key("a", [("skills/a/SKILL.md", b"two"), files[1]])
    assert re.fullmatch(r"a-[0-9a-f]{12}", bundle_key("a", files))


def test_bundle_key_covers_agents_but_not_unrelated_files(example_repo) -> None:  # type: ignore[no-untyped-def]
    repo = Repo(example_repo)
    key = repo.load("evals/changelog-entry.evals.json").bundle_key
    (example_repo / "README.md").write_text("changed")
    assert repo.load("evals/changelog-entry.evals.json").bundle_key == key
    (example_repo / "skills/changelog-entry/agents/reviewer.md").write_text("changed")
    assert repo.load("evals/changelog-entry.evals.json").bundle_key != key


def test_run_id_has_the_contract_shape() -> None:
    run_id = new_run_id(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), bytes.fromhex("deadbeef"))
    assert run_id == "20260102-030405-deadbeef"
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{8}", new_run_id())
