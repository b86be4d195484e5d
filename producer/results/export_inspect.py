"""``skill-eval export RUN --format inspect``: a run as Inspect AI eval logs, so ``inspect view`` opens it.

An Inspect log has one task and one model, so there is one log per (skill, variant, executor
model). Each shard is one sample: its id is the case (``case-<id>``), its epoch the shard's
epoch counted from 1, its messages the trajectory (the executor prompt's case text, the
assistant's text and tool calls, the tool results), its scores the verdicts: ``pass_rate``
(the share of assertions passed, with every verdict and its evidence in the metadata) and
``assertions`` (``C``/``I`` per assertion). A shard that was not graded carries its infra or
blocked status as the sample's error and no score, as in the reports.

The headline metric (``pass_rate``/``pooled``, declared as the log's headline) is the reports'
figure for that skill and model: passed assertions over judged ones (``case_weighted`` in an
adaptive run, as the reports weigh it); ``mean``, the mean of the per-shard shares, is beside it.
A trigger query's sample is scored ``trigger``: 1 when it fired as it should (fired on a
positive, stayed quiet on a negative), with what fired in the metadata; its log's headline is
``accuracy`` beside the reports' ``recall`` and ``false_trigger``.

The log's status says whether there is a result: ``success`` only when the run ended and
something was graded; ``error`` (with the named error) for a BLOCKED run or one where nothing
was graded; ``started`` while shards are still running, ``cancelled`` when the run was
interrupted before they ended. A log with nothing graded carries no score (never a 0).

Needs the ``inspect-ai`` package (the ``inspect`` extra); without it, a named CONFIG_ERROR.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from reducer.file_names import file_slug, name_digest
from schemas.errors import ConfigError
from schemas.manifest import RunManifest
from schemas.report import CaseRun, RunResult, SkillResult
from schemas.run_end import RunEnd
from schemas.shard import CURRENT
from schemas.status import ShardState, Verdict
from schemas.trajectory import AssistantEvent, ToolCallEvent, Trajectory
from schemas.triggers import TriggerCase
from schemas.words import plural

LoadTrajectory = Callable[[str], Trajectory | None]


def _inspect() -> Any:
    try:
        import inspect_ai.log as log
        import inspect_ai.model as model
        import inspect_ai.scorer as scorer
        import inspect_ai.tool as tool
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise ConfigError("export --format inspect needs inspect-ai: pip install 'skill-eval[inspect]'") from exc
    return log, model, scorer, tool


def _messages(case_prompt: str, trajectory: Trajectory | None) -> list[Any]:
    _, model, _, tool = _inspect()
    out: list[Any] = [model.ChatMessageUser(content=case_prompt)]
    if trajectory is None:
        return out
    names = {e.call_id: e.name for e in trajectory.events if isinstance(e, ToolCallEvent)}
    pending: Any = None
    for event in trajectory.events:
        if isinstance(event, AssistantEvent):
            pending = model.ChatMessageAssistant(content=event.text, tool_calls=[])
            out.append(pending)
        elif isinstance(event, ToolCallEvent):
            if pending is None:
                pending = model.ChatMessageAssistant(content="", tool_calls=[])
                out.append(pending)
            call = tool.ToolCall(id=event.call_id, function=event.name, arguments=dict(event.arguments))
            pending.tool_calls = [*(pending.tool_calls or []), call]
        else:
            pending = None
            out.append(
                model.ChatMessageTool(
                    content=event.output, tool_call_id=event.call_id, function=names.get(event.call_id)
                )
            )
    return out


def _sample(run: CaseRun, prompt: str, target: str, trajectory: Trajectory | None, variant: str) -> Any:
    log, _, _, _ = _inspect()
    sample = _sample_fields(run, prompt, target, trajectory, variant)
    if run.state is not ShardState.GRADED:
        return log.EvalSample(**sample, error=_error(f"{run.state.value}: {run.detail}"))
    return log.EvalSample(**sample, scores=_scores(run))


def _sample_fields(run: CaseRun, prompt: str, target: str, trajectory: Trajectory | None, variant: str) -> Any:
    metadata = {"shard_id": run.shard_id, "variant": variant, "state": run.state.value, "end_reason": run.end_reason}
    return {
        "id": f"case-{run.case_id}",
        "epoch": run.epoch + 1,
        "input": prompt,
        "target": target,
        "messages": _messages(prompt, trajectory),
        "metadata": metadata,
    }


def _error(message: str) -> Any:
    log, _, _, _ = _inspect()
    return log.EvalError(message=message, traceback="", traceback_ansi="")


def _trigger_sample(run: CaseRun, skill: str, case: TriggerCase, trajectory: Trajectory | None, variant: str) -> Any:
    """A trigger query's sample: scored 1 when the skill under test fired exactly when it should."""
    log, _, scorer, _ = _inspect()
    target = "fires" if case.should_trigger else "does not fire"
    sample = _sample_fields(run, case.query, target, trajectory, variant)
    fired = trajectory.skills_fired if trajectory is not None else None
    if run.state is not ShardState.GRADED or fired is None:
        why = f"{run.state.value}: {run.detail}" if run.state is not ShardState.GRADED else "no record of what fired"
        return log.EvalSample(**sample, error=_error(why))
    hit = skill in fired
    score = scorer.Score(
        value=1.0 if hit == case.should_trigger else 0.0,
        answer="fired" if hit else "did not fire",
        explanation=f"should {'' if case.should_trigger else 'not '}fire; fired: {', '.join(fired) or '(none)'}",
        metadata={"should_trigger": case.should_trigger, "fired": list(fired)},
    )
    return log.EvalSample(**sample, scores={"trigger": score})


