"""Corpora from the ecosystem: skill-creator's evals.json and Claude Code plugin eval suites."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from producer.corpus.repo import Repo
from schemas.checks_plugin import JudgedCheck
from schemas.errors import BadCorpus
from worker.workspace import materialize_workspace

GOOD = "The agent runs the greeting script in the shell"


def skill_repo(root: Path, skill: str = "greeter") -> Path:
    (root / "skills" / skill / "evals" / "files").mkdir(parents=True)
    (root / "skills" / skill / "SKILL.md").write_text("---\nname: greeter\n---\nGreet.\n")
    (root / "skills" / skill / "evals" / "files" / "names.csv").write_text("ada\n")
    return root


def write_creator(root: Path, doc: object, skill: str = "greeter") -> None:
    (root / "skills" / skill / "evals" / "evals.json").write_text(json.dumps(doc))


CREATOR = {
    "skill_name": "greeter",
    "evals": [
        {
            "id": 1,
            "prompt": "Greet everyone in the list",
            "expected_output": "a greeting per name",
            "files": ["evals/files/names.csv"],
            "expectations": [
                GOOD,
                {"text": "The agent runs cat on names.csv in the shell", "passed": True, "evidence": "x"},
            ],
        },
        {"id": 2, "prompt": "Greet Ada", "assertions": ["The agent runs echo hello in the shell"]},
    ],
}


def test_a_skill_creator_file_is_read_as_a_corpus_with_files_relative_to_the_skill(tmp_path: Path) -> None:
    root = skill_repo(tmp_path)
    write_creator(root, CREATOR)
    repo = Repo(root)
    assert repo.targets(["greeter"], False) == ["skills/greeter/evals/evals.json"]
    bundle = repo.load("skills/greeter/evals/evals.json")
    first, second = bundle.corpus.evals
    assert first.files == ("skills/greeter/evals/files/names.csv",)
    assert first.assertions == (
        GOOD,
        "The agent runs cat on names.csv in the shell",
    )  # a graded copy's verdict is ignored
    assert second.expected_output.startswith("(not given")
    assert bundle.graded_paths == ("skills/greeter/evals/evals.json",)
    assert repo.all_corpus_files() == ["skills/greeter/evals/evals.json"]  # a repo with no root evals/ still runs


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["evals"][0].pop("expectations"), "$.evals[0]: missing key expectations"),
        (lambda d: d["evals"][0].update(id="one"), "$.evals[0].id: 'one' is not an integer"),
        (
            lambda d: d["evals"][0].update(files=["../../../etc/passwd"]),
            "$.evals[0].files[0]: '../../../etc/passwd' leaves",
        ),
        (lambda d: d.update(skill_name="other"), "$.skill_name: 'other' does not name the skill folder"),
        (lambda d: d["evals"][1].update(assertions=["works well"]), "$.evals[1].assertions[0]: is 10 characters"),
        (lambda d: d["evals"][0]["expectations"].append("it works"), "$.evals[0].expectations[2]: is 8 characters"),
        (lambda d: d["evals"][0]["expectations"].append({"passed": True}), "$.evals[0].expectations[2].text"),
        (lambda d: d["evals"].pop(), "$.evals: has 1 case; at least 2"),
    ],
)
def test_a_bad_skill_creator_file_gets_a_named_error_at_the_field(tmp_path: Path, change, where: str) -> None:  # type: ignore[no-untyped-def]
    root = skill_repo(tmp_path)
    doc = json.loads(json.dumps(CREATOR))
    change(doc)
    write_creator(root, doc)
    with pytest.raises(BadCorpus) as info:
        Repo(root).load("skills/greeter/evals/evals.json")
    assert str(info.value).startswith("BLOCKED_BAD_CORPUS: skills/greeter/evals/evals.json: ")
    assert where in str(info.value)


def test_the_skill_creator_file_is_stripped_from_the_workspace_but_its_input_files_stay(tmp_path: Path) -> None:
    root = skill_repo(tmp_path / "repo")
    write_creator(root, CREATOR)
    bundle = Repo(root).load("skills/greeter/evals/evals.json")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(root, store)
    with materialize_workspace(
        store,
        key,
        skill="greeter",
        case=bundle.corpus.evals[0],
        parent=tmp_path / "ws",
        cache_dir=tmp_path / "c",
        graded_paths=bundle.graded_paths,
    ) as ws:
        assert not (ws.path / "skills" / "greeter" / "evals" / "evals.json").exists()
        assert (ws.path / "skills" / "greeter" / "evals" / "files" / "names.csv").read_text() == "ada\n"
        assert (ws.path / "skills" / "greeter" / "SKILL.md").exists()


def test_a_graded_path_that_escapes_the_workspace_is_refused(tmp_path: Path) -> None:
    root = skill_repo(tmp_path / "repo")
    write_creator(root, CREATOR)
    bundle = Repo(root).load("skills/greeter/evals/evals.json")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(root, store)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    from schemas.errors import NoIsolation

    with (
        pytest.raises(NoIsolation),
        materialize_workspace(
            store,
            key,
            skill="greeter",
            case=bundle.corpus.evals[0],
            parent=tmp_path / "ws",
            cache_dir=tmp_path / "c",
            graded_paths=("../../victim.txt",),
        ),
    ):
        pass
    assert victim.read_text() == "keep me"


# --- Claude Code plugin eval suites --------------------------------------------------------------
def plugin_repo(root: Path) -> Path:
    skill_repo(root)
    (root / ".claude-plugin").mkdir()
    (root / ".claude-plugin" / "plugin.json").write_text('{"name": "greeter-plugin"}')
    greet = root / "evals" / "greet-ada"
    (greet / "graders").mkdir(parents=True)
    (greet / "prompt.md").write_text("---\nmax_turns: 12\nallowed_tools: [Bash, Read]\n---\nPlease greet Ada.\n")
    (greet / "graders" / "ran.md").write_text(f"---\ntype: llm\nweight: 2\n---\n{GOOD}\n")
    wave = root / "evals" / "wave"
    wave.mkdir()
    (wave / "case.yaml").write_text(
        "execution:\n  prompt: Wave at the team\nmax_turns: 5\n"
        "graders:\n  - type: llm\n    rubric: The agent runs the wave command in the shell\n"
    )
    return root


def test_a_plugin_suite_is_read_as_the_corpus_of_the_plugins_skill(tmp_path: Path) -> None:
    root = plugin_repo(tmp_path)
    repo = Repo(root)
    [name] = repo.targets(["greeter"], False)
    assert name == "evals/*/ [plugin suite: greeter]"
    bundle = repo.load(name)
    greet, wave = bundle.corpus.evals
    assert (greet.id, greet.prompt, greet.assertions) == (1, "Please greet Ada.", (JudgedCheck(text=GOOD, weight=2),))
    assert (greet.max_turns, greet.allowed_tools) == (12, ("Bash", "Read"))
    assert (wave.id, wave.prompt, wave.max_turns, wave.allowed_tools) == (2, "Wave at the team", 5, None)
    assert bundle.graded_paths == ("evals/greet-ada", "evals/wave")


@pytest.mark.parametrize(
    ("path", "text", "message"),
    [
        (
            "greet-ada/graders/ran.md",
            "---\ntype: regex\nglob: hi\n---\nx\n",
            "evals/greet-ada/graders/ran.md: front matter: unexpected key glob for a regex grader",
        ),
        (
            "greet-ada/graders/ran.md",
            "---\ntype: tool_used\ntool: Skill\narm: with-only\n---\n",
            "evals/greet-ada/graders/ran.md: front matter.arm: 'with-only': only graders of both arms",
        ),
        (
            "greet-ada/graders/ran.md",
            "---\ntype: baseline\n---\nhi\n",
            "evals/greet-ada/graders/ran.md: front matter.baseline_file: a baseline grader names its reference",
        ),
        (
            "greet-ada/graders/ran.md",
            "---\ntype: baseline\nbaseline_file: gone.jsonl\n---\nThe agent greets Ada by name\n",
            "evals/greet-ada/graders: baseline_file: 'gone.jsonl' is not a .jsonl file in the case folder",
        ),
        (
            "greet-ada/graders/ran.md",
            "---\ntype: llm\nfocus: everything\n---\nThe agent greets Ada by name\n",
            "evals/greet-ada/graders/ran.md: front matter.focus: 'everything' is not last_message, trace",
        ),
        (
            "greet-ada/graders/ran.md",
            "---\ntype: regex\n---\n(unclosed\n",
            "evals/greet-ada/graders/ran.md: body: is not a valid regular expression",
        ),
        (
            "wave/case.yaml",
            "prompt: hi\ncontext:\n  scaffold_script: scaffold.sh\ngraders:\n  - type: regex\n    pattern: hi\n",
            "evals/wave/case.yaml: $.context.scaffold_script: 'scaffold.sh' is not a .sh file in the case folder",
        ),
        (
            "greet-ada/prompt.md",
            "---\nhistory_file: h.jsonl\n---\nhi\n",
            "evals/greet-ada/prompt.md: front matter.history_file: is read under context: only",
        ),
        (
            "greet-ada/graders/ran.md",
            "---\ntype: llm\nweight: -1\n---\nx\n",
            "front matter.weight: -1 is not a positive number",
        ),
        (
            "greet-ada/prompt.md",
            "---\nmax_turns: lots\n---\nhi\n",
            "evals/greet-ada/prompt.md: front matter.max_turns: 'lots'",
        ),
        ("greet-ada/prompt.md", "---\n: [unclosed\n---\nhi\n", "evals/greet-ada/prompt.md: front matter: not YAML"),
        ("wave/case.yaml", "prompt: hi\ngraders: []\n", "evals/wave: graders: a case with no grader cannot be graded"),
        (
            "wave/case.yaml",
            "prompt: hi\nscaffold: rm -rf /\ngraders: []\n",
            "evals/wave/case.yaml: $: unexpected key scaffold",
        ),
    ],
)
def test_a_bad_plugin_case_gets_a_named_error_naming_its_file(
    tmp_path: Path, path: str, text: str, message: str
) -> None:
    root = plugin_repo(tmp_path)
    (root / "evals" / path).write_text(text)
    with pytest.raises(BadCorpus) as info:
        Repo(root).load("evals/*/ [plugin suite: greeter]")
    assert message in str(info.value), str(info.value)


def test_yaml_tags_that_would_build_objects_are_refused(tmp_path: Path) -> None:
    root = plugin_repo(tmp_path)
    (root / "evals" / "wave" / "case.yaml").write_text("prompt: !!python/object/apply:os.system ['touch /tmp/pwned']\n")
    with pytest.raises(BadCorpus, match="not YAML"):
        Repo(root).load("evals/*/ [plugin suite: greeter]")


def test_all_evals_takes_a_plugin_suite_per_skill_with_cases_in_it(tmp_path: Path) -> None:
    root = plugin_repo(tmp_path)
    assert Repo(root).targets([], True) == ["evals/*/ [plugin suite: greeter]"]
    # A second skill: the cases that name no skill belong to neither, so only named cases count ...
    skill_repo(root, "waver")
    (root / "evals" / "wave" / "case.yaml").write_text(
        "skill: waver\nexecution:\n  prompt: Wave at the team\n"
        "graders:\n  - type: llm\n    rubric: The agent runs the wave command in the shell\n"
    )
    assert Repo(root).targets([], True) == ["evals/*/ [plugin suite: waver]"]
    # ... a skill with its own corpus keeps it, and a suite that cannot be read is listed for its error.
    (root / "evals" / "greeter.evals.json").write_text(json.dumps({"skill_name": "greeter", "evals": []}))
    (root / "evals" / "greet-ada" / "prompt.md").write_text("---\n: [unclosed\n---\nhi\n")
    assert Repo(root).targets([], True) == ["evals/greeter.evals.json", "evals/*/ [plugin suite: waver]"]
    (root / "evals" / "greeter.evals.json").unlink()
    outcomes = Repo(root).load_many(Repo(root).targets([], True))
    assert [o.corpus_file for o in outcomes] == ["evals/*/ [plugin suite: greeter]", "evals/*/ [plugin suite: waver]"]
    assert all(o.error is not None and "not YAML" in str(o.error) for o in outcomes)


def test_skill_eval_validate_reads_both_formats(tmp_path: Path) -> None:
    creator = skill_repo(tmp_path / "creator")
    write_creator(creator, CREATOR)
    plugin = plugin_repo(tmp_path / "plugin")
    for root, corpus in ((creator, "skills/greeter/evals/evals.json"), (plugin, "evals/*/ [plugin suite: greeter]")):
        done = subprocess.run(
            [sys.executable, "-m", "producer.commands.cli", "validate", "greeter", "--repo", str(root)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"OK {corpus}: 2 cases, " in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_skill_creator_corpus_runs_end_to_end_and_the_agent_cannot_read_it(tmp_path: Path) -> None:
    from testkit.offline_server import OfflineModelServer
    from tests.conftest import git

    root = skill_repo(tmp_path / "repo")
    doc = {
        "skill_name": "greeter",
        "evals": [
            {
                "id": i,
                "prompt": f"Greet the names (case {i})",
                "expected_output": "greetings",
                "files": ["evals/files/names.csv"],
                "expectations": ["The agent runs cat on the eval file in the shell"],
            }
            for i in (1, 2)
        ],
    }
    write_creator(root, doc)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "skill with skill-creator evals")
    scenario = {
        "rules": [
            {
                "tools": True,
                "contains": "Greet the names",
                "replies": [
                    {
                        "tool_calls": [
                            {
                                "name": "shell",
                                "arguments": {
                                    "command": "cat skills/greeter/evals/evals.json; "
                                    "cat skills/greeter/evals/files/names.csv"
                                },
                            }
                        ]
                    },
                    {"text": "done"},
                ],
            }
        ],
        # Passes only if the graded file was readable in the workspace: it must not be.
        "judge": [{"assertion_contains": "cat on the eval file", "transcript_regex": r"expectations"}],
    }
    with OfflineModelServer(scenario) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "producer.commands.cli",
                "run",
                "greeter",
                "--repo",
                str(root),
                "--model",
                "openai/exec",
                "--judge",
                "openai/judge",
                "--api-base",
                server.base_url,
                "--no-calibration",
                "--out",
                str(tmp_path / "reports"),
                "--store",
                str(tmp_path / "store"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**__import__("os").environ, "SKILL_EVAL_RUN_LOG": str(tmp_path / "runs.log")},
        )
        tool_results = [json.dumps(r) for r in server.requests() if r.get("tools")]
    assert "skill: greeter [current]  cases: 2  result: 0/2 (0.0%)" in done.stdout, done.stdout + done.stderr
    # Every assertion failed: FAIL and exit 1 without any --fail-under (the default threshold is 1.0).
    assert done.returncode == 1 and done.stdout.rstrip().endswith("verdict: FAIL"), done.stdout[-1000:]
    assert any("No such file" in t for t in tool_results)  # the graded file is gone ...
    assert any("ada" in t for t in tool_results)  # ... its input files are not
    # The expectation's text lives only in the graded file: no executor request may carry it.
    assert not any("cat on the eval file" in t for t in tool_results)


def test_all_evals_in_a_plugin_repo_whose_skills_folder_leaves_the_repo_is_a_named_error(tmp_path: Path) -> None:
    outside = skill_repo(tmp_path / "outside", "stranger")
    (outside / "skills" / "stranger" / "SKILL.md").write_text("secret skill text\n")
    root = plugin_repo(tmp_path / "repo")
    shutil.rmtree(root / "skills")
    (root / "skills").symlink_to(outside / "skills")
    repo = Repo(root)
    outcomes = repo.load_many(repo.targets([], True))
    [outcome] = outcomes  # listed, not silently dropped ...
    assert outcome.bundle is None  # ... and nothing outside the repo is read into a bundle
    assert str(outcome.error).startswith("BLOCKED_BAD_REPO: skills/stranger/")


def test_every_violation_of_a_plugin_suite_is_named_in_one_pass(tmp_path: Path) -> None:
    """Four faults in four files of the suite: `validate` prints one line for each, not the first."""
    root = plugin_repo(tmp_path)
    (root / "evals" / "wave" / "case.yaml").write_text(
        "prompt: Wave at the team\ngrader: oops\ngraders:\n  - type: llm\n    rubric: The agent runs the wave command\n"
    )
    (root / "evals" / "greet-ada" / "prompt.md").write_text("---\nmax_turns: lots\n---\nPlease greet Ada.\n")
    (root / "evals" / "greet-ada" / "graders" / "edit.md").write_text(
        f"---\ntype: llm\nfocus: everything\n---\n{GOOD}\n"
    )
    (root / "evals" / "greet-ada" / "graders" / "re.md").write_text('---\ntype: regex\npattern: "fix(ed"\n---\n')
    done = subprocess.run(
        [sys.executable, "-m", "producer.commands.cli", "validate", "greeter", "--repo", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("BLOCKED_BAD_CORPUS: ")]
    expected = [
        "evals/wave/case.yaml: $: unexpected key grader",
        "evals/greet-ada/prompt.md: front matter.max_turns: 'lots' is not a positive integer",
        "evals/greet-ada/graders/edit.md: front matter.focus: 'everything' is not",
        "evals/greet-ada/graders/re.md: front matter.pattern: is not a valid regular expression",
    ]
    for part in expected:
        assert sum(part in line for line in lines) == 1, (part, lines)


def test_every_problem_of_one_grader_file_is_named_in_one_pass(tmp_path: Path) -> None:
    """A bad weight, an unknown target and a pattern (in the body) that does not compile: three lines."""
    root = plugin_repo(tmp_path)
    (root / "evals" / "greet-ada" / "graders" / "ran.md").write_text(
        "---\ntype: regex\nweight: -3\ntarget: nowhere\n---\n(unclosed\n"
    )
    with pytest.raises(BadCorpus) as info:
        Repo(root).load("evals/*/ [plugin suite: greeter]")
    file = "BLOCKED_BAD_CORPUS: evals/greet-ada/graders/ran.md"
    lines = str(info.value).splitlines()
    assert f"{file}: front matter.weight: -3 is not a positive number" in lines
    targets = "last_message, trace, transcript, files, mock_calls or {source: file, path}"
    assert f"{file}: front matter.target: 'nowhere' is not {targets}" in lines
    assert any(line.startswith(f"{file}: body: is not a valid regular expression") for line in lines), lines


def test_a_plugin_suite_flooded_with_violations_lists_a_screenful_and_counts_the_rest(tmp_path: Path) -> None:
    root = plugin_repo(tmp_path)
    for i in range(80):
        (root / "evals" / "greet-ada" / "graders" / f"bad-{i:02}.md").write_text("---\ntype: nonsense\n---\nx\n")
    with pytest.raises(BadCorpus) as info:
        Repo(root).load("evals/*/ [plugin suite: greeter]")
    lines = str(info.value).splitlines()
    assert len(lines) == 51, lines[-3:]
    assert lines[-1].endswith("and 30 more violations not listed")
    assert "bad-00.md: front matter.type: 'nonsense' is not a grader kind" in lines[0]
