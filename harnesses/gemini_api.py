"""The Gemini API as the proxy sees it (the wire protocol of Gemini CLI): paths, rules, record, history.

- **Paths.** ``POST /v1beta/models/<model>:generateContent``, ``:streamGenerateContent``
  (``?alt=sse``: server-sent events, each a whole ``GenerateContentResponse``) and
  ``:countTokens``; ``GET /v1beta/models``. The model is in the path, not in the body.
- **Rules** (as :mod:`harnesses.request_rules` for the other protocols): the path's model must
  be the shard's (``MODEL_NOT_ALLOWED``); a ``tools`` entry may only declare client-side
  functions (``functionDeclarations``): ``googleSearch``, ``googleSearchRetrieval``,
  ``codeExecution``, ``urlContext``, ``fileSearch``, ``googleMaps``, ``computerUse`` and any
  other key run on Google's side (``SERVER_TOOL_REFUSED``); ``cachedContent`` names provider
  state the shard does not own (``BODY_FIELD_REFUSED``); ``generationConfig.maxOutputTokens``
  is clamped to the shard's cap, the thinking budget below it, ``candidateCount`` to one.
- **Record.** A reply's first candidate: its ``text`` parts (thoughts left out), its
  ``functionCall`` parts, ``finishReason``, ``usageMetadata``, ``modelVersion``. A function
  call carries an ``id`` only when the model gave one; otherwise the record names it
  ``<responseId>/<index>`` (unique per reply).
- **History.** A request's ``contents``: ``model`` turns hold the earlier ``functionCall``
  parts, ``user`` turns the texts. Ids are not reliable across the wire, so calls are compared
  by :func:`signature` (name and arguments).

Pure: bytes and dicts in, values out.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

API_ROOT = "/v1beta"
_PATH = re.compile(r"^/v1beta/models/([A-Za-z0-9._-]{1,120}):(generateContent|streamGenerateContent|countTokens)$")
ANSWERS = ("generateContent", "streamGenerateContent")
"""The methods whose reply is a model turn (priced, budgeted, recorded); ``countTokens`` is not."""
CLIENT_TOOL_KEYS = frozenset({"functionDeclarations"})
REFUSED_FIELDS = ("cachedContent",)


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (nothing on the wire is trusted)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def split_path(path: str) -> tuple[str, str] | None:
    """``(model, method)`` of a model path (``/v1beta/models/m:generateContent``); None for any other."""
    found = _PATH.match(path.rstrip("/"))
    return (found.group(1), found.group(2)) if found else None


def is_model_path(method: str, path: str) -> bool:
    """True for the Gemini API calls the proxy forwards."""
    if method == "GET":
        return path.rstrip("/") == f"{API_ROOT}/models"
    return method == "POST" and split_path(path) is not None


def answers(path: str) -> bool:
    """True when ``path`` asks for a model turn (not a token count)."""
    parts = split_path(path)
    return parts is not None and parts[1] in ANSWERS


def tool_refusal(tool: Any) -> str | None:
    """Why a ``tools`` entry is refused (a provider-side tool), or None for function declarations."""
    if not isinstance(tool, dict):
        return "a tool that is not an object"
    other = sorted(k for k in tool if k not in CLIENT_TOOL_KEYS)
    if other:
        return f"tool {str(other[0])[:80]!r} runs on the provider's side"
    return None


def clamp(body: dict[str, Any], max_output: int) -> dict[str, Any]:
    """``body`` with its output limits clamped to ``max_output`` and one candidate."""
    config = _obj(body.get("generationConfig"))
    if not config:
        return body
    out = dict(config)
    limit = out.get("maxOutputTokens")
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > max_output:
        out["maxOutputTokens"] = max_output
    thinking = _obj(out.get("thinkingConfig"))
    budget = thinking.get("thinkingBudget")
    ceiling = int(out.get("maxOutputTokens") or max_output) - 1
    if isinstance(budget, int) and not isinstance(budget, bool) and budget > ceiling:
        out["thinkingConfig"] = {**thinking, "thinkingBudget": max(ceiling, 0)}
    count = out.get("candidateCount")
    if isinstance(count, int) and not isinstance(count, bool) and count > 1:
        out["candidateCount"] = 1
    return body if out == config else {**body, "generationConfig": out}


def signature(name: str, arguments: Any) -> str:
    """A call's identity across the wire: its name and a hash of its canonical arguments."""
    raw = json.dumps(arguments if isinstance(arguments, dict) else {}, sort_keys=True, ensure_ascii=False)
    return f"{name}#{hashlib.sha256(raw.encode()).hexdigest()[:16]}"


