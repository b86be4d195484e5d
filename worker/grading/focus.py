"""Judging ``focused`` and ``baseline`` assertions (schemas/checks_focus.py) as Claude Code
``plugin eval`` does: one criterion per prompt, PASS or FAIL, a majority of three votes.

Each vote is its own call through the run's model client (so its limiter, retries and budget
apply), with a fresh nonce per call, and a shard's votes go out together; the judge reads the
criterion and the chosen part of the run (:mod:`worker.grading.focus_view`), fenced once, and
never any other assertion. An answer
is read only when it is exactly one word, PASS or FAIL (markdown emphasis, quotes and a final
full stop aside); anything else is re-asked once with a fresh nonce, and an answer that is
still unreadable, or no answer, is a vote that did not pass. With several judges each casts
three votes and the assertion passes when more than half of all votes cast are PASS. An
assertion with no readable vote at all leaves the shard ungraded, as a judge that never
answered does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prompts import load_template
from schemas.checks_focus import BaselineCheck, FocusedCheck
from schemas.constants import NONCE_BYTES
from schemas.corpus import Assertion
from schemas.errors import ModelCallFailed
from schemas.trajectory import Trajectory, Usage
from schemas.verdict import AssertionVerdict
from worker.grading.fanout import fan_out
from worker.grading.focus_view import focus_name, focus_subject, reference_view
from worker.grading.transcript import new_nonce
from worker.grading.view import JudgeView
from worker.models.base import ModelClient

VOTES = 3
ATTEMPTS = 2  # per vote: the first ask and one re-ask
FOCUS_TEMPLATE = "judge-focus"
BASELINE_TEMPLATE = "judge-baseline"
REASK = (
    "This is a second attempt: a previous answer to this grading could not be read ({reason}). "
    "Respond with exactly one word: PASS or FAIL."
)
OVER_CAP_EVIDENCE = "absent: the agent's tool calls alone exceed the judge's transcript cap; no judge was asked"
_PLACEHOLDER_RE = re.compile(r"\{(NONCE|REFERENCE_NONCE|OUTPUT|REFERENCE|CRITERION|FOCUS)\}")
_VOTE_RE = re.compile(r"[\s*_`'\"]*(PASS|FAIL)[\s*_`'\".]*", re.IGNORECASE)
_NONCE_RE = re.compile(f"[0-9a-f]{{{2 * NONCE_BYTES}}}")

FocusCheck = FocusedCheck | BaselineCheck


def parse_vote(text: str) -> bool | None:
    """True for PASS, False for FAIL, None for anything else (two words, a sentence, a verdict array)."""
    match = _VOTE_RE.fullmatch(text or "")
    return None if match is None else match.group(1).upper() == "PASS"


def build_focus_prompt(
    template: str, criterion: str, output: str, nonce: str, *, focus: str = "", reference: str = "", ref_nonce: str = ""
) -> str:
    """Fill a focus or baseline template in one pass (nothing inside a value is re-read as a
    placeholder). ``output`` and ``reference`` must already be made safe. Raises ValueError
    when the template lacks its fence shape or a nonce is not 16 lowercase hex characters."""
    if template.count("{OUTPUT}") != 1 or template.count("{NONCE}") != 2:
        raise ValueError("focus template needs {OUTPUT} once and {NONCE} in both fence tags")
    for value in (nonce, *([ref_nonce] if "{REFERENCE}" in template else [])):
        if not _NONCE_RE.fullmatch(value):
            raise ValueError(f"nonce {value!r} is not {2 * NONCE_BYTES} lowercase hex characters")
    values = {
        "NONCE": nonce,
        "REFERENCE_NONCE": ref_nonce,
        "OUTPUT": output,
        "REFERENCE": reference,
        "CRITERION": json.dumps(criterion, ensure_ascii=False),
        "FOCUS": focus,
    }
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], template)


@dataclass
class Ballots:
    """One judge's votes on one assertion, with every raw answer and the usage."""

    votes: list[bool | None] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)

    def add(self, other: Ballots) -> None:
        """Fold ``other``'s votes, answers, usage and errors in after this one's."""
        self.votes += other.votes
        self.raw += other.raw
        self.usage = self.usage.add(other.usage)
        self.errors += other.errors


def cast_vote(
    client: ModelClient, judge: str, prompt_for: Callable[[], str], *, timeout_s: float | None, max_tokens: int | None
) -> Ballots:
    """One vote of ``judge`` (re-asked once when unreadable); ``prompt_for`` builds a prompt with
    fresh nonces."""
    ballots = Ballots()
    vote: bool | None = None
    reask: str | None = None
    for _attempt in range(ATTEMPTS):
        messages = [{"role": "user", "content": prompt_for()}]
        if reask:
            messages.append({"role": "user", "content": reask})
        try:
            reply = client.complete(judge, messages, tools=None, max_tokens=max_tokens, timeout_s=timeout_s)
        except (ModelCallFailed, TimeoutError) as exc:
            ballots.errors.append(f"no answer: {exc}")
            reask = REASK.format(reason="no answer arrived")
            continue
        ballots.usage = ballots.usage.add(reply.usage)
        text = reply.content or ""
        ballots.raw.append(text)
        vote = parse_vote(text)
        if vote is not None:
            break
        ballots.errors.append(f"malformed vote: {text[:80]!r}")
        reask = REASK.format(reason="it was not exactly one word, PASS or FAIL")
    ballots.votes.append(vote)
    return ballots


