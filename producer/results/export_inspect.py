"""``skill-eval export RUN --format inspect``: a run as Inspect AI eval logs, so ``inspect view`` opens it.

An Inspect log has one task and one model, so there is one log per (skill, variant, executor
model). Each shard is one sample: its id is the case (``case-<id>``), its epoch the shard's
epoch counted from 1, its messages the trajectory (the executor prompt's case text, the
assistant's text and tool calls, the tool results), its scores the verdicts: ``pass_rate``
(the share of assertions passed, with every verdict and its evidence in the metadata) and
``assertions`` (``C``/``I`` per assertion). A shard that was not graded carries its infra or
blocked status as the sample's error and no score, as in the reports.

Needs the ``inspect-ai`` package (the ``inspect`` extra); without it, a named CONFIG_ERROR.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schemas.errors import ConfigError
from schemas.manifest import RunManifest
from schemas.report import CaseRun, RunResult
from schemas.status import ShardState
from schemas.trajectory import AssistantEvent, ToolCallEvent, Trajectory

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
    metadata = {"shard_id": run.shard_id, "variant": variant, "state": run.state.value, "end_reason": run.end_reason}
    sample: dict[str, Any] = {
        "id": f"case-{run.case_id}",
        "epoch": run.epoch + 1,
        "input": prompt,
        "target": target,
        "messages": _messages(prompt, trajectory),
        "metadata": metadata,
    }
    if run.state is not ShardState.GRADED:
        error = log.EvalError(message=f"{run.state.value}: {run.detail}", traceback="", traceback_ansi="")
        return log.EvalSample(**sample, error=error)
    return log.EvalSample(**sample, scores=_scores(run))


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


def build_logs(result: RunResult, manifest: RunManifest, load: LoadTrajectory) -> list[tuple[str, Any]]:
    """(file name, EvalLog) per skill, variant and executor model."""
    log, _, _, _ = _inspect()
    out = []
    created = manifest.plan.created_at.isoformat()
    for part in result.skills:
        bundle = manifest.plan.bundle(part.skill)
        for model in sorted({r.model for r in part.runs}):
            runs = [r for r in part.runs if r.model == model]
            samples = []
            for r in runs:
                case = bundle.corpus.case(r.case_id)
                samples.append(_sample(r, case.prompt, case.expected_output, load(r.shard_id), part.variant))
            graded = [s for s in samples if s.error is None]
            mean = sum(s.scores["pass_rate"].value for s in graded) / len(graded) if graded else 0.0
            spec = log.EvalSpec(
                run_id=result.run_id,
                created=created,
                task=f"{part.skill}[{part.variant}]",
                task_id=f"{result.run_id}-{part.skill}-{_safe(part.variant)}",
                dataset=log.EvalDataset(name=part.skill, location=bundle.corpus_file, samples=len(bundle.corpus.evals)),
                model=model,
                config=log.EvalConfig(epochs=manifest.plan.epochs),
                metadata={"variant": part.variant, "bundle_key": part.bundle_key, "verdict": result.verdict.value},
            )
            results = log.EvalResults(
                total_samples=len(samples),
                completed_samples=len(graded),
                scores=[
                    log.EvalScore(
                        name="pass_rate",
                        scorer="skill-eval",
                        scored_samples=len(graded),
                        unscored_samples=len(samples) - len(graded),
                        metrics={"mean": log.EvalMetric(name="mean", value=mean)},
                    )
                ],
            )
            eval_log = log.EvalLog(status="success", eval=spec, results=results, samples=samples)
            name = f"{result.run_id}_{part.skill}_{_safe(part.variant)}_{_safe(model)}.eval"
            out.append((name, eval_log))
    return out


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-")


def write_logs(result: RunResult, manifest: RunManifest, load: LoadTrajectory, out_dir: Path) -> list[Path]:
    """Write every log of the run under ``out_dir``; return the paths."""
    log, _, _, _ = _inspect()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, eval_log in build_logs(result, manifest, load):
        path = out_dir / name
        log.write_eval_log(eval_log, str(path), format="eval")
        paths.append(path)
    return paths
