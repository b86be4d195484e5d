"""The offline model server's HTTP handler: the control endpoints, the scenario's reply to a model
request (ceiling, rule, judge, picks, faults) and how it is played (latency, hang, error, malformed,
JSON or server-sent events). The protocols' own shapes are :mod:`testkit.protocol_routes`."""

from __future__ import annotations

import json
import math
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from testkit.judge import is_grading_request, is_vote_request, judge_request, judge_vote
from testkit.protocol_routes import ErrorShape, Render, Stream, openai_error, route
from testkit.scenario import (
    FAULT_KEYS,
    Rule,
    Scenario,
    ScenarioError,
    conversation_key,
    fill_arguments,
    parse_scenario,
    pick_reply,
    turn_index,
)
from testkit.server_state import ServerState

HANG_S = 3600.0


def select_rule_text(scenario: Scenario, model: str, text: str, has_tools: bool) -> Rule | None:
    """The first rule matching a request's model, text and tools, or None."""
    return next((r for r in scenario.rules if r.matches(model, text, has_tools)), None)


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

    def json_reply(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(value).encode(), headers)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.json_reply(status, openai_error(status, message), headers)

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
                self.json_reply(200, list(state.requests))
        elif self.path == "/_control/keys":
            with state.lock:
                self.json_reply(200, list(state.keys))
        elif self.path == "/_control/headers":
            with state.lock:
                self.json_reply(200, list(state.headers))
        elif self.path == "/_control/stats":
            with state.lock:
                self.json_reply(200, dict(state.stats))
        elif path in ("/v1/models", "/models"):
            self.json_reply(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
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
            self.json_reply(200, {"ok": True})
        elif self.path == "/_control/reset":
            state.reset()
            self.json_reply(200, {"ok": True})
        elif (answer := route(path)) is not None:
            answer(self, body)
        else:
            self._error(404, f"no route {self.path}")

    def scripted(
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
                self.json_reply(
                    429, error(429, "rate limit: requests per minute exceeded"), {"Retry-After": retry_after}
                )
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

    def play(
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
            self.json_reply(status, body, headers)
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
            self.json_reply(200, body)
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
    state: ServerState

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a worker killed mid-call, in the fault tests) is not worth a traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
