"""The model proxy of one shard: a unix-socket HTTP server outside the sandbox.

Per request, in order (docs/design/harnesses.md has the reasons):

1. only the model API's paths are forwarded; anything else is answered locally (404, or an
   empty object for the calls its harness's adapter names) and never leaves the worker;
2. the request must carry the placeholder key the harness was given (the agent cannot bring
   its own credentials through);
3. the shard's budgets: past its wall clock, its token budget or its model turns the proxy
   refuses with a 400 the harness reports as an error, and records why (behaviour, graded);
4. the fleet-wide limiter of the model (rpm, tpm, concurrency leases; a 429 with
   Retry-After from upstream starts the shared cool-down, so the whole fleet backs off);
5. the request rules (:mod:`harnesses.request_rules`): the shard's model only, output limits
   clamped, client-side tools only, the harness's own headers and betas only; a refusal is
   named to the agent and recorded as its doing;
6. the request goes to the configured upstream of the shard's model only, with the real key
   in place of the placeholder; the response is parsed into the shard's
   :class:`~harnesses.model_record.ProxyRecord` (the source of truth for what the model
   said), its turn marked when the request did not continue the harness's own conversation
   (:mod:`harnesses.conversation`), and sent back with every fragment of the real key
   scrubbed from it. Cost is priced at the model the reply names. Only the requests of the
   harness's own conversation count as the upstream's answers (``asked``, ``upstream_failures``,
   ``last_upstream_ok``): a side request the upstream fails is no evidence of an infra failure.
"""

from __future__ import annotations

import contextlib
import os
import socketserver
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import structlog

from engine.budget import OverShare, RunBudget, Shaped
from harnesses import gemini_api
from harnesses.conversation import continues, sent_outputs
from harnesses.endpoints import is_model_path, scrub, upstream_url
from harnesses.model_record import ModelTurn, ProxyRecord, parse_model_response
from harnesses.request_rules import RequestRefused, forwarded_headers, pin_request
from schemas.errors import ModelCallFailed
from schemas.trajectory import EndReason, Usage
from worker.models.limiter import Limiter
from worker.proxy.bounds import MAX_REQUEST_BYTES, content_length
from worker.proxy.config import ProxyConfig
from worker.proxy.replies import RETRYABLE, backoff_hint, error_body, holds, retry_after
from worker.proxy.waits import FleetWaits

log = structlog.get_logger("skill_eval.worker")

RESERVED_COMPLETION = 4096
"""Completion tokens a harness request is assumed to use before its answer says (then settled)."""

