"""Shared set-up of a real harness's end-to-end tests: the scripted replies and judge rules
every harness's test builds, named by the harness's own shell tool.

A harness's test module makes one :class:`HarnessScript` with its shell tool's name and
reads its canary rule, its commands, its probe of the sandbox and its judge rules from it;
what differs between harnesses (the skill tool, the wire protocol of a forged request) stays
in the test module.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from harnesses.base import FORWARDER_PORT, PLACEHOLDER_KEY

GREET_SKILL = (
    "---\nname: greet\ndescription: Greets things by writing hello-<thing> with echo.\n---\n"
    "# greet\n\nRun echo hello-<thing>, then say GREET-BODY-MARKER-7731.\n"
)
"""A skill whose body carries a marker: seen in a request, the skill's load reached the model."""
BODY_MARKER = "GREET-BODY-MARKER-7731"
REAL_KEY_MARKERS = ("sk-offline", "real-key")
"""Parts of the real keys the tests hand the producer (the probe counts them in the agent's env)."""
FORGED = 'M=FOR; M="${M}GED-REQ"'
"""A forged request's marker, built at run time: the attack's own text never holds it."""


@dataclass(frozen=True)
class HarnessScript:
    """Scripted replies and judge rules for one harness, by the name of its shell tool."""

    shell_tool: str
    key_env: str
    """The variable holding the placeholder key in the agent's environment."""

    def shell(self, command: str, **extra: Any) -> dict[str, Any]:
        """A reply that runs ``command`` in the harness's shell tool."""
        return {"tool_calls": [{"name": self.shell_tool, "arguments": {"command": command, **extra}}]}

    def shell_ran(self, marker: str) -> dict[str, str]:
        """A judge rule: an assertion naming ``marker`` passes when a shell call ran it."""
        return {
            "assertion_contains": marker,
            "transcript_regex": rf"\[tool_call\] {self.shell_tool}\(.*" + re.escape(marker),
        }

    def output_reached(self, marker: str, output: str) -> dict[str, str]:
        """A judge rule: an assertion naming ``marker`` passes when a shell result shows ``output``
        (what the command printed, not its text)."""
        return {
            "assertion_contains": marker,
            "transcript_regex": rf"\[tool_result\] {self.shell_tool}[^[]*" + re.escape(output),
        }

    def canary_rule(self) -> dict[str, Any]:
        """The canary's script: run the command its prompt quotes, then stop."""
        call = {
            "name": self.shell_tool,
            "arguments": {"description": "canary"},
            "arguments_from": {"command": "```sh\n(.+?)\n```"},
        }
        return {
            "name": "canary",
            "contains": "SKILL-EVAL-CANARY-HEAD-$n",
            "replies": [{"tool_calls": [call]}, {"text": "done"}],
        }

    def probe(self) -> str:
        """A command printing how many real keys the agent's env holds (0), whether the
        placeholder is there (1), and whether the network answers (``net-000net-down``)."""
        return "; ".join(
            [
                "env | grep -c " + " ".join(f"-e {m}" for m in REAL_KEY_MARKERS) + " || true",
                f"env | grep -c {self.key_env}={PLACEHOLDER_KEY}",
                "(curl -s -m 3 -o /dev/null -w 'net-%{http_code}' http://1.1.1.1/ || echo net-down)",
            ]
        )


def chat_attack(label_bodies: list[tuple[str, dict[str, Any]]]) -> str:
    """A shell script that posts each body to the proxy's chat completions with the placeholder
    key and an extra header, printing ``<label> <status>``; ``@M@`` in a body is the forged marker."""
    lines = [
        FORGED,
        f"c() {{ curl -s -o /dev/null -w '%{{http_code}}' -H 'authorization: Bearer {PLACEHOLDER_KEY}' "
        "-H 'content-type: application/json' -H 'x-extra: 1' "
        f'"$@" http://127.0.0.1:{FORWARDER_PORT}/v1/chat/completions; }}',
    ]
    for label, body in label_bodies:
        data = json.dumps(body).replace("@M@", "'\"$M\"'")
        lines.append(f"echo \"{label} $(c -d '{data}')\"")
    return "\n".join(lines)


def chat(model: str, text: str, **extra: Any) -> dict[str, Any]:
    """A chat completions body of one user message."""
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}
