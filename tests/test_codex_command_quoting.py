"""The real Codex binary's report of each command it ran claims exactly the command its model sent.

Codex (0.169) joins the argv it ran (``/bin/bash -lc <command>``) with quoting of its own, cut
into single-quoted, double-quoted and bare chunks; these commands hold every character that
quoting treats apart, and keys Codex redacts in its report. Each runs in a temporary folder
(outside any sandbox: they only print and write files there).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harnesses.codex import Codex
from harnesses.shell_words import runs_command
from testkit.offline_server import OfflineModelServer
from worker.executor.harness_binary import find_binary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

COMMANDS = [
    "printf '%s\\n' \"a \\\"b\\\" \\$HOME `echo x`\" 'it'\"'\"'s'",
    'cat > f.py <<\'PYEOF\'\nbody = {"model": "x", "t": "$s go\\n"}\nprint(body)\nPYEOF\necho tidy',
    "echo 'single' && echo \"dbl $((1+2))\" \\\n  && echo back\\\\slash",
    "echo hi!; echo ^caret; echo 'a\tb'; echo ''",
    "mv missing /tmp/nowhere-r2 2>/dev/null || echo \"$(printf '%s' \"nested 'q'\")\"",
    # Codex reports these with the key redacted.
    "echo sk-abcdefghijklmnopqrstuvwxyz123456 done; echo AKIAABCDEFGHIJKLMNOP",
    'cat > f2.py <<\'PYEOF\'\nh = {"authorization": "Bearer sk-skill-eval-placeholder-not-a-key"}\n'
    'print("$s\\n")\nPYEOF\nmv f2.py gone.py && echo tidy',
]


def test_every_command_codex_reports_running_is_the_one_its_model_sent(tmp_path: Path) -> None:
    replies = [{"tool_calls": [{"name": "exec_command", "arguments": {"cmd": c}}]} for c in COMMANDS]
    rules = [{"contains": "QUOTE-CHECK", "replies": [*replies, {"text": "done"}]}]
    server = OfflineModelServer({"rules": rules, "judge": [], "default": {"text": "(scripted) no script."}})
    base = server.start()
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    (home / ".codex").mkdir(parents=True)
    provider = f'{{name="skill-eval", base_url="{base}", env_key="K", wire_api="responses"}}'
    argv = [str(find_binary(Codex())), "exec", "--json", "--dangerously-bypass-approvals-and-sandbox"]
    argv += ["--skip-git-repo-check", "--ephemeral", "-C", str(workspace), "-m", "scripted-x"]
    argv += ["-c", "model_provider=skill-eval", "-c", f"model_providers.skill-eval={provider}"]
    argv += ["-c", "analytics.enabled=false", "-c", 'web_search="disabled"', "-"]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "K": "x"}
    out = subprocess.run(argv, input="QUOTE-CHECK\n", capture_output=True, text=True, env=env, timeout=240)
    items = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    reported = [
        i["item"]["command"]
        for i in items
        if i.get("type") == "item.completed" and i["item"].get("type") == "command_execution"
    ]
    assert len(reported) == len(COMMANDS), out.stdout[-2000:] + out.stderr[-2000:]
    for sent, line in zip(COMMANDS, reported, strict=True):
        assert runs_command(sent, line), (sent, line)
        assert not runs_command(sent + " ", line) and not runs_command(sent.split()[0], line)
