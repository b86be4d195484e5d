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
import sys
import threading
from pathlib import Path
from typing import Any

from testkit.judge import calibration_judge_rules
from testkit.model_handler import _Handler, _Server
from testkit.scenario import SCENARIO_DIR, Scenario, ScenarioError, load_scenario, scenario_data
from testkit.server_state import RateWindow, ServerState

__all__ = ["SCENARIO_DIR", "OfflineModelServer", "RateWindow", "load_scenario", "main"]


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
        self._httpd.state = ServerState(parsed, rpm, window_s)
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