def _scores(run: CaseRun) -> dict[str, Any]:
    _, _, scorer, _ = _inspect()
    passed = sum(v.passed for v in run.verdicts)
    share = passed / len(run.verdicts) if run.verdicts else 0.0
    verdicts = [v.model_dump(mode="json") for v in run.verdicts]
    return {
        "pass_rate": scorer.Score(
            value=share,
            answer=f"{passed}/{len(run.verdicts)} assertions passed",
            explanation="\n".join(f"{'PASS' if v.passed else 'FAIL'} {v.text}: {v.evidence}" for v in run.verdicts),
            metadata={"verdicts": verdicts},
        ),
        "assertions": scorer.Score(value={f"a{i + 1}": "C" if v.passed else "I" for i, v in enumerate(run.verdicts)}),
    }


def _metrics(result: RunResult, manifest: RunManifest, part: SkillResult, model: str, graded: list[Any]) -> Any:
    """(score name, metrics in headline-first order) of one log's graded samples."""
    log, _, _, _ = _inspect()
    if manifest.plan.bundle(part.skill).triggers is not None:
        accuracy = sum(s.scores["trigger"].value for s in graded) / len(graded)
        metrics = {"accuracy": accuracy}
        row = next(
            (
                f
                for f in (result.triggers.figures if result.triggers else [])
                if (f.skill, f.model) == (part.skill, model)
            ),
            None,
        )
        if row is not None and part.variant == CURRENT:
            metrics |= {
                k: v
                for k, v in (("recall", row.recall.rate), ("false_trigger", row.false_trigger.rate))
                if v is not None
            }
        return "trigger", {k: log.EvalMetric(name=k, value=v) for k, v in metrics.items()}
    summary = next((m for m in part.models if m.model == model), None)
    shares = [s.scores["pass_rate"].value for s in graded]
    head = "case_weighted" if manifest.plan.adaptive else "pooled"
    figure = summary.behavioural.rate if summary is not None else None
    metrics = {head: figure if figure is not None else 0.0, "mean": sum(shares) / len(shares)}
    return "pass_rate", {k: log.EvalMetric(name=k, value=v) for k, v in metrics.items()}


def _status(part: SkillResult, samples: list[Any], verdict: Verdict, end: RunEnd | None, reasons: list[str]) -> Any:
    """(Inspect status, error) of one log: success only for an ended run with something graded."""
    if (end is not None and end.how == "blocked") or verdict is Verdict.BLOCKED:
        return "error", _error(f"BLOCKED: {end.reason if end is not None else '; '.join(reasons)}")
    if any(not r.state.terminal for r in part.runs):
        if end is not None:  # interrupted: nothing runs it any more
            return "cancelled", _error(f"interrupted: {end.reason}")
        return "started", None
    if all(s.error is not None for s in samples):
        return "error", _error(
            f"nothing graded: {plural(len(samples), 'shard')} ended without a grade (see the samples' errors)"
        )
    return "success", None


