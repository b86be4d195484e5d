"""End to end: ``skill-eval run`` with the built-in agent on a corpus whose case declares HTTP mocks.
The declaration crosses the cluster with the case, the worker's proxy answers and records, the
judge reads the recorded calls and the ``http_call`` / ``http_order`` checks grade them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e_support import Env, case, current, git_init, new_repo, reports, scenario, shell_rule
from tests.harness_e2e import model_fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

COMMANDS = [
    "curl -sS https://api.example.com/v1/items",
    "curl -sS -X POST -d '{\"sku\": 7}' https://api.example.com/v1/orders",
    "curl -sS https://tracker.example.net/ping || true",
]
RULES = [shell_rule("Order one item", COMMANDS), shell_rule("Say hi", ["echo hi"])]
# The judge passes the assertion when the recorded answer to the order is in its view.
JUDGE = [
    {
        "assertion_contains": "order is accepted",
        "transcript_regex": r'(?m)^\[http_call\] POST "https://api\.example\.com/v1/orders" -> 201 mocked',
    },
    {"assertion_contains": "to say hi", "transcript_regex": r"echo hi"},
]
MOCKS = [
    {"url": "^https://api\\.example\\.com/v1/items$", "body": '{"items": [{"sku": 7}]}'},
    {"url": "^https://api\\.example\\.com/v1/orders$", "method": "POST", "status": 201, "body": '{"order": 1}'},
]
CHECKS = [
    "The agent shows that its order is accepted by the API with status 201",
    {"kind": "http_call", "request": {"url": "/v1/orders$", "method": "POST", "body": '"sku": 7'}, "max": 1},
    {"kind": "http_order", "before": {"url": "/v1/items$"}, "after": {"url": "/v1/orders$"}},
    {"kind": "http_call", "request": {"url": "tracker"}, "min": 0, "max": 0},
]


server, env = model_fixtures(scenario(RULES, JUDGE))


def test_a_run_serves_records_judges_and_checks_http_mocks(env: Env, tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    (repo / "skills" / "shop").mkdir(parents=True)
    (repo / "skills" / "shop" / "SKILL.md").write_text("# shop\n\nList the items, then order one.\n")
    ordered = {**case(1, "Order one item from the shop API", CHECKS), "http_mocks": MOCKS}
    corpus = {
        "skill_name": "shop",
        "extensions": ["deterministic-assertions"],
        "evals": [ordered, case(2, "Say hi to the user", ["The agent runs echo hi in the shell to say hi"])],
    }
    (repo / "evals").mkdir()
    (repo / "evals" / "shop.evals.json").write_text(json.dumps(corpus))
    git_init(repo)

    res = env.run(repo, "shop")

    doc, markdown = reports(env.out, "shop", res.run_id)
    runs = {r["case_id"]: r for r in current(doc)["runs"]}
    assert runs[1]["state"] == "graded", runs[1]["detail"]
    # Judged pass, the two checks of the mocked calls pass, the tracker was asked: the last fails.
    assert [v["passed"] for v in runs[1]["verdicts"]] == [True, True, True, False]
    assert "1 request to " in runs[1]["verdicts"][3]["evidence"] and "(refused)" in runs[1]["verdicts"][3]["evidence"]
    assert [v["passed"] for v in runs[2]["verdicts"]] == [True]
    # The reports list each request with its status, the refused one too.
    assert runs[1]["http_calls"][:2] == [
        'GET "https://api.example.com/v1/items" -> 200 mocked',
        'POST "https://api.example.com/v1/orders" -> 201 mocked',
    ]
    assert '- HTTP call: `GET "https://api.example.com/v1/items" -> 200 mocked`' in markdown
    assert any(
        line.startswith('GET "https://tracker.example.net/ping" -> 403 refused') for line in runs[1]["http_calls"]
    )
