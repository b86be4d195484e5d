"""Grading one shard: ask each judge model, re-ask once, check evidence, combine, merge checks.

Per judge:

* a fresh prompt with a fresh nonce for every call, the prepared transcript fenced once;
* a malformed answer (not JSON, wrong types, wrong length, reorder) is re-asked once, with a
  fresh nonce and a note naming what was wrong; malformed again -> ``grader-malformed``;
* no answer (``ModelCallFailed`` after the client's retries, a timeout) is re-asked once;
  no answer again -> ``grader-dispatch-failed``;
* every raw answer text is kept, in order.

Across judges: the shard is ``graded`` when at least one judge graded it, and the verdicts
are the majority of the judges that did (a tie is false); when none did, the shard takes the
state of the failures (``grader-malformed`` if any judge answered badly, else
``grader-dispatch-failed``). Deterministic assertions are checked without a model and merged
back by position. The model is reached only through :class:`worker.models.base.ModelClient`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prompts import load_template
from schemas.corpus import Assertion
from schemas.errors import ModelCallFailed
from schemas.status import ShardState
from schemas.trajectory import Trajectory, Usage
from schemas.verdict import AssertionVerdict, JudgeAnswer, PairAgreement, ShardGrade
from worker.grading.deterministic import merge_by_position, split_assertions
from worker.grading.ensemble import agreement, combine
from worker.grading.evidence import check_evidence, verified_share
from worker.grading.fanout import fan_out
from worker.grading.focus import FocusGrades, focus_template_hashes, grade_focused
from worker.grading.parse import Malformed, parse_verdicts
from worker.grading.transcript import GRADER_TEMPLATE, build_grader_prompt, new_nonce
from worker.grading.view import JudgeView, judge_view
from worker.models.base import ModelClient

ATTEMPTS = 2  # the first ask and one re-ask, for either kind of failure
REASK_MALFORMED = (
    "This is a second attempt: a previous answer to this grading could not be used ({reason}). "
    "Answer with only the JSON array described above, one object per assertion, in order."
)
REASK_DISPATCH = (
    "This is a second attempt: a previous request for this grading got no answer. "
    "Answer with only the JSON array described above, one object per assertion, in order."
)


def _messages(prompt: str, reask: str | None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    if reask:
        messages.append({"role": "user", "content": reask})
    return messages


def ask_judge(
    client: ModelClient,
    judge: str,
    *,
    skill: str,
    assertions: Sequence[str],
    transcript: str,
    template: str,
    strict_evidence: bool = False,
    timeout_s: float | None = None,
    max_tokens: int | None = None,
    evidence_blocks: Sequence[str] | None = None,
) -> JudgeAnswer:
    """One judge's grading of judged ``assertions`` against a *prepared* ``transcript``.

    Evidence is checked against ``evidence_blocks`` (the tool calls and results of the view),
    by default the tool call and result blocks of ``transcript``."""
    raw_answers: list[str] = []
    usage = Usage()
    reask: str | None = None
    error, state, nonce = "", ShardState.GRADER_DISPATCH_FAILED, ""
    for _attempt in range(ATTEMPTS):
        nonce = new_nonce()
        prompt = build_grader_prompt(skill, assertions, transcript, nonce, template=template)
        try:
            reply = client.complete(
                judge, _messages(prompt, reask), tools=None, max_tokens=max_tokens, timeout_s=timeout_s
            )
        except (ModelCallFailed, TimeoutError) as exc:
            error, state = f"no answer: {exc}", ShardState.GRADER_DISPATCH_FAILED
            reask = REASK_DISPATCH
            continue
        usage = usage.add(reply.usage)
        text = reply.content or ""
        raw_answers.append(text)
        result = parse_verdicts(text, assertions)
        if isinstance(result, Malformed):
            error, state = f"malformed answer ({result.kind.value}): {result.reason}", ShardState.GRADER_MALFORMED
            reask = REASK_MALFORMED.format(reason=result.reason)
            continue
        verdicts = [AssertionVerdict(text=v.text, passed=v.passed, evidence=v.evidence) for v in result.verdicts]
        verdicts = check_evidence(
            verdicts, transcript if evidence_blocks is None else evidence_blocks, strict=strict_evidence
        )
        return JudgeAnswer(
            judge=judge, state=ShardState.GRADED, verdicts=verdicts, raw_answers=raw_answers, nonce=nonce, usage=usage
        )
    return JudgeAnswer(judge=judge, state=state, raw_answers=raw_answers, error=error, nonce=nonce, usage=usage)


OVER_CAP_NOTE = (
    "behaviour: the agent's tool calls alone exceed the judge's transcript cap, and no call is ever cut or "
    "dropped; no judge was asked and every judged assertion fails"
)


def over_cap_verdicts(texts: Sequence[str], view: JudgeView) -> list[AssertionVerdict]:
    """The verdicts of a trajectory whose calls alone exceed the cap: the agent's own volume, a fail."""
    evidence = f"absent: {view.calls} tool calls too large to show the judge in full (see the shard note)"
    return [AssertionVerdict(text=t, passed=False, evidence=evidence, note=OVER_CAP_NOTE) for t in texts]