SENT_OUTPUTS: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {
    "gemini": gemini_api.function_responses,
    "openai": sent_outputs,  # chat completions' tool messages, or the Responses API's call outputs
}
"""Per protocol, how the tool results a harness sends its model are read from a request of its
own conversation (a harness whose stream shows a shortened display text is judged on these)."""
__all__ = ["RESERVED_COMPLETION", "ModelProxy", "ProxyConfig"]


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    proxy: ModelProxy

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went away is no error of the proxy's; anything else is one log line.

        The client is the sandboxed agent: socketserver's default printed a traceback to the
        worker's stderr for each connection it reset, so an agent could fill the worker's log.
        """
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):  # reset, broken pipe, aborted: the agent hung up
            return
        error = scrub(f"{type(exc).__name__}: {exc}", self.proxy.config.real_key)  # never a piece of the key
        log.warning("model proxy: a request failed", error=error[:500])


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the record is the log
        pass

    def do_GET(self) -> None:
        self.server.proxy.handle(self, "GET")

    def do_POST(self) -> None:
        self.server.proxy.handle(self, "POST")

    def reply(
        self, status: int, body: bytes, content_type: str = "application/json", extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)


class ModelProxy(FleetWaits):
    """Serve one shard's model traffic on ``socket_path`` until :meth:`stop` (or the ``with`` block ends)."""

    def __init__(
        self,
        config: ProxyConfig,
        socket_path: Path,
        *,
        limiter: Limiter | None = None,
        usage: Any = None,
        run_budget: RunBudget | None = None,
    ) -> None:
        self.config = config
        self.socket_path = socket_path
        self.limiter = limiter
        self.run_budget = run_budget
        """The run's fleet-wide caps: every model request reserves its estimate there first."""
        self.usage = usage
        """Optional ``usage(prompt_tokens, completion_tokens, ok, rate_limited)`` callback (run counters)."""
        self.record = ProxyRecord()
        self.rules = config.rules()
        self._budget_key = uuid.uuid4().hex
        """This shard's key in the run's budget, under which its reservations in flight count as its own."""
        self._spent_cost: float | None = None
        """Dollars this shard's answers cost so far (None while no answer could be priced)."""
        self.latencies: list[float] = []
        """Seconds each forwarded request spent in the proxy itself (upstream time excluded)."""
        self._lock = threading.RLock()  # re-entered: the budget check reads the waits under it
        FleetWaits.__init__(self, self._lock)
        self._client = httpx.Client(timeout=config.timeout_s, trust_env=False)
        self._deadline = time.monotonic() + config.wall_clock_s
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self._server = _Server(str(self.socket_path), _Handler)
        self._server.proxy = self
        os.chmod(self.socket_path, 0o666)  # the sandbox's throwaway uid connects to it
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True, name="model-proxy"
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._client.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def __enter__(self) -> ModelProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- one request -----------------------------------------------------------------------
    def _cost(self, turn: ModelTurn | None) -> float | None:
        """What ``turn`` cost, priced at the model the upstream answered with (else the shard's)."""
        if turn is None:
            return None
        import litellm

        try:
            prompt, completion = litellm.cost_per_token(
                model=turn.model or self.config.model,
                prompt_tokens=turn.prompt_tokens,
                completion_tokens=turn.completion_tokens,
            )
        except Exception:  # a model litellm cannot price: its tokens still count against the caps
            return None
        return float(prompt + completion)

    def _refuse(self, handler: _Handler, status: int, why: str) -> None:
        with self._lock:
            self.record.refused.append(why)
        handler.reply(status, error_body(self.config.protocol, status, f"skill-eval proxy: {why}"))

    def _budget_spent(self) -> str | None:
        record = self.record
        if time.monotonic() >= self._deadline + self.allowance_s():
            return "wall-clock"
        if record.prompt_tokens + record.completion_tokens >= self.config.max_tokens:
            return "max-tokens"
        if len(record.turns) >= self.config.max_turns:
            return "max-turns"
        if self.config.stop_when is not None and any(self.config.stop_when(t) for t in record.turns if not t.side):
            return EndReason.SKILL_ACTIVATED.value
        return None

    def handle(self, handler: _Handler, method: str) -> None:
        began = time.perf_counter()
        parts = urlsplit(handler.path)
        path = parts.path.rstrip("/") or "/"
        length = content_length(handler.headers.get("Content-Length"))
        if length is None:
            handler.close_connection = True  # its body, unread, must not be taken for the next request
            with self._lock:
                self.record.agent_refusals.append(f"{method} {path}: a body over {MAX_REQUEST_BYTES} bytes or unsized")
            self._refuse(
                handler, 413, f"{method} {path}: a request body must be sized and at most {MAX_REQUEST_BYTES} bytes"
            )
            return
        body = handler.rfile.read(length) if length else b""
        if not is_model_path(self.config.protocol, method, path):
            if path in self.config.answered_empty:
                handler.reply(200, b"{}")
            else:
                self._refuse(handler, 404, f"{method} {path} is not a model API path; answered locally")
            return
        given = (
            handler.headers.get("x-api-key")
            or handler.headers.get("x-goog-api-key")
            or (handler.headers.get("authorization") or "").removeprefix("Bearer ")
        )
        if given != self.config.placeholder:
            self._refuse(handler, 401, f"{method} {path}: not the key this harness was given")
            return
        with self._lock:
            spent = self._budget_spent()
            if spent is not None and self.record.budget_end is None:
                self.record.budget_end = spent
        if spent is not None:
            self._refuse(handler, 400, f"the shard's {spent} budget is spent; no further model calls")
            return
        try:
            body, parsed = pin_request(self.rules, path, body)
        except RequestRefused as exc:  # what the agent asked for: its doing, named to it
            with self._lock:
                self.record.agent_refusals.append(str(exc))
            self._refuse(handler, 400, str(exc))
            return
        if self.config.watch and not self.record.body_sent and holds(parsed, self.config.watch):
            self.record.body_sent = True
        headers, dropped = forwarded_headers(self.rules, handler.headers.items())
        side = parsed is not None and not self._continues(parsed)
        reader = SENT_OUTPUTS.get(self.config.protocol)
        outputs = reader(parsed) if reader is not None and parsed is not None and not side else {}
        with self._lock:
            self.record.dropped += [d for d in dict.fromkeys(dropped) if d not in self.record.dropped]
            self.record.take_outputs(outputs, self.config.protocol)
        if self.config.protocol == "anthropic":
            headers["x-api-key"] = self.config.real_key
        elif self.config.protocol == "gemini":
            headers["x-goog-api-key"] = self.config.real_key
        else:
            headers["authorization"] = f"Bearer {self.config.real_key}"
        url = upstream_url(self.config.protocol, self.config.upstream, path, parts.query)
        self._forward(handler, method, url, headers, body, path, began, side=side)

    def _continues(self, parsed: dict[str, Any]) -> bool:
        with self._lock:
            known = self.record.tool_calls()
        return continues(self.config.protocol, parsed, opening=self.config.opening, known=known)

    def _forward(
        self,
        handler: _Handler,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes,
        path: str,
        began: float,
        *,
        side: bool = False,
    ) -> None:
        counts = path.endswith(("/messages", "/responses", "/chat/completions")) or gemini_api.answers(path)
        asking = counts and not side  # only the harness's own conversation speaks for the upstream
        estimate = len(body) // 4 if counts else 0
        reservation = None
        if counts and self.run_budget is not None:
            own = Usage(
                prompt_tokens=self.record.prompt_tokens,
                completion_tokens=self.record.completion_tokens,
                cost_usd=self._spent_cost,
            )
            shaped: Shaped = "side" if side else "conversation"  # the agent can shape either body
            got = self.run_budget.reserve(
                self.config.model, estimate + RESERVED_COMPLETION, None, own=own, shaped=shaped, shard=self._budget_key
            )
            if isinstance(got, OverShare):  # this shard's own spending: its trajectory ends as behaviour
                with self._lock:
                    if side:  # the agent's own request: refused and listed, the harness's conversation goes on
                        self.record.agent_refusals.append(f"BUDGET_SHARE: {got.why}")
                    else:
                        self.record.budget_end = self.record.budget_end or EndReason.BUDGET_SHARE.value
                self._refuse(handler, 400, f"the shard's budget-share is spent: {got.why}")
                return
            if isinstance(got, str):
                with self._lock:
                    self.record.run_budget_end = got
                self._refuse(handler, 400, f"the run's budget refused this call: {got}")
                return
            reservation = got
        lease_cm = self.limiter.acquire(estimate) if self.limiter is not None else contextlib.nullcontext()
        self._note(waiting=+1, came_back=True)
        granted = False
        try:
            with lease_cm as lease:
                self._note(waiting=-1, answering=+1)
                granted = True
                self.latencies.append(time.perf_counter() - began)
                try:
                    response = self._client.request(method, url, headers=headers, content=body)
                    status, content = response.status_code, response.content
                except httpx.HTTPError as exc:
                    status, content = (
                        502,
                        error_body(self.config.protocol, 502, f"upstream unreachable: {type(exc).__name__}"),
                    )
                    response = None
                finally:
                    self._note(answering=-1)
                after = time.perf_counter()
                turn = parse_model_response(self.config.protocol, content) if status == 200 and counts else None
                if turn is not None:
                    turn = replace(turn, side=side)
                tokens = (turn.prompt_tokens + turn.completion_tokens) if turn else 0
                if reservation is not None and self.run_budget is not None:
                    cost = self._cost(turn)
                    if cost is not None:
                        self._spent_cost = (self._spent_cost or 0.0) + cost
                    self.run_budget.settle(reservation, tokens, cost)
                    reservation = None
                if lease is not None:
                    if status == 429:
                        lease.settle(0, success=False)
                        self.limiter.report_rate_limited(retry_after(response), lease)  # type: ignore[union-attr]
                    else:
                        lease.settle(tokens if status == 200 else None, success=status == 200)
        except ModelCallFailed as exc:  # the limiter's Redis stayed away: an infra failure of this call
            with self._lock:
                if asking:
                    self.record.asked += 1
                    self.record.upstream_failures += 1
                    self.record.last_upstream_ok = False
                    self.record.last_error = exc.detail
            handler.reply(503, error_body(self.config.protocol, 503, "skill-eval proxy: limiter unavailable"))
            return
        finally:
            if not granted:  # the limiter gave up (or raised): this request no longer waits
                self._note(waiting=-1)
            if reservation is not None and self.run_budget is not None:  # failed before settling: nothing spent
                self.run_budget.settle(reservation, 0, None)
        with self._lock:
            self.record.forwarded += 1
            if asking:
                self.record.asked += 1
                ok = status < 400 or status not in RETRYABLE
                self.record.last_upstream_ok = ok
                if not ok:
                    self.record.upstream_failures += 1
                    self.record.last_error = f"{path}: upstream status {status}"
            if turn is not None:
                self.record.turns.append(turn)
        if self.usage is not None and counts:
            self.usage(
                turn.prompt_tokens if turn else 0, turn.completion_tokens if turn else 0, status == 200, status == 429
            )
        content_type = (
            response.headers.get("content-type", "application/json") if response is not None else "application/json"
        )
        extra = (
            {"Retry-After": response.headers["retry-after"]}
            if response is not None and "retry-after" in response.headers
            else {}
        )
        if status != 200 or self.config.real_key.encode() in content:
            content = scrub(content.decode("utf-8", errors="replace"), self.config.real_key).encode()
        self.latencies[-1] += time.perf_counter() - after
        if status in RETRYABLE:  # the harness sleeps before its retry: the fleet's time or the provider's
            self._note(backoff_s=backoff_hint(response))
        handler.reply(status, content, content_type, extra)
