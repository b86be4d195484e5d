"""Assertion quality from a run's own results. Pure.

- *non-discriminating*: the assertion passes for every model, epoch and variant, or fails
  for every one: it cannot tell a better skill from a worse one. Only said with at least
  ``MIN_QUALITY_OBSERVATIONS`` verdicts from at least two (variant, model) groups: with one
  group there is nothing to tell apart, and a few equal verdicts are no evidence;
- *flaky*: its verdict changes across the epochs of one model in one variant, among at least
  ``MIN_FLAKY_EPOCHS`` epochs (a single flip in two is what a sound assertion shows often);
- *judge disagreement*: in an ensemble, the share of shards where the judges that graded did
  not all give it the same verdict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from schemas.comparison import AssertionQuality
from schemas.constants import MIN_FLAKY_EPOCHS, MIN_QUALITY_OBSERVATIONS
from schemas.report import SkillResult
from schemas.status import ShardState


def is_constant(observations: int, passes: int, groups: int) -> bool:
    """Whether enough verdicts, from enough groups, all went the same way to call an assertion non-discriminating."""
    enough = observations >= MIN_QUALITY_OBSERVATIONS and groups >= 2
    return enough and passes in (0, observations)


def assess_assertions(skills: Sequence[SkillResult]) -> list[AssertionQuality]:
    """One row per (skill, case, assertion) that has at least one graded verdict."""
    texts: dict[tuple[str, int, int], str] = {}
    verdicts: dict[tuple[str, int, int], list[bool]] = defaultdict(list)
    groups: dict[tuple[str, int, int], dict[str, set[bool]]] = defaultdict(lambda: defaultdict(set))
    group_sizes: dict[tuple[str, int, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    ensemble: dict[tuple[str, int, int], list[bool]] = defaultdict(list)
    for s in skills:
        for a in s.assertions:
            texts.setdefault((s.skill, a.case_id, a.index), a.text)
        for r in s.runs:
            if r.state is not ShardState.GRADED:
                continue
            graded_judges = [j for j in r.judges if j.state is ShardState.GRADED]
            for i, v in enumerate(r.verdicts):
                key = (s.skill, r.case_id, i)
                texts.setdefault(key, v.text)
                verdicts[key].append(v.passed)
                group = f"{s.variant}/{r.model}"
                groups[key][group].add(v.passed)
                group_sizes[key][group] += 1
                if v.check == "judge" and len(graded_judges) > 1:
                    answers = {j.verdicts[i].passed for j in graded_judges if len(j.verdicts) > i}
                    ensemble[key].append(len(answers) > 1)
    rows = []
    for key in sorted(verdicts):
        skill, case_id, index = key
        seen = verdicts[key]
        constant = is_constant(len(seen), sum(seen), len(group_sizes[key]))
        repeated = [g for g, n in group_sizes[key].items() if n >= MIN_FLAKY_EPOCHS]
        flaky = sorted(g for g in repeated if len(groups[key][g]) > 1)
        disagree = ensemble.get(key)
        rows.append(
            AssertionQuality(
                skill=skill,
                case_id=case_id,
                index=index,
                text=texts[key],
                observations=len(seen),
                pass_rate=sum(seen) / len(seen),
                non_discriminating=constant,
                constant=("pass" if seen[0] else "fail") if constant else "",
                flaky_in=flaky,
                flip_rate=len(flaky) / len(repeated) if repeated else None,
                judge_disagreement=sum(disagree) / len(disagree) if disagree else None,
            )
        )
    return rows
