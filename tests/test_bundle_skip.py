"""--all-evals skips a corpus only when an earlier conclusive report covers the same bundle and models."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from producer.plan.request import RunRequest, plan_request
from producer.results.reports import reported_bundle_keys
from tests.conftest import EXAMPLE_REPO


def write_report(out: Path, bundle_key: str, models: list[str], inconclusive: bool = False) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "variants": [
            {
                "variant": "current",
                "bundle_key": bundle_key,
                "inconclusive": inconclusive,
                "models": [{"model": m} for m in models],
            }
        ]
    }
    (out / f"skill-eval-x-{bundle_key}.json").write_text(json.dumps(doc))


def request(out: Path, models: list[str]) -> RunRequest:
    return RunRequest(skills=[], all_evals=True, repo=EXAMPLE_REPO, models=models, judges=["j"], out=out)


def test_reported_keys_remember_models_and_ignore_inconclusive_reports(tmp_path: Path) -> None:
    write_report(tmp_path, "a-1", ["m1"])
    write_report(tmp_path, "b-2", ["m1"], inconclusive=True)
    (tmp_path / "skill-eval-broken.json").write_text("{not json")
    assert reported_bundle_keys(tmp_path) == {"a-1": {"m1"}}


def test_an_unchanged_corpus_is_skipped_for_the_same_models_but_not_for_a_new_one(tmp_path: Path) -> None:
    console = Console(file=io.StringIO())
    _, bundles, _ = plan_request(request(tmp_path, ["m1"]), console)
    key = {b.skill: b.bundle_key for b in bundles}["commit-message"]
    write_report(tmp_path, key, ["m1"])

    req = request(tmp_path, ["m1"])
    _, again, _ = plan_request(req, console)
    assert [b.skill for b in again] == ["changelog-entry"]
    assert req.reported == ["evals/commit-message.evals.json"]

    _, sweep, _ = plan_request(request(tmp_path, ["m1", "m2"]), console)
    assert {b.skill for b in sweep} == {"changelog-entry", "commit-message"}
