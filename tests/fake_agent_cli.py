"""A stand-in agent CLI for the external-executor tests: prints Claude Code stream-json.

It reads the executor prompt on stdin, really runs each command (``--run CMD``, repeatable;
without one, the first ```sh block of the prompt) with bash, and reports every command as a
``Bash`` tool_use and its output as a tool_result, as ``claude -p --output-format
stream-json --verbose`` would. Flags make it misbehave the ways the tests need:

--truncate N    keep only the first N characters of each tool result (a lossy runtime)
--junk          interleave non-JSON log lines
--exit N        exit with status N after the stream
--no-result     omit the closing result line (a crash)
--max-turns     end with an error_max_turns result
--echo-prompt   also report the prompt it received as assistant text
"""

import argparse
import json
import re
import subprocess
import sys


def emit(obj):
    print(json.dumps(obj), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", action="append", default=[])
    parser.add_argument("--truncate", type=int, default=None)
    parser.add_argument("--junk", action="store_true")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--no-result", action="store_true")
    parser.add_argument("--max-turns", action="store_true")
    parser.add_argument("--echo-prompt", action="store_true")
    args = parser.parse_args()
    prompt = sys.stdin.read()
    commands = args.run
    if not commands:
        block = re.search(r"```sh\n(.*?)\n```", prompt, re.DOTALL)
        commands = [block.group(1)] if block else []
    emit({"type": "system", "subtype": "init", "session_id": "fake", "model": "fake-agent", "tools": ["Bash"]})
    if args.echo_prompt:
        text = {"type": "text", "text": prompt}
        emit({"type": "assistant", "message": {"id": "m0", "role": "assistant", "content": [text]}})
    for n, command in enumerate(commands, start=1):
        if args.junk:
            print("[fake-agent] thinking about step", n, file=sys.stderr, flush=True)
        usage = {"input_tokens": 100, "output_tokens": 20}
        use = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": command}}
        emit({"type": "assistant", "message": {"id": f"m{n}", "role": "assistant", "content": [use], "usage": usage}})
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
        output = done.stdout + done.stderr
        if args.truncate is not None:
            output = output[: args.truncate]
        result = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{n}",
            "content": output,
            "is_error": done.returncode != 0,
        }
        emit({"type": "user", "message": {"role": "user", "content": [result]}})
        if args.junk:
            print("not json {", flush=True)
    final = {"type": "text", "text": "done"}
    emit({"type": "assistant", "message": {"id": "mz", "role": "assistant", "content": [final]}})
    if args.max_turns:
        emit({"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": len(commands) + 1})
    elif not args.no_result:
        usage = {"input_tokens": 100 * len(commands), "output_tokens": 20 * len(commands)}
        emit(
            {"type": "result", "subtype": "success", "is_error": False, "num_turns": len(commands) + 1, "usage": usage}
        )
    sys.exit(args.exit)


main()
