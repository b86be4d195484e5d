"""A corpus or trigger set is checked in bounded memory and time, and a repeated key is refused.

* one long key over a long list (a few MB of file) once built a path string per element, so
  an 8 MB corpus grew the process to gigabytes; the check now holds a few frames and stops
  past :data:`MAX_CORPUS_VALUES` values with ``BLOCKED_BAD_CORPUS`` naming the file;
* ``{"query": "benign", "query": "EVIL"}`` validated and silently used the last value.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from producer.corpus.parse import parse_json, parse_yaml
from producer.corpus.repo import Repo
from producer.corpus.rules import MAX_CORPUS_BYTES, MAX_CORPUS_VALUES, depth_problem
from producer.corpus.triggers import read_triggers
from schemas.errors import BadCorpus
from tests.security.harness import make_repo

LONG_KEY = "K" * (1024 * 1024)


def _flood(values: int, key: str = LONG_KEY) -> str:
    """``{"<key>": [0, 0, ...]}``: the shape that multiplied memory."""
    text = '{"' + key + '": [' + ",".join("0" * values) + "]}"
    assert len(text) < MAX_CORPUS_BYTES
    return text


def test_a_long_key_over_a_list_is_checked_in_bounded_memory() -> None:
    data = {"K" * 65_536: [0] * 3_000}  # a path per element was 3,000 x 64 KiB
    tracemalloc.start()
    try:
        assert depth_problem(data) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024


def test_too_many_values_is_bad_corpus_with_a_short_path() -> None:
    with pytest.raises(BadCorpus) as caught:
        parse_json(_flood(MAX_CORPUS_VALUES + 10), "evals/dos.evals.json")
    text = str(caught.value)
    assert text.startswith("BLOCKED_BAD_CORPUS: evals/dos.evals.json: $.KKK")
    assert f"more than {MAX_CORPUS_VALUES} values" in text and len(text) < 300


def test_too_many_values_in_a_plugin_yaml_is_bad_corpus() -> None:
    text = "max_turns: [" + ",".join("0" * (MAX_CORPUS_VALUES + 10)) + "]\n"
    with pytest.raises(BadCorpus, match=f"evals/x/case.yaml: case.yaml: more than {MAX_CORPUS_VALUES} values"):
        parse_yaml(text, "evals/x/case.yaml", "case.yaml")


def _limit_memory() -> None:
    """A gigabyte of address space: far above what checking a few MB costs, far below the old cost."""
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_validate_refuses_a_flooding_corpus_by_name_within_a_memory_limit(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", "dos", [], commit=False)
    (root / "evals" / "dos.evals.json").write_text(_flood(MAX_CORPUS_VALUES + 10))
    done = subprocess.run(
        [sys.executable, "-m", "producer", "validate", "--repo", str(root), "dos"],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )
    out = done.stdout + done.stderr
    assert "BLOCKED_BAD_CORPUS: evals/dos.evals.json: $.KKK" in out, out[-2000:]
    assert "INFRA_ERROR" not in out and "MemoryError" not in out


def test_a_flooding_trigger_set_is_bad_corpus_in_bounded_memory(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", "dos", [], commit=False)
    (root / "evals" / "dos.triggers.json").write_text(_flood(MAX_CORPUS_VALUES + 10))
    tracemalloc.start()
    try:
        with pytest.raises(BadCorpus, match=r"evals/dos.triggers.json: \$\.K+…\[\d+\]: more than"):
            read_triggers(Repo(root), "evals/dos.triggers.json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024  # the parsed list and the text; nothing per element beyond


def test_a_repeated_key_in_a_trigger_set_is_refused_by_name(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", "dos", [], commit=False)
    (root / "evals" / "dos.triggers.json").write_text(
        '[{"query": "benign", "query": "EVIL", "should_trigger": true}, {"query": "other", "should_trigger": false}]'
    )
    with pytest.raises(BadCorpus, match=r"evals/dos.triggers.json: \$: an object repeats the key 'query'"):
        read_triggers(Repo(root), "evals/dos.triggers.json")


def test_a_repeated_key_in_a_corpus_is_refused_by_validate(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", "dos", [], commit=False)
    good = json.dumps({"skill_name": "dos", "evals": []})
    (root / "evals" / "dos.evals.json").write_text(good[:-1] + ', "skill_name": "other"}')
    done = subprocess.run(
        [sys.executable, "-m", "producer", "validate", "--repo", str(root), "dos"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "BLOCKED_BAD_CORPUS: evals/dos.evals.json: $: an object repeats the key 'skill_name'" in done.stdout
