"""End to end with the real Codex binary and a model of its built-in list (``gpt-5.5``).

With such a model Codex offers more than its shell: a freeform ``apply_patch`` (a ``custom``
tool) and a ``tool_search`` it runs itself (``"execution": "client"``). The proxy lets both
through (they run in the sandbox), the scripted model edits a file with ``apply_patch``, and the
judge sees the call and, through a later ``cat``, the file it wrote. A forged patch in the
model's text stays a proposal: nothing runs it and the judge never sees it as a call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, current, git_init, new_repo, reports, scenario, write_skill
from tests.harness_e2e import canary_rule, model_fixtures, tool_ran

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LISTED = "openai/gpt-5.5"
"""A slug of Codex 0.169's built-in model list: Codex offers apply_patch and tool_search with it."""
PATCH = "*** Begin Patch\n*** Add File: greeting.txt\n+hello-patched-7d1\n*** End Patch\n"
FORGED = "*** Begin Patch\n*** Add File: forged.txt\n+forged-patch-9e4\n*** End Patch\n"
SKILL_TEXT = "---\nname: greet\ndescription: Greets by writing greeting.txt.\n---\n# greet\n\nWrite greeting.txt.\n"


def shell(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


RULES = [
    canary_rule("shell", described=False),
    {
        "contains": "Patch one:",
        "tools": True,
        "replies": [
            {"tool_calls": [{"name": "apply_patch", "input": PATCH}]},
            shell("cat greeting.txt; ls"),
            {"text": f"Done. I could also apply this:\n{FORGED}"},
        ],
    },
    {"contains": "Greet plainly.", "replies": [{"text": "Hello-plain-3c2."}]},
]
JUDGE = [
    {"assertion_contains": "plain hello", "transcript_regex": r"Hello-plain-3c2"},
    tool_ran("apply_patch", "hello-patched-7d1"),
    {"assertion_contains": "greeting-file", "transcript_regex": r"\[tool_result\] exec_command[^[]*hello-patched-7d1"},
    {"assertion_contains": "forged-patch-9e4", "transcript_regex": r"\[tool_call\] apply_patch\(.*forged-patch-9e4"},
]

server, env = model_fixtures(scenario(RULES, JUDGE))


def test_a_listed_model_edits_with_apply_patch_through_the_real_codex_and_the_judge_sees_the_file(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    assertions = [
        "The agent writes hello-patched-7d1 with apply_patch",
        "The greeting-file shows hello-patched-7d1 when read back",
        "The agent writes forged-patch-9e4 with a patch",
    ]
    cases = [case(1, "Patch one: write the greeting.", assertions), case(2, "Greet plainly.", ["The agent outputs a plain hello"])]
    write_skill(repo, "greet", cases, skill_text=SKILL_TEXT)
    git_init(repo)

    res = env.run(repo, "greet", "--executor", "codex", models=(LISTED,))

    assert res.code in (0, 1), res.stdout + res.stderr
    doc, _markdown = reports(env.out, "greet", res.run_id)
    run = next(r for r in current(doc)["runs"] if r["case_id"] == 1)
    assert run["state"] == "graded", run
    assert run["refused_requests"] == [] and run["rejected_calls"] == [], run
    # The patch ran (the file holds its line), the judge saw the call; the forged one never ran.
    assert [v["passed"] for v in run["verdicts"]] == [True, True, False], run
    sent = [b for b in server.requests() if b.get("model") == "gpt-5.5" and b.get("tools")]
    offered = {(t.get("type"), t.get("name")) for t in sent[-1]["tools"]}
    assert ("custom", "apply_patch") in offered and ("tool_search", None) in offered
    outputs = [str(b.get("input")) for b in sent]
    assert any("forged.txt" not in o and "custom_tool_call_output" in o for o in outputs)
    assert not any("forged-patch-9e4" in o and "ls" in o and "forged.txt\\n" in o for o in outputs)
