"""--all-evals skips a corpus only when an earlier conclusive report covers the same bundle and models."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from producer.plan.request import RunRequest, plan_request
from producer.results.reports import earlier_reports
from tests.conftest import EXAMPLE_REPO


def write_report(
    out: Path,
    bundle_key: str,
    models: list[str],
    inconclusive: bool = False,
    *,
    verdict: str = "PASS",
    run_id: str = "20260101-000000-00000000",
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "run_id": run_id,
        "verdict": "FAIL",  # the run's: another corpus of it may have failed
        "variants": [
            {
                "variant": "current",
                "bundle_key": bundle_key,
                "inconclusive": inconclusive,
                "verdict": verdict,
                "models": [{"model": m} for m in models],
            }
        ],
    }
    path = out / f"skill-eval-x-{bundle_key}-{run_id}.json"
    path.write_text(json.dumps(doc))
    return path


def request(out: Path, models: list[str]) -> RunRequest:
    return RunRequest(skills=[], all_evals=True, repo=EXAMPLE_REPO, models=models, judges=["j"], out=out)


def test_reported_keys_remember_models_and_ignore_inconclusive_reports(tmp_path: Path) -> None:
    write_report(tmp_path, "a-1", ["m1"])
    write_report(tmp_path, "b-2", ["m1"], inconclusive=True)
    write_report(tmp_path, "c-3", ["m1"], verdict="NOT GRADED")
    (tmp_path / "skill-eval-broken.json").write_text("{not json")
    found = earlier_reports(tmp_path)
    assert list(found) == ["a-1"] and [r.models for r in found["a-1"]] == [frozenset({"m1"})]


def test_an_unchanged_corpus_is_skipped_for_the_same_models_but_not_for_a_new_one(tmp_path: Path) -> None:
    console = Console(file=io.StringIO())
    _, bundles, _ = plan_request(request(tmp_path, ["m1"]), console)
    key = {b.skill: b.bundle_key for b in bundles}["commit-message"]
    write_report(tmp_path, key, ["m1"])

    req = request(tmp_path, ["m1"])
    _, again, _ = plan_request(req, console)
    assert [b.skill for b in again] == ["changelog-entry"]
    assert [c.corpus_file for c in req.reported] == ["evals/commit-message.evals.json"]

    _, sweep, _ = plan_request(request(tmp_path, ["m1", "m2"]), console)
    assert {b.skill for b in sweep} == {"changelog-entry", "commit-message"}


def test_a_skipped_corpus_carries_its_own_verdict_in_the_newest_report_of_each_model(tmp_path: Path) -> None:
    """The corpus's own verdict, not the run's (a sibling corpus may have failed that run); per model
    the newest report; of those, the worst."""
    console = Console(file=io.StringIO())
    _, bundles, _ = plan_request(request(tmp_path, ["m1"]), console)
    (bundle_key,) = [b.bundle_key for b in bundles if b.skill == "commit-message"]
    write_report(tmp_path, bundle_key, ["m1"], verdict="FAIL", run_id="20260101-000000-00000000")
    newer = write_report(tmp_path, bundle_key, ["m1"], verdict="PASS", run_id="20260102-000000-00000000")

    req = request(tmp_path, ["m1"])
    plan_request(req, console)
    (carried,) = req.reported
    assert (carried.skill, carried.verdict, carried.report) == ("commit-message", "PASS", str(newer))

    failed_m2 = write_report(tmp_path, bundle_key, ["m2"], verdict="FAIL", run_id="20260103-000000-00000000")
    both = request(tmp_path, ["m1", "m2"])
    plan_request(both, console)
    assert [(c.verdict, c.report) for c in both.reported] == [("FAIL", str(failed_m2))]
