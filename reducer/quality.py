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
from collections.abc import Iterable, Mapping, Sequence

from reducer.counters import Arm
from schemas.comparison import AssertionQuality
from schemas.constants import MIN_FLAKY_EPOCHS, MIN_QUALITY_OBSERVATIONS
from schemas.shard import SkillBundle


def is_constant(observations: int, passes: int, groups: int) -> bool:
    """Whether enough verdicts, from enough groups, all went the same way to call an assertion non-discriminating."""
    enough = observations >= MIN_QUALITY_OBSERVATIONS and groups >= 2
    return enough and passes in (0, observations)


def assertion_texts(bundles: Iterable[SkillBundle]) -> dict[tuple[str, int, int], str]:
    """(skill, case, assertion index) -> the assertion's text, for the rows of :func:`quality_rows`."""
    return {
        (b.skill, case.id, i): str(getattr(a, "text", a))
        for b in bundles
        for case in b.corpus.evals
        for i, a in enumerate(case.assertions)
    }


def quality_rows(
    arms: Mapping[tuple[str, str], Arm],
    disagreed: Mapping[tuple[str, int, int], Sequence[int]],
    texts: Mapping[tuple[str, int, int], str],
) -> list[AssertionQuality]:
    """One row per (skill, case, assertion) with at least one graded verdict, from each arm's
    (case, assertion, model) cells: a group is one (variant, model). ``disagreed`` is (skill,
    case, assertion) -> [ensemble questions the judges split on, ensemble questions]."""
    groups: dict[tuple[str, int, int], dict[str, list[int]]] = defaultdict(dict)
    for (variant, skill), arm in arms.items():
        for (case_id, index, model), (passes, n) in arm.cells.items():
            groups[(skill, case_id, index)][f"{variant}/{model}"] = [n, passes]
    rows = []
    for key in sorted(groups):
        by_group = groups[key]
        skill, case_id, index = key
        observations = sum(n for n, _ in by_group.values())
        passes = sum(c for _, c in by_group.values())
        constant = is_constant(observations, passes, len(by_group))
        repeated = [g for g, (n, _) in by_group.items() if n >= MIN_FLAKY_EPOCHS]
        flaky = sorted(g for g in repeated if 0 < by_group[g][1] < by_group[g][0])
        d = disagreed.get(key, (0, 0))
        rows.append(
            AssertionQuality(
                skill=skill,
                case_id=case_id,
                index=index,
                text=texts.get(key, ""),
                observations=observations,
                pass_rate=passes / observations,
                non_discriminating=constant,
                constant=("pass" if passes else "fail") if constant else "",
                flaky_in=flaky,
                flip_rate=len(flaky) / len(repeated) if repeated else None,
                judge_disagreement=d[0] / d[1] if d[1] else None,
            )
        )
    return rows
