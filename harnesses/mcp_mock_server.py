"""A mocked MCP server over stdio, run inside the sandbox in place of a repo's MCP server.

Standalone on purpose: the sandbox runs it with the system ``python3``, which has neither the
product's packages nor the MCP SDK, so it speaks the protocol's stdio transport itself
(newline-delimited JSON-RPC 2.0: ``initialize``, ``tools/list``, ``tools/call``, ``ping``).
Usage: ``python3 mcp_mock_server.py <mocks.json> <server>``; the file is read-only in the sandbox.

Its answers follow schemas/mocks.py exactly; the host recomputes every answer from the recorded
call afterwards (worker/executor/mock_calls.py), so what this process says is never trusted.
"""

import json
import re
import sys
from typing import Any

PROTOCOL = "2025-06-18"
FIELD = re.compile(r"\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}")


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def answer(tool: dict[str, Any], arguments: dict[str, Any]) -> tuple[str, bool]:
    for field, pattern in (tool.get("expect") or {}).items():
        value = arguments.get(field)
        if value is None or re.search(pattern, _value(value)) is None:
            shown = "missing" if value is None else repr(_value(value))[:200]
            return f"error: unexpected input: {field} is {shown}", True
    if tool.get("error") is not None:
        return f"error: {tool['error']}", True
    if tool.get("answer") is None:
        return f"error: the mock of {tool['name']} has no answer", True
    return FIELD.sub(lambda m: _value(arguments.get(m.group(1), "")), tool["answer"]), False


def handle(request: dict[str, Any], tools: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        version = params.get("protocolVersion") or PROTOCOL
        info = {"name": "skill-eval-mock", "version": "1"}
        return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
    if method == "tools/list":
        listed = [
            {"name": t["name"], "description": t.get("description", ""), "inputSchema": t.get("input_schema") or {}}
            for t in tools.values()
        ]
        return {"tools": listed}
    if method == "tools/call":
        tool = tools.get(str(params.get("name")))
        if tool is None:
            return {"content": [{"type": "text", "text": "error: no such tool"}], "isError": True}
        text, is_error = answer(tool, params.get("arguments") or {})
        return {"content": [{"type": "text", "text": text}], "isError": is_error}
    if method == "ping":
        return {}
    return None


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        servers = json.load(f)
    server: dict[str, Any] = next((s for s in servers if s["name"] == sys.argv[2]), {"tools": []})
    tools = {t["name"]: t for t in server["tools"]}
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict) or "id" not in request:
            continue  # a notification: nothing to answer
        result = handle(request, tools)
        if result is None:
            reply = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "method not found"}}
        else:
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