def _samples(part: SkillResult, manifest: RunManifest, runs: list[CaseRun], load: LoadTrajectory) -> list[Any]:
    bundle = manifest.plan.bundle(part.skill)
    if bundle.triggers is not None:
        triggers = bundle.triggers
        return [_trigger_sample(r, part.skill, triggers.case(r.case_id), load(r.shard_id), part.variant) for r in runs]
    out = []
    for r in runs:
        case = bundle.corpus.case(r.case_id)
        out.append(_sample(r, case.prompt, case.expected_output, load(r.shard_id), part.variant))
    return out


def _log(
    result: RunResult, manifest: RunManifest, part: SkillResult, model: str, load: LoadTrajectory, end: RunEnd | None
) -> Any:
    """One (skill, variant, model) log."""
    log, _, _, _ = _inspect()
    bundle = manifest.plan.bundle(part.skill)
    samples = _samples(part, manifest, [r for r in part.runs if r.model == model], load)
    graded = [s for s in samples if s.error is None]
    status, error = _status(part, samples, result.verdict, end, result.reasons)
    scores, headline = [], None
    if graded:
        name, metrics = _metrics(result, manifest, part, model, graded)
        headline = log.HeadlineMetric(scorer="skill-eval", score=name, metric=next(iter(metrics)))
        scores = [
            log.EvalScore(
                name=name,
                scorer="skill-eval",
                scored_samples=len(graded),
                unscored_samples=len(samples) - len(graded),
                metrics=metrics,
            )
        ]
    spec = log.EvalSpec(
        run_id=result.run_id,
        created=manifest.plan.created_at.isoformat(),
        task=f"{part.skill}[{part.variant}]",
        task_id=f"{result.run_id}-{part.skill}-{_safe(part.variant)}",
        dataset=log.EvalDataset(name=part.skill, location=bundle.corpus_file, samples=len(bundle.corpus.evals)),
        model=model,
        config=log.EvalConfig(epochs=manifest.plan.epochs),
        metadata={"variant": part.variant, "bundle_key": part.bundle_key, "verdict": result.verdict.value},
        headline_metric=headline,
    )
    results = log.EvalResults(
        total_samples=len(samples), completed_samples=len(graded), scores=scores, headline=headline
    )
    return log.EvalLog(status=status, error=error, eval=spec, results=results, samples=samples)


def build_logs(
    result: RunResult, manifest: RunManifest, load: LoadTrajectory, end: RunEnd | None = None
) -> list[tuple[str, Any]]:
    """(file name, EvalLog) per skill, variant and executor model; ``end``: how the run ended
    without a result, when it did (its status then says so)."""
    out = []
    used: set[str] = set()
    for part in result.skills:
        for model in sorted({r.model for r in part.runs}):
            whole = (result.run_id, part.skill, part.variant, model)
            stem = "_".join(_safe(p) for p in whole)
            if stem in used:  # a recorded name crafted to equal another's safe form
                stem = f"{stem[:MAX_STEM_CHARS]}-{name_digest(repr(whole))}"
            used.add(stem)
            out.append((f"{stem}.eval", _log(result, manifest, part, model, load, end)))
    return out


MAX_STEM_CHARS = 48
"""Each part of a log's file name is cut here: four parts and their hashes stay far under the
255 bytes a file name may have."""


def _safe(text: str) -> str:
    """``text`` as a file-name part: unchanged when it is short and safe already; otherwise its safe
    form, cut, with a short hash of the whole, so two names never write one file."""
    return file_slug(text, "-", MAX_STEM_CHARS, exact=True)


def write_logs(
    result: RunResult, manifest: RunManifest, load: LoadTrajectory, out_dir: Path, end: RunEnd | None = None
) -> list[Path]:
    """Write every log of the run under ``out_dir``; return the paths."""
    log, _, _, _ = _inspect()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, eval_log in build_logs(result, manifest, load, end):
        path = out_dir / name
        log.write_eval_log(eval_log, str(path), format="eval")
        paths.append(path)
    return paths
