"""A scripted model server on 127.0.0.1: OpenAI chat completions, Anthropic Messages, OpenAI Responses.

litellm reaches it over real HTTP (model ``openai/<name>``, ``api_base=<url>``, any key), so
the product and its tests run with no network. What it answers is a *scenario*
(:mod:`testkit.scenario`): tool-call scripts, verdict arrays, latency, 5xx, 429 with
Retry-After, hangs, malformed bodies, prose; grading requests can be decided by the
rule-based judge (:mod:`testkit.judge`). A server-wide requests-per-minute ceiling is enforced
with a sliding window and answered with 429 + ``Retry-After``.

In-process::

    server = OfflineModelServer(scenario, rpm=600)
    base_url = server.start()        # "http://127.0.0.1:PORT/v1"
    ...
    server.stop()

As a process: ``python -m testkit.offline_server --port 8080 --scenario demo --rpm 600``;
``--calibrated-judge`` adds the rules that judge skill-eval's calibration trajectories, so a
run against it passes judge calibration honestly (what ``make demo`` does in-process).

Protocols: ``/v1/chat/completions`` (OpenAI, JSON or server-sent events: what OpenCode
speaks), ``/v1/messages`` and ``/v1/messages/count_tokens`` (Anthropic, JSON or server-sent
events: :mod:`testkit.anthropic_api`), ``/v1/responses`` (the
OpenAI Responses API Codex speaks: :mod:`testkit.responses_api`),
``/v1beta/models/<model>:generateContent`` / ``:streamGenerateContent`` / ``:countTokens``
(the Gemini API Gemini CLI speaks: :mod:`testkit.gemini_api`); query strings such as
``?beta=true`` are ignored. The same scenario, latency, 429 and fault controls drive them all.

Control endpoints (for tests): ``POST /_control/scenario`` (body: a scenario), ``POST
/_control/reset`` (forget requests, stats and fault counters), ``GET /_control/requests``
(recorded request bodies, oldest first, bounded), ``GET /_control/keys`` (the credential
header of each), ``GET /_control/headers`` (all its headers), ``GET /_control/stats``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from testkit import anthropic_api, gemini_api, responses_api
from testkit.judge import calibration_judge_rules, is_grading_request, is_vote_request, judge_request, judge_vote
from testkit.replies import completion_body, completion_chunks
from testkit.scenario import (
    FAULT_KEYS,
    SCENARIO_DIR,
    Rule,
    Scenario,
    ScenarioError,
    conversation_key,
    fill_arguments,
    load_scenario,
    message_text,
    parse_scenario,
    pick_reply,
    scenario_data,
    turn_index,
)

__all__ = ["SCENARIO_DIR", "OfflineModelServer", "RateWindow", "load_scenario", "main"]

MAX_RECORDED = 2000
HANG_S = 3600.0

ErrorShape = Callable[[int, str], dict[str, Any]]
"""(status, message) -> the protocol's error body."""
Render = Callable[[dict[str, Any], str, str, int], dict[str, Any]]
"""(reply, model, prompt text, seq) -> the protocol's response body."""
Stream = Callable[[dict[str, Any]], list[bytes]]
"""A response body -> the server-sent events that stream it."""