def _with_ballots(answers: list[JudgeAnswer], focus: FocusGrades) -> list[JudgeAnswer]:
    """Each judge's answer with its focus votes' raw answers and usage added (a judge asked only
    for votes gets an answer of its own, graded, with no batch verdicts)."""
    by_judge = {a.judge: a for a in answers}
    out = []
    for judge, ballots in focus.ballots.items():
        answer = by_judge.get(judge) or JudgeAnswer(judge=judge, state=ShardState.GRADED)
        out.append(
            answer.model_copy(
                update={"raw_answers": answer.raw_answers + ballots.raw, "usage": answer.usage.add(ballots.usage)}
            )
        )
    return out or answers


def _batch(
    client: ModelClient, judges: Sequence[str], texts: list[str], view: JudgeView, template: str, **kw: Any
) -> list[JudgeAnswer]:
    """Every judge's grading of the judged texts in one prompt (none when there is no text), the
    judges asked at once."""
    if not texts:
        return []
    return fan_out(
        lambda judge: ask_judge(
            client,
            judge,
            assertions=texts,
            transcript=view.text,
            template=template,
            evidence_blocks=view.evidence_blocks,
            **kw,
        ),
        judges,
        name="judge",
    )


def grade_trajectory(
    client: ModelClient,
    judges: Sequence[str],
    assertions: Sequence[Assertion],
    trajectory: Trajectory,
    *,
    skill: str,
    shard_id: str | None = None,
    strict_evidence: bool = False,
    timeout_s: float | None = None,
    max_tokens: int | None = None,
) -> ShardGrade:
    """Grade one trajectory against a case's assertions with every judge in ``judges``.

    Returns a :class:`ShardGrade` whose ``state`` is ``graded``, ``grader-malformed`` or
    ``grader-dispatch-failed``; never raises for a judge's failure. With no judged assertion
    (a string, a ``judged``, ``focused`` or ``baseline`` object) no model is called. Raises
    ValueError when judged assertions exist but ``judges`` is empty.
    """
    template = load_template(GRADER_TEMPLATE)
    texts, _positions = split_assertions(assertions)
    sid = shard_id if shard_id is not None else trajectory.shard_id
    hashes = {template.name: template.sha256, **focus_template_hashes(assertions)}
    base = ShardGrade(shard_id=sid, state=ShardState.GRADED, template_hashes=hashes)
    if not texts and not focus_template_hashes(assertions):
        return base.model_copy(update={"verdicts": merge_by_position(assertions, [], trajectory)})
    if not judges:
        raise ValueError("judged assertions need at least one judge model")
    view = judge_view(trajectory)
    focus = grade_focused(client, judges, assertions, trajectory, view, timeout_s=timeout_s, max_tokens=max_tokens)
    if focus.errors:  # the shard cannot be scored: asking the batch judge too would only spend
        state = ShardState.GRADER_MALFORMED if focus.malformed else ShardState.GRADER_DISPATCH_FAILED
        error = "; ".join(focus.errors)
        return base.model_copy(update={"state": state, "judges": _with_ballots([], focus), "error": error})
    if view.over_cap and texts:
        verdicts = merge_by_position(assertions, over_cap_verdicts(texts, view), trajectory, focus.verdicts)
        voted = _with_ballots([], focus) if focus.verdicts else []
        return base.model_copy(update={"verdicts": verdicts, "judges": voted, "error": OVER_CAP_NOTE})
    kw: dict[str, Any] = dict(skill=skill, strict_evidence=strict_evidence, timeout_s=timeout_s, max_tokens=max_tokens)
    answers = _batch(client, judges, texts, view, template.text, **kw)
    graded = [a for a in answers if a.state is ShardState.GRADED]
    if texts and not graded:
        malformed = any(a.state is ShardState.GRADER_MALFORMED for a in answers)
        state = ShardState.GRADER_MALFORMED if malformed else ShardState.GRADER_DISPATCH_FAILED
        error = "; ".join(f"{a.judge}: {a.error}" for a in answers)
        return base.model_copy(update={"state": state, "judges": _with_ballots(answers, focus), "error": error})
    combined = combine([a.verdicts for a in graded]) if texts else []
    figures = agreement({a.judge: a.verdicts for a in graded})
    failed = [f"{a.judge}: {a.error}" for a in answers if a.state is not ShardState.GRADED]
    return base.model_copy(
        update={
            "verdicts": merge_by_position(assertions, combined, trajectory, focus.verdicts),
            "judges": _with_ballots(answers, focus),
            "agreement": [PairAgreement(judges=pair, share=share) for pair, share in figures.pairwise.items()],
            "unanimous_share": figures.unanimous_share if texts else None,
            "evidence_verified_share": verified_share(combined),
            "error": "; ".join(failed),
        }
    )