def history(body: dict[str, Any]) -> tuple[set[str], list[str]]:
    """The signatures of a request's earlier ``functionCall`` parts, and its user turns' texts."""
    calls: set[str] = set()
    texts: list[str] = []
    for content in _list(body.get("contents")):
        content = _obj(content)
        for part in _list(content.get("parts")):
            part = _obj(part)
            call = _obj(part.get("functionCall"))
            if content.get("role") == "model" and call:
                calls.add(signature(str(call.get("name", "")), call.get("args")))
            elif content.get("role") == "user" and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return calls, texts


def function_responses(body: dict[str, Any]) -> dict[str, str]:
    """Call id -> the result text of each ``functionResponse`` part of a request (``output``, else
    ``error``, else the whole response as JSON)."""
    out: dict[str, str] = {}
    for content in _list(body.get("contents")):
        for part in _list(_obj(content).get("parts")):
            answer = _obj(_obj(part).get("functionResponse"))
            call_id = answer.get("id")
            if not isinstance(call_id, str) or not call_id:
                continue
            response = _obj(answer.get("response"))
            text = response.get("output", response.get("error"))
            out[call_id] = text if isinstance(text, str) else json.dumps(response, ensure_ascii=False)
    return out


def _sse(body: bytes) -> list[dict[str, Any]]:
    out = []
    for line in body.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:"):
            try:
                value = json.loads(line[5:].strip())
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                out.append(value)
    return out


def response_parts(body: bytes) -> dict[str, Any] | None:
    """``{texts, calls: [(id, name, arguments)], stop, prompt, completion, model}`` of one proxied
    reply (a ``GenerateContentResponse`` or its event stream); None when it holds no candidate."""
    text = body.lstrip()
    if text.startswith(b"{"):
        try:
            events = [json.loads(text)]
        except json.JSONDecodeError:
            return None
    elif text.startswith(b"["):  # the non-SSE stream form: a JSON array of responses
        try:
            events = _list(json.loads(text))
        except json.JSONDecodeError:
            return None
    else:
        events = _sse(body)
    events = [e for e in events if isinstance(e, dict)]
    if not any("candidates" in e for e in events):
        return None
    pieces: list[str] = []
    calls: list[tuple[str, str, dict[str, Any]]] = []
    stop, model, response_id = None, None, ""
    usage: dict[str, Any] = {}
    for event in events:
        usage = _obj(event.get("usageMetadata")) or usage
        model = model or event.get("modelVersion")
        response_id = response_id or str(event.get("responseId") or "")
        candidates = _list(event.get("candidates"))
        candidate = _obj(candidates[0]) if candidates else {}
        stop = candidate.get("finishReason") or stop
        for part in _list(_obj(candidate.get("content")).get("parts")):
            part = _obj(part)
            if isinstance(part.get("text"), str) and not part.get("thought"):
                pieces.append(part["text"])
            call = _obj(part.get("functionCall"))
            if call:
                arguments = _obj(call.get("args"))
                calls.append((str(call.get("id") or ""), str(call.get("name", "")), arguments))
    anchor = response_id or hashlib.sha256(body).hexdigest()[:16]
    named = [(cid or f"{anchor}/{i}", name, args) for i, (cid, name, args) in enumerate(calls)]
    joined = "".join(pieces)
    return {
        "texts": [joined] if joined.strip() else [],
        "calls": named,
        "stop": str(stop) if stop else None,
        "prompt": int(usage.get("promptTokenCount") or 0),
        "completion": int(usage.get("candidatesTokenCount") or 0) + int(usage.get("thoughtsTokenCount") or 0),
        "model": model if isinstance(model, str) and model else None,
    }


def error_body(status: int, message: str) -> bytes:
    """The Gemini API's error shape."""
    kind = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED"}
    name = kind.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    return json.dumps({"error": {"code": status, "message": message, "status": name}}).encode()


RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def retry_delay(body: bytes) -> float | None:
    """The wait an error body tells (its ``google.rpc.RetryInfo`` ``retryDelay``, ``"2s"``); None
    without one. The Gemini API says it there, not in a Retry-After header."""
    try:
        parsed = json.loads(body) if body.lstrip().startswith(b"{") else None
    except (ValueError, RecursionError):
        return None
    details = _list(_obj(_obj(parsed).get("error")).get("details"))
    for detail in (_obj(d) for d in details):
        found = _DURATION.match(str(detail.get("retryDelay", ""))) if detail.get("@type") == RETRY_INFO else None
        if found:
            return float(found.group(1))
    return None