def openai_error(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-style error body."""
    kind = "rate_limit_error" if status == 429 else "server_error"
    return {"error": {"message": message, "type": kind, "code": status}}


def select_rule_text(scenario: Scenario, model: str, text: str, has_tools: bool) -> Rule | None:
    """The first rule matching a request's model, text and tools, or None."""
    return next((r for r in scenario.rules if r.matches(model, text, has_tools)), None)


class RateWindow:
    """A sliding-window ceiling: at most ``limit`` accepted requests in any ``window_s`` seconds.

    ``rpm`` is spread over the window (``limit = rpm * window_s / 60``) because providers
    enforce per-minute limits at sub-minute granularity; a full-minute window would let a
    whole minute's budget through in one burst.
    """

    def __init__(self, rpm: int, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self.limit = max(1, round(rpm * window_s / 60))
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def admit(self) -> float | None:
        """Record and admit a request (None), or return the seconds until one may be admitted."""
        now = time.monotonic()
        with self._lock:
            while self._times and self._times[0] <= now - self.window_s:
                self._times.popleft()
            if len(self._times) < self.limit:
                self._times.append(now)
                return None
            return self._times[0] + self.window_s - now


class _State:
    """Everything the handlers share; guarded by one lock."""

    def __init__(self, scenario: Scenario, rpm: int | None, window_s: float) -> None:
        self.lock = threading.Lock()
        self.scenario = scenario
        self.window = RateWindow(rpm, window_s) if rpm else None
        self.stopping = threading.Event()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.requests: deque[dict[str, Any]] = deque(maxlen=MAX_RECORDED)
            self.keys: deque[str] = deque(maxlen=MAX_RECORDED)
            self.headers: deque[dict[str, str]] = deque(maxlen=MAX_RECORDED)
            """Every header of each model request, names lower-cased (what a proxy let through)."""
            self.timeline: deque[tuple[float, float, str]] = deque(maxlen=MAX_RECORDED)
            """(arrived, replied, model) of each successful model call, wall-clock seconds: benchmarks
            read it to see how many calls were in flight when."""
            """The credential header of each model request, in order (x-api-key or Authorization)."""
            self.fault_counts: dict[tuple[int, int, str], int] = {}
            self.pick_counts: dict[tuple[int, int, str], int] = {}
            self.stats: dict[str, Any] = {
                "total": 0,
                "ok": 0,
                "rate_limited": 0,
                "ceiling_rate_limited": 0,
                "errors": 0,
                "hangs": 0,
                "malformed": 0,
                "first_request_at": None,
                "first_ok_at": None,
                "last_ok_at": None,
            }
            self.seq = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # The headers and the body go out as two writes; with Nagle on, the body waited for the
    # client's delayed ACK of the headers: ~40 ms added to every scripted call, a latency no
    # real endpoint has (and every timing of the benchmarks carried).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read /_control instead
        pass

    # --- plumbing -------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(value).encode(), headers)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._json(status, openai_error(status, message), headers)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    # --- routes ---------------------------------------------------------------------------
    def do_GET(self) -> None:
        state = self.server.state
        path = urlsplit(self.path).path.rstrip("/")
        if self.path == "/_control/requests":
            with state.lock:
                self._json(200, list(state.requests))
        elif self.path == "/_control/keys":
            with state.lock:
                self._json(200, list(state.keys))
        elif self.path == "/_control/headers":
            with state.lock:
                self._json(200, list(state.headers))
        elif self.path == "/_control/stats":
            with state.lock:
                self._json(200, dict(state.stats))
        elif path in ("/v1/models", "/models"):
            self._json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        state = self.server.state
        path = urlsplit(self.path).path.rstrip("/")
        try:
            body = self._body()
        except json.JSONDecodeError as err:
            self._error(400, f"request body is not JSON: {err}")
            return
        if self.path == "/_control/scenario":
            try:
                scenario = parse_scenario(body)
            except ScenarioError as err:
                self._error(400, str(err))
                return
            with state.lock:
                state.scenario = scenario
            self._json(200, {"ok": True})
        elif self.path == "/_control/reset":
            state.reset()
            self._json(200, {"ok": True})
        elif path in ("/v1/chat/completions", "/chat/completions"):
            self._complete(body)
        elif path in ("/v1/messages", "/messages"):
            self._anthropic(body)
        elif path in ("/v1/messages/count_tokens", "/messages/count_tokens"):
            self._json(200, anthropic_api.count_tokens_body(body))
        elif path in ("/v1/responses", "/responses"):
            self._responses(body)
        elif gemini_api.route(path) is not None:
            self._gemini(path, body)
        else:
            self._error(404, f"no route {self.path}")

    def _complete(self, body: dict[str, Any]) -> None:
        model = str(body.get("model", ""))
        messages = body.get("messages") or []
        reply = self._scripted(body, model, messages, message_text(messages), bool(body.get("tools")), openai_error)
        if reply is not None:
            stream = completion_chunks if body.get("stream") else None
            self._play(reply, model, message_text(messages), openai_error, completion_body, stream=stream)

    def _anthropic(self, body: dict[str, Any]) -> None:
        model = str(body.get("model", ""))
        chat = anthropic_api.as_chat_messages(body)
        text = anthropic_api.messages_text(body)
        reply = self._scripted(body, model, chat, text, bool(body.get("tools")), anthropic_api.error_body)
        if reply is None:
            return
        stream = bool(body.get("stream"))

        def render(r: dict[str, Any], m: str, _text: str, seq: int) -> dict[str, Any]:
            return anthropic_api.message_body(r, m, anthropic_api.prompt_text(body), seq)

        self._play(
            reply, model, text, anthropic_api.error_body, render, stream=anthropic_api.sse_events if stream else None
        )

    def _responses(self, body: dict[str, Any]) -> None:
        model = str(body.get("model", ""))
        chat = responses_api.as_chat_messages(body)
        text = responses_api.input_text(body)
        reply = self._scripted(body, model, chat, text, bool(body.get("tools")), openai_error)
        if reply is None:
            return

        def render(r: dict[str, Any], m: str, _text: str, seq: int) -> dict[str, Any]:
            return responses_api.response_body(r, m, body, seq)

        stream = responses_api.sse_events if body.get("stream") else None
        self._play(reply, model, text, openai_error, render, stream=stream)

    def _gemini(self, path: str, body: dict[str, Any]) -> None:
        model, method = gemini_api.route(path) or ("", "")
        if method == "countTokens":
            self._json(200, gemini_api.count_tokens_body(body))
            return
        text = gemini_api.contents_text(body)
        chat = gemini_api.as_chat_messages(body)
        reply = self._scripted(body, model, chat, text, bool(body.get("tools")), gemini_api.error_body)
        if reply is None:
            return

        def render(r: dict[str, Any], m: str, _text: str, seq: int) -> dict[str, Any]:
            return gemini_api.response_body(r, m, body, seq)

        stream = gemini_api.sse_events if method == "streamGenerateContent" else None
        error = partial(gemini_api.error_body, retry_after=reply.get("retry_after"))
        self._play(reply, model, text, error, render, stream=stream)

    def _scripted(
        self,
        body: dict[str, Any],
        model: str,
        messages: list[dict[str, Any]],
        text: str,
        has_tools: bool,
        error: ErrorShape,
    ) -> dict[str, Any] | None:
        """The scripted reply to one model request, or None when the ceiling already answered 429."""
        state = self.server.state
        self._arrived = time.time()
        with state.lock:
            state.requests.append(body)
            credential = self.headers.get("x-api-key") or self.headers.get("x-goog-api-key")
            state.keys.append(credential or self.headers.get("authorization") or "")
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            state.stats["total"] += 1
            state.stats["first_request_at"] = state.stats["first_request_at"] or self._arrived
            state.seq += 1
            scenario = state.scenario
        if state.window is not None:
            wait = state.window.admit()
            if wait is not None:
                with state.lock:
                    state.stats["rate_limited"] += 1
                    state.stats["ceiling_rate_limited"] += 1
                retry_after = str(max(1, math.ceil(wait)))
                self._json(429, error(429, "rate limit: requests per minute exceeded"), {"Retry-After": retry_after})
                return None
        turn = turn_index(messages)
        rule = select_rule_text(scenario, model, text, has_tools)
        if (rule is not None and rule.judge) or (rule is None and is_grading_request(text)):
            reply: dict[str, Any] = (
                {"text": judge_vote(text, scenario.judge_rules)}
                if is_vote_request(text)
                else {"verdicts": judge_request(text, scenario.judge_rules)}
            )
            if rule is not None and rule.replies:  # a judge rule may still carry faults/latency
                reply = {**rule.reply_for(turn), **reply}
        else:
            reply = rule.reply_for(turn) if rule is not None else scenario.default
        if rule is not None and "pick" in reply:
            key = (rule.index, turn, conversation_key(messages))
            with state.lock:
                occurrence = state.pick_counts.get(key, 0)
                state.pick_counts[key] = occurrence + 1
            reply = pick_reply(reply, scenario.seed, key, occurrence)
        if rule is not None and "times" in reply:
            key = (rule.index, turn, conversation_key(messages))
            with state.lock:
                count = state.fault_counts.get(key, 0)
                state.fault_counts[key] = count + 1
            if count >= int(reply["times"]):
                reply = {k: v for k, v in reply.items() if k not in FAULT_KEYS}
        return fill_arguments(reply, text)

    def _play(
        self,
        reply: dict[str, Any],
        model: str,
        prompt_text: str,
        error: ErrorShape,
        render: Render,
        *,
        stream: Stream | None = None,
    ) -> None:
        state = self.server.state
        with state.lock:
            seq = state.seq
        if reply.get("delay_s"):
            state.stopping.wait(float(reply["delay_s"]))
        if reply.get("hang"):
            with state.lock:
                state.stats["hangs"] += 1
            state.stopping.wait(float(reply.get("hang_s", HANG_S)))
            self.close_connection = True
            return
        status = int(reply.get("status", 200))
        if status != 200:
            with state.lock:
                state.stats["rate_limited" if status == 429 else "errors"] += 1
            headers = {"Retry-After": str(reply["retry_after"])} if "retry_after" in reply else None
            message = str(reply.get("error_message", f"scripted fault {status}"))
            body = error(status, message)  # the protocol's own error shape
            if "error_code" in reply and isinstance(body.get("error"), dict):  # e.g. context_length_exceeded
                body["error"] = {**body["error"], "type": "invalid_request_error", "code": reply["error_code"]}
            self._json(status, body, headers)
            return
        if reply.get("malformed"):
            with state.lock:
                state.stats["malformed"] += 1
            self._send(200, b'{"id": "broken", "choices": [{"message": ')
            return
        body = render(reply, model, prompt_text, seq)
        # Counted before the reply goes out: a client that has read it must find it counted.
        with state.lock:
            now = time.time()
            state.stats["ok"] += 1
            state.stats["first_ok_at"] = state.stats["first_ok_at"] or now
            state.stats["last_ok_at"] = now
            state.timeline.append((getattr(self, "_arrived", now), now, model))
        if stream is None:
            self._json(200, body)
        else:
            self._stream(stream(body))

    def _stream(self, events: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in events:
            self.wfile.write(event)
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # hung handlers end when `stopping` is set, never block stop()
    state: _State

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a worker killed mid-call, in the fault tests) is not worth a traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class OfflineModelServer:
    """The scripted model server; ``start()`` returns the API base (``http://127.0.0.1:PORT/v1``)."""

    def __init__(
        self,
        scenario: str | Path | dict[str, Any] | Scenario | None = None,
        *,
        rpm: int | None = None,
        window_s: float = 10.0,
        port: int = 0,
    ) -> None:
        parsed = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.state = _State(parsed, rpm, window_s)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> str:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="offline-model", daemon=True
        )
        self._thread.start()
        return self.base_url

    def set_scenario(self, scenario: str | Path | dict[str, Any]) -> None:
        parsed = load_scenario(scenario)
        with self._httpd.state.lock:
            self._httpd.state.scenario = parsed

    def requests(self) -> list[dict[str, Any]]:
        with self._httpd.state.lock:
            return list(self._httpd.state.requests)

    def keys(self) -> list[str]:
        """The credential header each model request carried, oldest first."""
        with self._httpd.state.lock:
            return list(self._httpd.state.keys)

    def headers(self) -> list[dict[str, str]]:
        """Every header each model request carried (names lower-cased), oldest first."""
        with self._httpd.state.lock:
            return list(self._httpd.state.headers)

    def timeline(self) -> list[tuple[float, float, str]]:
        """(arrived, replied, model) of each successful call, oldest reply first, bounded."""
        with self._httpd.state.lock:
            return list(self._httpd.state.timeline)

    def stats(self) -> dict[str, Any]:
        with self._httpd.state.lock:
            return dict(self._httpd.state.stats)

    def reset(self) -> None:
        self._httpd.state.reset()

    def stop(self) -> None:
        self._httpd.state.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> OfflineModelServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible model server (offline).")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--scenario", default=None, help="scenario JSON file, or a bundled name (demo)")
    parser.add_argument("--rpm", type=int, default=None, help="requests-per-minute ceiling (429 above)")
    parser.add_argument("--window-s", type=float, default=10.0, help="sliding window of the ceiling")
    parser.add_argument(
        "--calibrated-judge",
        action="store_true",
        help="also judge skill-eval's built-in calibration trajectories correctly, so a run's judge"
        " calibration passes (without it the run WARNs: the judge failed calibration)",
    )
    args = parser.parse_args(argv)
    try:
        scenario: str | dict[str, Any] | None = args.scenario
        if args.calibrated_judge:
            data = scenario_data(args.scenario) if args.scenario else {}
            scenario = {**data, "judge": [*calibration_judge_rules(), *data.get("judge", [])]}
        server = OfflineModelServer(scenario, rpm=args.rpm, window_s=args.window_s, port=args.port)
    except (ScenarioError, OSError) as err:
        print(f"offline_server: {err}", file=sys.stderr)
        return 2
    print(server.base_url, flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.state.stopping.set()
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
