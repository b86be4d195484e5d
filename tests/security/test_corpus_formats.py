"""Every corpus format is read the same safe way, through the real ``skill-eval validate --all-evals``.

* a skill-creator ``skills/demo/evals`` folder, or a plugin case's ``graders`` folder, linking
  to a host folder: the host file is never parsed, nothing of it appears in any output, the
  corpus is ``BLOCKED_BAD_REPO`` and the other corpora are still validated;
* a corpus nested past the depth limit, and one holding a 5,000-digit integer, in each format
  (ours, skill-creator's JSON, a plugin suite's YAML): ``BLOCKED_BAD_CORPUS`` for that corpus
  only (these were ``INFRA_ERROR`` crashes that stopped every other corpus);
* a repeated key, in each format: ``BLOCKED_BAD_CORPUS`` naming it, never the last value silently used.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from producer.corpus.interop_mocks import MAX_FILE_CHARS as MOCK_FILE_CHARS
from producer.corpus.parse import MAX_INT_DIGITS
from producer.corpus.rules import MAX_CORPUS_BYTES, MAX_CORPUS_DEPTH
from schemas.status import ExitCode
from tests.security.harness import case, make_repo

SECRET = "HOST-SECRET-VALUE-7f3a"
HOST_KEY = "HOST-KEY-NAME-c41d"
GOOD = "good"
GOOD_LINE = f"OK evals/{GOOD}.evals.json"
HUGE = "1" + "0" * 4999


def _validate(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "producer", "validate", "--all-evals", "--repo", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _repo(tmp_path: Path) -> Path:
    """A repo with one valid corpus of our own, the one every test expects still validated."""
    cases = [case(1, "p", ["runs git status first"]), case(2, "q", ["runs git log before anything else"])]
    return make_repo(tmp_path / "repo", GOOD, cases, commit=False)


def _skill(root: Path, name: str) -> Path:
    folder = root / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"# {name}\n\nDo what the user asks.\n")
    return folder


def _plugin(root: Path, case_yaml: str | None = None) -> Path:
    """Make ``root`` a plugin whose suite has one case, ``evals/greet/``, for the skill ``greeter``."""
    _skill(root, "greeter")
    (root / ".claude-plugin").mkdir()
    (root / ".claude-plugin" / "plugin.json").write_text('{"name": "p"}')
    greet = root / "evals" / "greet"
    (greet / "graders").mkdir(parents=True)
    if case_yaml is None:
        (greet / "prompt.md").write_text("---\nskill: greeter\n---\nPlease greet Ada.\n")
        (greet / "graders" / "ran.md").write_text("---\ntype: llm\n---\nThe agent runs echo in the shell\n")
    else:
        (greet / "case.yaml").write_text(case_yaml)
    return greet


def _host_folder(tmp_path: Path, name: str, text: str) -> Path:
    host = tmp_path / "host"
    host.mkdir()
    (host / name).write_text(text)
    return host


def _assert_named(done: subprocess.CompletedProcess[str], line: str) -> None:
    out = done.stdout + done.stderr
    assert done.returncode == ExitCode.BLOCKED, out
    assert line in out, out
    assert GOOD_LINE in done.stdout, out  # --all-evals went on with the other corpus
    assert "Traceback" not in out and "INFRA_ERROR" not in out, out


def test_a_skill_creator_evals_folder_linking_to_the_host_is_never_read(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    host = _host_folder(tmp_path, "evals.json", json.dumps({"skill_name": SECRET, HOST_KEY: [SECRET]}))
    (_skill(root, "demo") / "evals").symlink_to(host)
    done = _validate(root)
    _assert_named(done, "BLOCKED_BAD_REPO: skills/demo/evals/evals.json: is a link out of the repo")
    assert SECRET not in done.stdout + done.stderr and HOST_KEY not in done.stdout + done.stderr


def test_a_plugin_case_graders_folder_linking_to_the_host_is_never_read(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    greet = _plugin(root)
    host = _host_folder(tmp_path, "x.md", f"---\ntype: {SECRET}\n{HOST_KEY}: 1\n---\n{SECRET}\n")
    (greet / "graders" / "ran.md").unlink()
    (greet / "graders").rmdir()
    (greet / "graders").symlink_to(host)
    done = _validate(root)
    _assert_named(done, "BLOCKED_BAD_REPO: evals/greet/graders: is a link out of the repo")
    assert SECRET not in done.stdout + done.stderr and HOST_KEY not in done.stdout + done.stderr


def _ours(root: Path, value: str) -> str:
    (root / "skills" / "ours").mkdir()
    (root / "skills" / "ours" / "SKILL.md").write_text("# ours\n")
    text = json.dumps({"skill_name": "ours", "evals": [case(1, "p", ["runs git status first"], id="ID")]})
    (root / "evals" / "ours.evals.json").write_text(text.replace('"ID"', value))
    return "evals/ours.evals.json"


def _creator(root: Path, value: str) -> str:
    folder = _skill(root, "demo") / "evals"
    folder.mkdir()
    doc = {"skill_name": "demo", "evals": [{"id": "ID", "prompt": "p", "expectations": ["runs git status first"]}]}
    (folder / "evals.json").write_text(json.dumps(doc).replace('"ID"', value))
    return "skills/demo/evals/evals.json"


def _plugin_yaml(root: Path, value: str) -> str:
    _plugin(root, f"prompt: hi\nskill: greeter\nmax_turns: {value}\ngraders:\n  - type: llm\n    rubric: runs echo\n")
    return "evals/greet/case.yaml"


FORMATS = {"ours": _ours, "skill-creator": _creator, "plugin-yaml": _plugin_yaml}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("depth", [MAX_CORPUS_DEPTH + 1, 100_000])
def test_a_corpus_nested_too_deep_is_bad_corpus_for_that_corpus_only(tmp_path: Path, fmt: str, depth: int) -> None:
    root = _repo(tmp_path)
    file = FORMATS[fmt](root, "[" * depth + "]" * depth)
    done = _validate(root)
    _assert_named(done, f"BLOCKED_BAD_CORPUS: {file}: ")
    assert f"nested deeper than {MAX_CORPUS_DEPTH} levels" in done.stdout + done.stderr


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_5000_digit_integer_is_bad_corpus_for_that_corpus_only(tmp_path: Path, fmt: str) -> None:
    root = _repo(tmp_path)
    file = FORMATS[fmt](root, HUGE)
    done = _validate(root)
    _assert_named(done, f"BLOCKED_BAD_CORPUS: {file}: $: an integer of 5000 digits; at most {MAX_INT_DIGITS}")


REPEATED = {"ours": '1, "prompt": "EVIL"', "skill-creator": '1, "prompt": "EVIL"', "plugin-yaml": "1\nprompt: EVIL"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_repeated_key_is_bad_corpus_for_that_corpus_only(tmp_path: Path, fmt: str) -> None:
    """A parser keeps the last of two equal keys; a reviewer reads the first: neither is guessed."""
    root = _repo(tmp_path)
    file = FORMATS[fmt](root, REPEATED[fmt])
    done = _validate(root)
    _assert_named(done, f"BLOCKED_BAD_CORPUS: {file}: ")
    assert "repeats the key 'prompt'" in done.stdout + done.stderr


def test_a_plugin_suite_is_held_to_the_one_size_cap_as_a_whole(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _plugin(root)
    for i in range(3):  # each file under the cap, the suite over it
        folder = root / "evals" / f"big-{i}"
        folder.mkdir()
        (folder / "prompt.md").write_text("---\nskill: greeter\n---\n" + "x" * (MAX_CORPUS_BYTES // 2))
    done = _validate(root)
    _assert_named(done, f"BLOCKED_BAD_CORPUS: evals/: $: the suite's files are larger than {MAX_CORPUS_BYTES} bytes")


def _mock_server(root: Path) -> Path:
    """A plugin whose suite has one mocked server, ``evals/mocks/weather/``."""
    _plugin(root)
    server = root / "evals" / "mocks" / "weather"
    server.mkdir(parents=True)
    (server / "_tools.json").write_text(json.dumps({"tools": [{"name": "get_forecast"}]}))
    (server / "get_forecast.md").write_text("---\ntype: fixed\n---\nsunny\n")
    return server


@pytest.mark.parametrize("linked", ["evals/mocks", "evals/mocks/weather"])
def test_a_mocks_folder_linking_to_the_host_is_never_read(tmp_path: Path, linked: str) -> None:
    root = _repo(tmp_path)
    _mock_server(root)
    host = _host_folder(tmp_path, "_tools.json", json.dumps({"tools": [{"name": SECRET, HOST_KEY: 1}]}))
    (host / "get_forecast.md").write_text(f"---\ntype: fixed\n---\n{SECRET}\n")
    if linked == "evals/mocks":
        (host / "weather").mkdir()
        (host / "_tools.json").rename(host / "weather" / "_tools.json")
    shutil.rmtree(root / linked)
    (root / linked).symlink_to(host)
    done = _validate(root)
    _assert_named(done, f"BLOCKED_BAD_REPO: {linked}: is a link out of the repo")
    assert SECRET not in done.stdout + done.stderr and HOST_KEY not in done.stdout + done.stderr


def test_a_mock_file_linking_to_the_host_is_never_read(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    server = _mock_server(root)
    host = _host_folder(tmp_path, "answer.md", f"---\n{HOST_KEY}: 1\n---\n{SECRET}\n")
    (server / "get_forecast.md").unlink()
    (server / "get_forecast.md").symlink_to(host / "answer.md")
    done = _validate(root)
    _assert_named(done, "BLOCKED_BAD_CORPUS: evals/mocks/weather/get_forecast.md: $: is a symbolic link")
    assert SECRET not in done.stdout + done.stderr and HOST_KEY not in done.stdout + done.stderr


MOCK_FILES = {
    "_tools.json": lambda value: json.dumps({"tools": [{"name": "get_forecast", "inputSchema": {"x": "V"}}]}).replace(
        '"V"', value
    ),
    "get_forecast.md": lambda value: f"---\ntype: fixed\ndescription: {value}\n---\nsunny\n",
}


@pytest.mark.parametrize("name", MOCK_FILES)
@pytest.mark.parametrize("kind", ["deep", "huge"])
def test_a_mock_file_past_the_corpus_limits_is_bad_corpus_for_that_corpus_only(
    tmp_path: Path, name: str, kind: str
) -> None:
    root = _repo(tmp_path)
    server = _mock_server(root)
    value = "[" * (MAX_CORPUS_DEPTH + 1) + "]" * (MAX_CORPUS_DEPTH + 1) if kind == "deep" else HUGE
    (server / name).write_text(MOCK_FILES[name](value))
    done = _validate(root)
    _assert_named(done, f"BLOCKED_BAD_CORPUS: evals/mocks/weather/{name}: ")
    problem = f"nested deeper than {MAX_CORPUS_DEPTH} levels" if kind == "deep" else "an integer of 5000 digits"
    assert problem in done.stdout + done.stderr


def test_the_mock_files_count_toward_the_suites_one_size_cap(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    server = _mock_server(root)
    each = MOCK_FILE_CHARS - 100
    for i in range(MAX_CORPUS_BYTES // each + 1):  # each mock under its own cap, the suite over the one cap
        (server / f"tool_{i}.md").write_text("---\ntype: fixed\n---\n" + "x" * each)
    done = _validate(root)
    _assert_named(done, f"BLOCKED_BAD_CORPUS: evals/: $: the suite's files are larger than {MAX_CORPUS_BYTES} bytes")