def _prompt_for(check: FocusCheck, trajectory: Trajectory, view: JudgeView) -> Callable[[], str]:
    if isinstance(check, BaselineCheck):
        template, reference = load_template(BASELINE_TEMPLATE).text, reference_view(check.reference)
        return lambda: build_focus_prompt(
            template, check.text, view.text, new_nonce(), reference=reference, ref_nonce=new_nonce()
        )
    template, output = load_template(FOCUS_TEMPLATE).text, focus_subject(check, trajectory, view)
    return lambda: build_focus_prompt(template, check.text, output, new_nonce(), focus=focus_name(check))


def _word(vote: bool | None) -> str:
    return "PASS" if vote else ("FAIL" if vote is False else "unreadable")


def tally(check: FocusCheck, ballots: dict[str, Ballots]) -> AssertionVerdict | None:
    """The majority verdict of every judge's votes; None when no vote was readable."""
    votes = [v for b in ballots.values() for v in b.votes]
    if all(v is None for v in votes):
        return None
    passes = sum(v is True for v in votes)
    passed = 2 * passes > len(votes)
    what = f"the reference run {check.reference_file}" if isinstance(check, BaselineCheck) else focus_name(check)
    said = f"{passes} of {len(votes)} votes PASS (the judge read {what})"
    note = "votes: " + "; ".join(f"{j}: {', '.join(_word(v) for v in b.votes)}" for j, b in ballots.items())
    return AssertionVerdict(
        text=check.text, passed=passed, evidence=said if passed else f"absent: {said}", note=note, weight=check.weight
    )


@dataclass
class FocusGrades:
    """The verdicts of a trajectory's focus assertions, by position, and what each judge spent."""

    verdicts: dict[int, AssertionVerdict] = field(default_factory=dict)
    ballots: dict[str, Ballots] = field(default_factory=dict)
    """Per judge: every vote's raw answer and usage, over all the focus assertions."""
    errors: list[str] = field(default_factory=list)
    """Assertions no readable vote decided (the shard is then ungraded)."""
    malformed: bool = False


def grade_focused(
    client: ModelClient,
    judges: Sequence[str],
    assertions: Sequence[Assertion],
    trajectory: Trajectory,
    view: JudgeView,
    *,
    timeout_s: float | None = None,
    max_tokens: int | None = None,
) -> FocusGrades:
    """Vote on every ``focused`` and ``baseline`` assertion, each alone; every vote of every
    judge is sent at once (:func:`worker.grading.fanout.fan_out`), read in a fixed order."""
    out = FocusGrades(ballots={j: Ballots() for j in judges})
    asked: list[tuple[int, FocusCheck]] = []
    for i, check in enumerate(assertions):
        if not isinstance(check, FocusedCheck | BaselineCheck):
            continue
        if view.over_cap and (isinstance(check, BaselineCheck) or check.focus == "trace"):
            out.verdicts[i] = AssertionVerdict(
                text=check.text, passed=False, evidence=OVER_CAP_EVIDENCE, weight=check.weight
            )
            continue
        asked.append((i, check))
    prompts = {i: _prompt_for(check, trajectory, view) for i, check in asked}
    slots = [(i, j) for i, _check in asked for j in judges for _vote in range(VOTES)]
    cast = fan_out(
        lambda slot: cast_vote(client, slot[1], prompts[slot[0]], timeout_s=timeout_s, max_tokens=max_tokens),
        slots,
        name="focus-vote",
    )
    by_check: dict[int, dict[str, Ballots]] = {i: {j: Ballots() for j in judges} for i, _check in asked}
    for (i, j), one in zip(slots, cast, strict=True):
        by_check[i][j].add(one)
        out.ballots[j].add(one)
    for i, check in asked:
        ballots = by_check[i]
        verdict = tally(check, ballots)
        if verdict is None:
            errors = "; ".join(e for b in ballots.values() for e in b.errors[-1:])
            out.errors.append(f"assertion {i + 1} ({check.kind}): no readable vote ({errors})")
            out.malformed = out.malformed or any(b.raw for b in ballots.values())
            continue
        out.verdicts[i] = verdict
    return out


def focus_template_hashes(assertions: Sequence[Assertion]) -> dict[str, str]:
    """The hashes of the focus templates these assertions use."""
    names = {
        BASELINE_TEMPLATE if isinstance(a, BaselineCheck) else FOCUS_TEMPLATE
        for a in assertions
        if isinstance(a, FocusedCheck | BaselineCheck)
    }
    return {t.name: t.sha256 for t in map(load_template, sorted(names))}
