"""End to end: ``skill-eval run SKILL --triggers`` with the built-in agent against the offline model server.

Three skills are installed; the scenario scripts, per query, which skill the model loads (or none),
so the figures are known in advance: a hit by a plugin-qualified name, a miss where another skill
fired, a miss where none fired (ended by --trigger-turns), a false trigger, and a true negative.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, git_init, new_repo, reports
from tests.harness_e2e import model_fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

SKILLS = {
    "pdf-tools": "Extracts text and images from PDF documents.",
    "csv-clean": "Cleans and reshapes CSV spreadsheets.",
    "release-notes": "Writes release notes from the git history.",
}
QUERIES = [
    # (id, query, should_trigger, what the scripted model does)
    (1, "Pull the text out of report.pdf please", True, "pdf:pdf-tools"),
    (2, "Get the tables from invoice.pdf into a spreadsheet", True, "csv-clean"),
    (3, "Look at scan.pdf and tell me what it says", True, None),
    (4, "Summarize what changed since v1.2", False, "pdf-tools"),
    (5, "What is the capital of France", False, "answer"),
]
MARKERS = {1: "report.pdf", 2: "invoice.pdf", 3: "scan.pdf", 4: "since v1.2", 5: "capital of France"}


server, env = model_fixtures({"rules": []})


def trigger_repo(path: Path, plugin: str | None = None) -> Path:
    repo = new_repo(path)
    if plugin is not None:  # a Claude Code plugin: its skills are known as <plugin>:<skill>
        (repo / ".claude-plugin").mkdir()
        (repo / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": plugin, "version": "1.0.0"}))
    for name, description in SKILLS.items():
        folder = repo / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nBody.\n")
    (repo / "evals").mkdir()
    # The author's own setup: a project skill that would intercept every query, and instructions.
    (repo / ".claude" / "skills" / "interceptor").mkdir(parents=True)
    (repo / ".claude" / "skills" / "interceptor" / "SKILL.md").write_text("---\nname: interceptor\n---\nAUTHOR\n")
    (repo / "CLAUDE.md").write_text("Always load the interceptor skill first. AUTHOR-SETUP\n")
    triggers = [{"id": i, "query": q, "should_trigger": s} for i, q, s, _ in QUERIES]
    (repo / "evals" / "pdf-tools.triggers.json").write_text(
        json.dumps({"skill_name": "pdf-tools", "triggers": triggers})
    )
    git_init(repo)
    return repo


def rule(case_id: int, action: str | None) -> dict[str, Any]:
    marker = MARKERS[case_id]
    if action is None:  # looks around with the shell and never loads a skill
        replies: list[dict[str, Any]] = [{"tool_calls": [{"name": "shell", "arguments": {"command": "ls -a"}}]}]
    elif action == "answer":
        replies = [{"text": "Paris."}]
    else:
        replies = [{"tool_calls": [{"name": "load_skill", "arguments": {"name": action}}]}, {"text": "(loaded)"}]
    return {"name": marker, "tools": True, "contains": marker, "replies": replies}


def calls_for(server: OfflineModelServer, marker: str) -> int:
    return sum(marker in json.dumps(r.get("messages", [])) for r in server.requests())


def test_trigger_run_counts_hits_misses_by_what_fired_false_triggers_and_stops_early(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = trigger_repo(tmp_path / "repo")
    server.set_scenario({"rules": [rule(i, a) for i, _, _, a in QUERIES], "default": {"text": "(no script)"}})
    checked = env.cli("validate", "pdf-tools", "--repo", str(repo))
    assert "OK evals/pdf-tools.triggers.json: 5 queries (3 positive, 2 negative)" in checked.stdout, checked.stdout

    dry = env.cli("run", "pdf-tools", "--triggers", "--dry-run", "--trigger-turns", "2", "--repo", str(repo))
    assert dry.code == 0, dry.stdout + dry.stderr
    assert "3 positive, 2 negative; 5 shards" in dry.stdout
    assert "at most 10 model calls (2 turns per shard" in dry.stdout
    # The behavioural threshold and calibration act on assertions: refused by name, not ignored.
    # --threshold too: it scores plugin eval cases.
    refused = env.cli(
        "run",
        "pdf-tools",
        "--triggers",
        "--fail-under",
        "0.5",
        "--threshold",
        "0.9",
        "--calibrate-with",
        "r1",
        "--repo",
        str(repo),
    )
    assert refused.code == 2, refused.stdout + refused.stderr
    assert "--fail-under, --threshold, --calibrate-with act on a behavioural run" in refused.stdout + refused.stderr

    args = ("--triggers", "--trigger-turns", "2", "--min-recall", "0.5")
    result = env.run(repo, "pdf-tools", *args)
    assert result.code == 1, result.stdout + result.stderr  # FAIL: recall 1/3 is below 50%
    assert "reason: pdf-tools (openai/exec-a): recall 1/3 (33.3%) is below 50%" in result.stdout
    assert "false triggers 1/2 (50.0%" in result.stdout
    block = result.stdout[result.stdout.index("SKILL-EVAL COMPLETE") :].strip().splitlines()
    assert "gates: --min-recall 0.5" in block and block[-1] == "verdict: FAIL"

    doc, text = reports(env.out, "pdf-tools", result.run_id)
    (f,) = doc["triggers"]["figures"]
    assert (f["recall"]["hits"], f["recall"]["total"]) == (1, 3)
    assert (f["false_trigger"]["hits"], f["false_trigger"]["total"]) == (1, 2)
    assert (f["precision"]["hits"], f["precision"]["total"]) == (1, 2)
    assert f["f1"] == pytest.approx(0.4)
    # The miss where csv-clean fired is counted apart from the miss where nothing fired.
    assert f["confusion"] == {"(none)": 1, "csv-clean": 1}
    assert doc["triggers"]["routing"] == {"pdf-tools": {"(none)": 1, "csv-clean": 1, "pdf-tools": 1}}
    assert "Missed positives, by what fired first instead" in text
    assert "| 4: Summarize what changed since v1.2 | no | 1/1 |" in text

    # Early stop: an activation ends the shard after its turn, a query without one after --trigger-turns.
    assert calls_for(server, "report.pdf") == 1
    assert calls_for(server, "invoice.pdf") == 1
    assert calls_for(server, "since v1.2") == 1
    assert calls_for(server, "capital of France") == 1
    assert calls_for(server, "scan.pdf") == 2
    # Its workspace: every skill installed; no trigger corpus and nothing of the author's own setup.
    listing = next(
        m["content"]
        for r in server.requests()
        if "scan.pdf" in json.dumps(r.get("messages", []))
        for m in r["messages"]
        if m.get("role") == "tool"
    ).split()
    assert "skills" in listing and "README.md" in listing
    assert not {"evals", ".claude", "CLAUDE.md"} & set(listing)
    # No judge was called: no request of the run is a grading request.
    assert not any("assertion" in json.dumps(r.get("messages", [])).lower() for r in server.requests())


CSV_QUERIES = [
    (11, "Dedupe the rows in people.csv", True, "csv-clean"),
    (12, "Reshape sales.csv from long to wide", True, "pdf-tools"),  # collides with pdf-tools
    (13, "Tell me a joke about ducks", False, "answer"),
]
MARKERS.update({11: "people.csv", 12: "sales.csv", 13: "about ducks"})


def test_all_evals_triggers_reports_the_routing_matrix_across_skills(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = trigger_repo(tmp_path / "repo")
    triggers = [{"id": i, "query": q, "should_trigger": s} for i, q, s, _ in CSV_QUERIES]
    (repo / "evals" / "csv-clean.triggers.json").write_text(
        json.dumps({"skill_name": "csv-clean", "triggers": triggers})
    )
    git_init(repo)  # a second commit on top of the first
    rules = [rule(i, a) for i, _, _, a in [*QUERIES, *CSV_QUERIES]]
    server.set_scenario({"rules": rules, "default": {"text": "(no script)"}})

    result = env.run(repo, "--all-evals", "--triggers", "--trigger-turns", "1")
    assert result.code == 3, result.stdout + result.stderr  # WARN: no gate given, nothing was decided
    doc, text = reports(env.out, "csv-clean", result.run_id)
    assert doc["triggers"]["routing"] == {
        "csv-clean": {"csv-clean": 1, "pdf-tools": 1},
        "pdf-tools": {"(none)": 1, "csv-clean": 1, "pdf-tools": 1},
    }
    assert "| csv-clean | 1 | 1 | 0 |" in text  # columns: csv-clean, pdf-tools, (none)
    assert "| pdf-tools | 1 | 1 | 1 |" in text
    assert {f["skill"] for f in doc["triggers"]["figures"]} == {"csv-clean", "pdf-tools"}
    assert "triggers csv-clean (openai/exec-a): recall 1/2 (50.0%" in result.stdout
    # Recall 50% decides nothing: no gate was given, and the behavioural threshold (1.0 by default) is not a
    # trigger gate. A run that measured and decided nothing must not read as a PASS: it WARNs and names the flags.
    block = result.stdout[result.stdout.index("SKILL-EVAL COMPLETE") :].strip().splitlines()
    assert "gates: none (--min-recall and --max-false-trigger not given)" in block
    assert not any(line.startswith("threshold") for line in block)
    triggers_at = max(i for i, line in enumerate(block) if line.startswith("triggers "))
    assert "reason: no trigger gate given: figures only (--min-recall, --max-false-trigger)" in block
    assert block[-1] == "verdict: WARN" and triggers_at < len(block) - 1
    assert "- trigger gates: none" in text and "threshold 1.0" not in text
    (page,) = env.out.glob(f"*{result.run_id}*.html")
    assert "<dt>trigger gates</dt>" in page.read_text() and "threshold 1.0" not in page.read_text()
    (junit,) = env.out.glob(f"*{result.run_id}*.xml")
    assert 'name="threshold"' not in junit.read_text() and "[triggers:" in junit.read_text()


def test_a_zuvo_sized_repo_plans_runs_and_reduces_its_routing_matrix(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "zuvo")
    (repo / "evals").mkdir()
    rules = []
    for n in range(57):
        name = f"skill-{n:02d}"
        (repo / "skills" / name).mkdir(parents=True)
        skill_md = f"---\nname: {name}\ndescription: Does task {n}.\n---\nBody.\n"
        (repo / "skills" / name / "SKILL.md").write_text(skill_md)
        cases = [
            {"id": 1, "query": f"please do task number {n}.", "should_trigger": True},
            {"id": 2, "query": "unrelated chatter", "should_trigger": False},
        ]
        (repo / "evals" / f"{name}.triggers.json").write_text(json.dumps({"skill_name": name, "triggers": cases}))
        # Every tenth description collides with the next skill's: its positive loads that one.
        target = f"skill-{(n + 1) % 57:02d}" if n % 10 == 0 else name
        load = {"tool_calls": [{"name": "load_skill", "arguments": {"name": target}}]}
        rules.append({"contains": f"task number {n}.", "tools": True, "replies": [load]})
    git_init(repo)
    server.set_scenario({"rules": rules, "default": {"text": "(no skill needed)"}})

    dry = env.cli("run", "--all-evals", "--triggers", "--dry-run", "--model", "openai/exec-a", "--repo", str(repo))
    assert dry.code == 0, dry.stdout + dry.stderr
    assert dry.stdout.count(": 1 positive, 1 negative; 2 shards") == 57
    assert "installed skills (distractors included): 57" in dry.stdout
    assert "shards = queries x models x epochs = 114" in dry.stdout
    assert "at most 342 model calls (3 turns per shard" in dry.stdout

    result = env.cli(*env.run_args(repo, "--all-evals", "--triggers", "--trigger-turns", "1"), timeout_s=500)
    assert result.code == 3, result.stdout + result.stderr
    doc, _ = reports(env.out, "skill-00", result.run_id)
    routing = doc["triggers"]["routing"]
    assert len(routing) == 57
    collided = {skill: row for skill, row in routing.items() if skill not in row}
    assert collided == {f"skill-{n:02d}": {f"skill-{(n + 1) % 57:02d}": 1} for n in range(0, 57, 10)}
    figures = {f["skill"]: f for f in doc["triggers"]["figures"]}
    assert figures["skill-10"]["confusion"] == {"skill-11": 1}
    assert (
        figures["skill-11"]["precision"]["total"] == 1
    )  # skill-10's positive fired it too: that run counts in skill-10's set
    assert sum(f["recall"]["hits"] for f in figures.values()) == 57 - 6


def test_compare_reports_the_paired_change_of_recall_and_false_triggers_between_descriptions(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = trigger_repo(tmp_path / "repo")  # first commit: the old description, marked "legacy-pdf"
    skill_md = repo / "skills" / "pdf-tools" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("Extracts text", "legacy-pdf: extracts text"))
    git_init(repo)
    old = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
    skill_md.write_text(skill_md.read_text().replace("legacy-pdf: extracts text", "Extracts text and tables"))
    git_init(repo)
    # The old description loses invoice.pdf to csv-clean and fires on the negative; the new one does neither.
    old_arm = [
        {**rule(2, "csv-clean"), "regex": r"legacy-pdf(?s:.*)invoice\.pdf"},
        {**rule(4, "pdf-tools"), "regex": r"legacy-pdf(?s:.*)since v1\.2"},
    ]
    new_arm = [rule(1, "pdf-tools"), rule(2, "pdf-tools"), rule(3, "answer"), rule(4, "answer"), rule(5, "answer")]
    server.set_scenario({"rules": [*old_arm, *new_arm], "default": {"text": "(no script)"}})

    result = env.run(repo, "pdf-tools", "--triggers", "--trigger-turns", "1", "--compare", old.stdout.strip())
    assert result.code == 3, result.stdout + result.stderr
    doc, text = reports(env.out, "pdf-tools", result.run_id)
    (change,) = doc["triggers"]["changes"]
    # Positives 1, 2, 3: differences 0, +1, 0 -> +1/3; negatives 4, 5: -1, 0 -> -1/2.
    assert change["recall"]["difference"] == pytest.approx(1 / 3)
    assert change["false_trigger"]["difference"] == pytest.approx(-0.5)
    assert (change["recall"]["queries"], change["false_trigger"]["queries"]) == (3, 2)
    assert "triggers pdf-tools vs baseline@" in result.stdout and "recall +33.3 pts" in result.stdout
    assert "Against the earlier description" in text
    assert doc["comparisons"] == []  # no behavioural comparison of assertion-less arms
    # Each arm named, the baseline's own figures beside the current ones; no behavioural 0/0 anywhere.
    ref = f"baseline@{old.stdout.strip()}"
    assert f"skill: pdf-tools [{ref}, triggers]  queries: 5" in result.stdout
    assert f"triggers pdf-tools (openai/exec-a) [{ref}]: recall 1/3 (33.3%" in result.stdout
    assert f"| {ref} | openai/exec-a (agent) | 1/3 (33.3%" in text
    page = next(env.out.glob("*.html")).read_text()
    for shown in (result.stdout, text, page, next(env.out.glob("*.junit.xml")).read_text()):
        assert "0/0" not in shown and "Old vs new" not in shown


def test_bad_trigger_corpora_are_named_by_validate_and_the_dry_run_and_json_plans_the_rest(
    env: Env, tmp_path: Path
) -> None:
    repo = trigger_repo(tmp_path / "repo")
    only_positive = {
        "skill_name": "csv-clean",
        "triggers": [{"id": 1, "query": "dedupe a.csv", "should_trigger": True}],
    }
    (repo / "evals" / "csv-clean.triggers.json").write_text(json.dumps(only_positive))
    (repo / "evals" / "release-notes.triggers.json").write_text("{not json")

    checked = env.cli("validate", "--all-evals", "--repo", str(repo))
    assert checked.code == 2, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert "BLOCKED_BAD_CORPUS: evals/csv-clean.triggers.json: $.triggers: has no negative" in lines[0]
    assert "OK evals/pdf-tools.triggers.json: 5 queries (3 positive, 2 negative)" in lines[1]
    assert lines[2].startswith("BLOCKED_BAD_CORPUS: evals/release-notes.triggers.json: $: not JSON")
    assert "Traceback" not in checked.stderr

    named = env.cli("run", "csv-clean", "--triggers", "--dry-run", "--repo", str(repo))
    assert named.code == 2 and "BLOCKED_BAD_CORPUS: evals/csv-clean.triggers.json" in named.stderr

    dry = env.cli("run", "--all-evals", "--triggers", "--dry-run", "--json", "--model", "openai/m", "--repo", str(repo))
    assert dry.code == 3, dry.stdout + dry.stderr  # WARN: two corpora skipped, one planned
    plan = json.loads(dry.stdout)
    assert [c["skill"] for c in plan["triggers"]] == ["pdf-tools"]
    assert plan["estimate"]["max_model_calls"] == 15 and plan["estimate"]["judge_calls"] == 0
    assert len(plan["skipped"]) == 2


def test_a_query_that_fires_in_some_epochs_only_is_flagged_flaky(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = trigger_repo(tmp_path / "repo")
    load = {"tool_calls": [{"name": "load_skill", "arguments": {"name": "pdf-tools"}}]}
    # A model that loads the skill for report.pdf half the time (the draws are seeded: no test flakiness).
    coin = {
        "name": "coin",
        "tools": True,
        "contains": "report.pdf",
        "replies": [{"pick": [{"weight": 1, "reply": load}, {"weight": 1, "reply": {"text": "I will just do it."}}]}],
    }
    server.set_scenario({"rules": [coin], "default": {"text": "(no skill needed)"}, "seed": 0})

    result = env.run(repo, "pdf-tools", "--triggers", "--trigger-turns", "1", "--epochs", "4")
    assert result.code == 3, result.stdout + result.stderr
    doc, text = reports(env.out, "pdf-tools", result.run_id)
    (f,) = doc["triggers"]["figures"]
    query = next(q for q in f["queries"] if q["case_id"] == 1)
    assert query["runs"] == 4 and 0 < query["fired"] < 4 and query["flaky"] is True
    assert [q["case_id"] for q in f["queries"] if q["flaky"]] == [1]
    assert "| 1: Pull the text out of report.pdf please | yes |" in text and "FLAKY" in text
