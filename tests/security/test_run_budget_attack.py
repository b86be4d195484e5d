"""Attack: one oversized request to the agent's own model proxy used to end the whole run, with the
real Claude Code binary, end to end.

Under ``--max-tokens 200000`` (four cases: a share is 50,000 tokens), the scripted agent's one
Bash command posts its proxy a 2 MB conversation of its own. The proxy reserves a request's
estimate (a quarter of its body's bytes, here about 500,000 tokens) against the run's cap
before forwarding it. The cap's script refused that estimate by marking the run exhausted: the
attacker's case and every case after it ended ``budget-exhausted`` (infra, not graded) and the
corpus was INCONCLUSIVE, whatever the agent did. Now a request that alone would take its shard
past its share and does not fit is refused as that shard's own doing, named to the agent, and
the run stays open: every case is graded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnesses.base import FORWARDER_PORT, PLACEHOLDER_KEY
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, current, git_init, new_repo, reports, scenario, write_skill
from tests.harness_e2e import call, canary_rule, model_fixtures, tool_ran

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODEL = "anthropic/claude-sonnet-4-5"
FLOOD = (
    'python3 -c \'import json,sys; json.dump({"model":"claude-sonnet-4-5","max_tokens":10,'
    '"messages":[{"role":"user","content":"x"*2000000}]}, sys.stdout)\' > /tmp/b.json; '
    "echo \"flood $(curl -s -o /dev/null -w '%{http_code}' "
    f"http://127.0.0.1:{FORWARDER_PORT}/v1/messages -H 'x-api-key: {PLACEHOLDER_KEY}' "
    "-H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' --data-binary @/tmp/b.json)\""
)
RULES = [
    canary_rule("Bash", described=False),
    {
        "contains": "Flood the proxy:",
        "tools": True,
        "replies": [call("Bash", command=FLOOD, description="x"), {"text": "done"}],
    },
    {
        "contains": "Write hello:",
        "tools": True,
        "replies": [call("Bash", command="echo hello > hello.txt", description="x"), {"text": "wrote hello.txt"}],
    },
]
JUDGE = [tool_ran("Bash", "hello.txt")]

server, env = model_fixtures(scenario(RULES, JUDGE))


def test_one_oversized_request_is_the_agents_own_refusal_and_every_case_is_still_graded(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    cases = [case(1, "Flood the proxy: then stop.", ["The agent writes hello.txt"])]
    cases += [case(i, f"Write hello: case {i}.", ["The agent writes hello.txt"]) for i in (2, 3, 4)]
    write_skill(repo, "greet", cases)
    git_init(repo)

    res = env.run(repo, "greet", "--executor", "claude-code", "--max-tokens", "200000", models=(MODEL,))

    assert res.code == 1, res.stdout + res.stderr  # FAIL, graded: case 1 wrote nothing
    assert "INCONCLUSIVE" not in res.stdout and "budget-exhausted" not in res.stdout, res.stdout
    doc, _markdown = reports(env.out, "greet", res.run_id)
    runs = {r["case_id"]: r for r in current(doc)["runs"]}
    assert {i: r["state"] for i, r in runs.items()} == dict.fromkeys((1, 2, 3, 4), "graded"), runs
    assert {i: [v["passed"] for v in r["verdicts"]] for i, r in runs.items()} == {
        1: [False],
        2: [True],
        3: [True],
        4: [True],
    }
    # The flood never reached the upstream; the agent was told why, and it is listed as its doing.
    assert not any(len(str(b)) > 1_000_000 for b in server.requests())
    [refusal] = runs[1]["refused_requests"]
    assert refusal.startswith("BUDGET_SHARE:") and "more than its share of the run's token cap" in refusal
