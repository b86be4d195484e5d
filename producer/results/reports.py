"""Writing a run's reports to the output folder, and the run-log line. The I/O edge of the reducer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from engine.collect import load_trajectory
from engine.store import ArtifactStore
from reducer.file_names import distinct_slugs
from reducer.render import (
    needs_transcript,
    render_json,
    render_markdown,
    report_stem,
    run_log_line,
    transcript_name,
)
from reducer.render_html import render_html
from reducer.render_junit import render_junit
from reducer.summary import NOT_ENDED_WHY, render_complete_block
from schemas.manifest import RunManifest
from schemas.report import CarriedReport, RunResult
from schemas.shard import SkillBundle
from schemas.status import TERMINAL_STATES


def write_reports(result: RunResult, manifest: RunManifest, store: ArtifactStore, out_dir: Path) -> list[Path]:
    """Per skill: ``.md`` and ``.json``; per failing or not-graded shard: its transcript; one JUnit file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    transcripts: dict[str, str] = {}
    # Two names one readable slug would share (a/b, a_b) would overwrite each other's transcripts.
    model_slugs = distinct_slugs(r.model for part in result.skills for r in part.runs)
    variant_slugs = distinct_slugs(part.variant for part in result.skills)
    run_id = result.run_id
    for bundle in manifest.plan.bundles:
        skill = bundle.skill
        meta = {
            "repo": manifest.repo,
            "bundle_key": bundle.bundle_key,
            "corpus": bundle.corpus_file,
            "models": ", ".join(manifest.plan.models),
            "judges": ", ".join(manifest.plan.judges) or "-",
            "epochs": str(manifest.plan.epochs),
            "sandbox": manifest.plan.sandbox.value,
            "executor": manifest.executor_label,
        }
        meta.update({f"guard ({i + 1})": g for i, g in enumerate(manifest.guards) if g.startswith(f"{skill}:")})
        stem = report_stem(skill, run_id)
        md = out_dir / f"{stem}.md"
        md.write_text(render_markdown(result, skill, meta), encoding="utf-8")
        js = out_dir / f"{stem}.json"
        js.write_text(render_json(result, skill, {**meta, "branch": manifest.branch, "sha7": manifest.sha7}), "utf-8")
        written += [md, js]
        for part in (s for s in result.skills if s.skill == skill):
            per_case: dict[int, int] = {}
            for r in part.runs:
                per_case[r.case_id] = per_case.get(r.case_id, 0) + 1
            for r in part.runs:
                if not needs_transcript(r) or r.state not in TERMINAL_STATES:
                    continue  # a shard not ended has no transcript yet, only a placeholder
                trajectory = load_trajectory(store, run_id, r.shard_id)
                text = trajectory.render() if trajectory else f"(no trajectory recorded: {r.state.value}: {r.detail})\n"
                unique = per_case[r.case_id] == 1 and len(manifest.plan.variants) == 1
                name = transcript_name(skill, run_id, r, unique, model_slugs[r.model])
                if part.variant != "current":  # refs may hold '/' and more
                    name = name.replace("-transcript.txt", f"-{variant_slugs[part.variant]}-transcript.txt")
                path = out_dir / name
                path.write_text(text, encoding="utf-8")
                written.append(path)
                transcripts[r.shard_id] = name
    html = out_dir / f"skill-eval-{run_id}.html"
    html.write_text(render_html(result, transcripts, page_facts(manifest)), encoding="utf-8")
    written.append(html)
    junit = out_dir / f"skill-eval-{run_id}.junit.xml"
    junit.write_text(render_junit(result), encoding="utf-8")
    written.append(junit)
    return written


def page_facts(manifest: RunManifest) -> dict[str, str]:
    """What the run's page shows under its verdict: where the skill came from, what ran it, when."""
    plan = manifest.plan
    commit = " @ ".join(x for x in (manifest.branch, manifest.sha7) if x and x != "-")
    return {
        "repo": manifest.repo,
        "commit": commit or "-",
        "models": ", ".join(plan.models) or "-",
        "judges": ", ".join(plan.judges) or "-",
        "executor": manifest.executor_label,
        "epochs": str(plan.epochs),
        "date": plan.created_at.strftime("%Y-%m-%d %H:%M UTC"),
    }


def append_run_log(result: RunResult, manifest: RunManifest, log_path: Path) -> str:
    """Append the contract's 13-field run-log line; return it."""
    line = run_log_line(result, datetime.now(UTC), manifest.project, manifest.branch, manifest.sha7)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as fh:
        fh.write(line)
    return line


@dataclass(frozen=True)
class EarlierReport:
    """One conclusive JSON report of a corpus in the report folder, as ``--all-evals`` reads it."""

    run_id: str
    path: str
    models: frozenset[str]
    verdict: Literal["PASS", "WARN", "FAIL"]


def earlier_reports(out_dir: Path) -> dict[str, list[EarlierReport]]:
    """Bundle key -> the conclusive JSON reports of its current version in ``out_dir``.

    An INCONCLUSIVE report does not count: it says the infra failed, not how the skill
    behaves, so the next ``--all-evals`` re-runs that corpus without needing ``--force``; nor
    does one whose corpus was not graded. The models are kept so that sweeping a new executor
    model over unchanged corpora is not mistaken for a re-run, and the verdict so that the
    report a corpus is skipped for still decides the run (:func:`carried_report`).
    """
    found: dict[str, list[EarlierReport]] = {}
    for path in sorted(out_dir.glob("skill-eval-*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for variant in doc.get("variants", []) if isinstance(doc, dict) else []:
            if variant.get("variant") != "current" or not variant.get("bundle_key") or variant.get("inconclusive"):
                continue
            verdict = _verdict_of(variant.get("verdict"), doc.get("verdict"))
            if verdict is None:
                continue
            models = frozenset(m.get("model", "") for m in variant.get("models", []) if isinstance(m, dict))
            report = EarlierReport(str(doc.get("run_id", "")), str(path), models, verdict)
            found.setdefault(variant["bundle_key"], []).append(report)
    return found


def _verdict_of(own: object, run: object) -> Literal["PASS", "WARN", "FAIL"] | None:
    """The corpus's own verdict in a report (PASS or FAIL; None when it was not graded), or the
    report's verdict when the report predates a corpus's own (None when it was BLOCKED)."""
    if own:
        return own if own in ("PASS", "WARN", "FAIL") else None
    return "PASS" if run == "PASS" else "WARN" if run == "WARN" else "FAIL" if run == "FAIL" else None


SEVERITY = {"PASS": 0, "WARN": 1, "FAIL": 2}


def carried_report(found: list[EarlierReport], models: list[str], bundle: SkillBundle) -> CarriedReport | None:
    """What a corpus skipped for its earlier reports carries: per model of the run the newest report
    covering it, and of those the worst verdict (the newest report saying it); None when a model has none."""
    newest: list[EarlierReport] = []
    for model in models or [""]:
        covering = [r for r in found if model in r.models]
        if not covering:
            return None
        newest.append(max(covering, key=lambda r: r.run_id))
    worst = max(newest, key=lambda r: (SEVERITY[r.verdict], r.run_id))
    return CarriedReport(corpus_file=bundle.corpus_file, skill=bundle.skill, verdict=worst.verdict, report=worst.path)


def complete_block(result: RunResult, paths: list[Path], not_ended_why: str = NOT_ENDED_WHY) -> str:
    """The SKILL-EVAL COMPLETE block counting every file written (transcripts are listed in the md
    reports), without its final line break: printed, its verdict is the output's last line."""
    return render_complete_block(result, [str(p) for p in paths], not_ended_why).rstrip("\n")
