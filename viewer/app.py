"""The viewer's ASGI app: JSON API and server-rendered pages over one :class:`ViewerData`.

Read-only unless built with ``review=True``; then ``POST /api/runs/{run}/labels`` stores a
person's label. Every page is rendered by Jinja2 with autoescaping, so a string from the repo,
the corpus, the agent or a model is text on the page, never markup; the pages' script sets
text only (``textContent``), and the Content-Security-Policy allows no inline script.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from engine.labels import labelled_answers, load_labels, new_label, put_label
from engine.store import ArtifactStore
from reducer.agreement import agreement as judge_agreement
from schemas.errors import ConfigError, SkillEvalError
from schemas.label import COMBINED, NOTE_CHARS, HumanLabel
from schemas.manifest import result_key
from schemas.shard import CURRENT
from viewer.data import RunNotFound, RunUnreadable, ViewerData
from viewer.rows import PAGE, VIEW_STATES, Query, case_assertions
from viewer.run_figures import adaptive_view, plugin_view, trigger_view
from viewer.templating import templates

HERE = Path(__file__).resolve().parent
FACET_ASSERTIONS = 300
SECTIONS = {"triggers": trigger_view, "adaptive": adaptive_view}
"""The run page's sections read from the result's own records, by the name of their API route."""
LABEL_BODY_BYTES = 64 * 1024
"""The largest label request read: a note of NOTE_CHARS escaped characters fits many times over."""
CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'"


def favicon(request: Request) -> FileResponse:
    """The tab's icon, also where a browser looks for it unasked (no 404 in its console)."""
    return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")


class LabelRequest(BaseModel):
    """What a reviewer sends: which verdict, agree or not, why."""

    model_config = ConfigDict(extra="forbid")

    shard_id: str = Field(min_length=1, max_length=64)
    assertion: int = Field(ge=1)
    """Counted from 1."""
    judge: str = COMBINED
    agree: bool
    note: str = Field(default="", max_length=NOTE_CHARS)
    reviewer: str = Field(default="", max_length=200)


def _query(request: Request) -> Query:
    p = request.query_params
    try:
        offset, limit = int(p.get("offset", 0)), int(p.get("limit", PAGE))
    except ValueError as exc:
        raise ConfigError("offset and limit must be whole numbers") from exc
    return Query(
        failing=p.get("failing", "") in ("1", "true", "yes", "on"),
        state=p.get("state", ""),
        model=p.get("model", ""),
        arm=p.get("arm", ""),
        assertion=p.get("assertion", ""),
        q=p.get("q", ""),
        text=p.get("text", ""),
        offset=offset,
        limit=limit,
    )


def pager_links(params: Mapping[str, str], query: Query) -> dict[str, str]:
    """The query strings of the previous and next pages: the same filters, the offset stepped by the
    page actually served (:meth:`Query.served`), so no row is skipped whatever ``limit`` asked for."""
    offset, limit = query.served()
    return {
        name: urlencode({**params, "offset": max(0, offset + step * limit)})
        for name, step in (("prev", -1), ("next", 1))
    }


def _error(exc: Exception) -> JSONResponse:
    if isinstance(exc, RunNotFound):
        return JSONResponse({"error": str(exc)}, status_code=404)
    if isinstance(exc, RunUnreadable):
        return JSONResponse({"error": str(exc)}, status_code=422)
    if isinstance(exc, ConfigError | ValidationError):
        return JSONResponse({"error": str(exc)}, status_code=400)
    # A SkillEvalError prints its own status first; only another exception is given one here.
    named = str(exc) if isinstance(exc, SkillEvalError) else f"STORE_ERROR: {exc}"
    return JSONResponse({"error": named}, status_code=500)


class Viewer:
    """The request handlers over one store. They are plain functions: Starlette runs them in its
    thread pool, so a slow store read (S3) never holds up the other requests."""

    def __init__(self, store: ArtifactStore, broker_url: str | None, review: bool) -> None:
        self.store = store
        self.data = ViewerData(store, broker_url)
        self.review = review
        self.templates = templates()

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        values = {"review": self.review, "status": status, **context}
        response = self.templates.TemplateResponse(request, name, values, status_code=status)
        response.headers["Content-Security-Policy"] = CSP
        return response

    def error_page(self, request: Request, exc: SkillEvalError) -> Response:
        return self.page(request, "error.html", message=str(exc), status=_error(exc).status_code)

    def agreement(self, run_id: str) -> dict[str, Any]:
        cases = {r.shard_id: (r.skill, r.case_id) for r in self.data.rows(run_id)}
        figures = judge_agreement(*labelled_answers(self.store, run_id, cases))
        return {"items": [f.model_dump(mode="json") for f in figures], "labels": len(load_labels(self.store, run_id))}

    def labels_of(self, run_id: str, shard_id: str) -> list[dict[str, Any]]:
        """The shard's labels, newest first; ``in_force`` marks the one agreement counts for each
        assertion (the newest: a reviewer who changed their mind added a newer one)."""
        newest = sorted((x for x in load_labels(self.store, run_id) if x.shard_id == shard_id), key=lambda x: x.at)
        seen: set[int] = set()
        out = []
        for label in reversed(newest):
            out.append({**label.model_dump(mode="json"), "in_force": label.assertion not in seen, "when": _when(label)})
            seen.add(label.assertion)
        return out

    def api_runs(self, request: Request) -> Response:
        return JSONResponse({"items": self.data.runs()})

    def api_run(self, request: Request) -> Response:
        try:
            return JSONResponse(self.data.overview(request.path_params["run_id"]))
        except SkillEvalError as exc:
            return _error(exc)

    def api_result(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            self.data.run(run_id)
            raw = self.store.get_many([result_key(run_id)]).get(result_key(run_id))
        except SkillEvalError as exc:
            return _error(exc)
        if raw is None:
            return JSONResponse({"error": "the run is not reduced yet"}, status_code=404)
        return Response(raw, media_type="application/json")

    def api_shards(self, request: Request) -> Response:
        try:
            return JSONResponse(self.data.shards(request.path_params["run_id"], _query(request)))
        except SkillEvalError as exc:
            return _error(exc)

    def api_shard(self, request: Request) -> Response:
        run_id, shard_id = request.path_params["run_id"], request.path_params["shard_id"]
        try:
            doc = self.data.shard(run_id, shard_id)
        except SkillEvalError as exc:
            return _error(exc)
        doc["labels"] = self.labels_of(run_id, shard_id)
        return JSONResponse(doc)

    def api_section(self, request: Request) -> Response:
        """A trigger run's figures or an adaptive run's looks as the page shows them; 404 for a run
        without them (or not reduced yet)."""
        run_id, name = request.path_params["run_id"], request.url.path.rsplit("/", 1)[-1]
        try:
            view = SECTIONS[name](self.data.run(run_id).result, run_id)
        except SkillEvalError as exc:
            return _error(exc)
        if view is None:
            return JSONResponse({"error": f"run {run_id} has no {name} figures"}, status_code=404)
        return JSONResponse(view)

    def api_agreement(self, request: Request) -> Response:
        try:
            return JSONResponse(self.agreement(request.path_params["run_id"]))
        except SkillEvalError as exc:
            return _error(exc)

    def api_labels(self, request: Request) -> Response:
        try:
            self.data.run(request.path_params["run_id"])
            labels = load_labels(self.store, request.path_params["run_id"])
        except SkillEvalError as exc:
            return _error(exc)
        return JSONResponse({"items": [x.model_dump(mode="json") for x in labels]})

    async def api_label(self, request: Request) -> Response:
        if not self.review:
            return JSONResponse({"error": "read-only: start the viewer with --review to label"}, status_code=403)
        refused = _cross_site(request)
        if refused:
            return JSONResponse({"error": refused}, status_code=403)
        body = await _capped_body(request)
        if body is None:
            return JSONResponse({"error": f"a label is sent in at most {LABEL_BODY_BYTES} bytes"}, status_code=413)
        return await run_in_threadpool(self.store_label, request.path_params["run_id"], body)

    def store_label(self, run_id: str, body: bytes) -> Response:
        try:
            label = _label(self.store, self.data, run_id, LabelRequest.model_validate_json(body))
        except (SkillEvalError, ValidationError) as exc:
            return _error(exc)
        put_label(self.store, label)
        return JSONResponse({"label": label.model_dump(mode="json"), "agreement": self.agreement(run_id)})

    def runs_page(self, request: Request) -> Response:
        return self.page(request, "runs.html", runs=self.data.runs())

    def run_page(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            overview = self.data.overview(run_id)
            plan = self.data.run(run_id).outline.manifest.plan
            query = _query(request)
            shards = self.data.shards(run_id, query)
            agreement = self.agreement(run_id)
        except SkillEvalError as exc:
            return self.error_page(request, exc)
        pager = pager_links(request.query_params, query)
        return self.page(
            request,
            "run.html",
            triggers=trigger_view(overview["result"], run_id),
            adaptive=adaptive_view(overview["result"], run_id),
            plugin=plugin_view(overview["result"], run_id),
            heat=heat_map(overview["result"]),
            sweep=harness_matrix(overview["result"]),
            # The plan names a sweep's harnesses (the result copies them): known while the run
            # goes, and for a result stored before it named them.
            pairs=bool(plan.harnesses),
            run=overview,
            shards=shards,
            query=query,
            facets=_facets(self.data, run_id),
            agreement=agreement,
            pager=pager,
        )

    def shard_page(self, request: Request) -> Response:
        run_id, shard_id = request.path_params["run_id"], request.path_params["shard_id"]
        try:
            doc = self.data.shard(run_id, shard_id)
        except SkillEvalError as exc:
            return self.error_page(request, exc)
        return self.page(request, "shard.html", run_id=run_id, doc=doc, labels=self.labels_of(run_id, shard_id))

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/", self.runs_page),
            Route("/runs/{run_id}", self.run_page),
            Route("/runs/{run_id}/shards/{shard_id}", self.shard_page),
            Route("/api/runs", self.api_runs),
            Route("/api/runs/{run_id}", self.api_run),
            Route("/api/runs/{run_id}/result", self.api_result),
            Route("/api/runs/{run_id}/shards", self.api_shards),
            Route("/api/runs/{run_id}/shards/{shard_id}", self.api_shard),
            Route("/api/runs/{run_id}/agreement", self.api_agreement),
            Route("/api/runs/{run_id}/triggers", self.api_section),
            Route("/api/runs/{run_id}/adaptive", self.api_section),
            Route("/api/runs/{run_id}/labels", self.api_labels, methods=["GET"]),
            Route("/api/runs/{run_id}/labels", self.api_label, methods=["POST"]),
            Route("/favicon.ico", favicon),  # asked for by a browser on its own, and by tools
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]


def create_app(
    store: ArtifactStore, broker_url: str | None = None, *, review: bool = False, host: str = "127.0.0.1"
) -> Starlette:
    viewer = Viewer(store, broker_url, review)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Read the runs' results once in the background, so the first person to open the list
        # or a big run does not wait for a megabytes-long result to parse.
        threading.Thread(target=viewer.data.warm, name="viewer-warm", daemon=True).start()
        yield

    # Only the names this host answers to: any other Host is a page that rebound its name to it.
    hosts = sorted({host, "127.0.0.1", "localhost", "::1", "[::1]"})
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=hosts)]
    return Starlette(routes=viewer.routes(), middleware=middleware, lifespan=lifespan)


def _cross_site(request: Request) -> str:
    """Why a label request is refused as coming from another site, or "" when it is not.

    Only JSON is taken (a cross-site form cannot send it without a preflight this app never
    answers), and a request naming an origin must name this very host.
    """
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return "labels are sent as application/json"
    origin = request.headers.get("origin")
    parsed = urlparse(origin or "")
    if origin and (parsed.scheme not in ("http", "https") or parsed.netloc != request.headers.get("host", "")):
        return f"cross-origin label refused (origin {origin})"
    return ""


async def _capped_body(request: Request) -> bytes | None:
    """The request's body, or None once it is over LABEL_BODY_BYTES (declared or sent): never read whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > LABEL_BODY_BYTES:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > LABEL_BODY_BYTES:
            return None
    return bytes(body)


def _label(store: ArtifactStore, data: ViewerData, run_id: str, body: LabelRequest) -> HumanLabel:
    data.row(run_id, body.shard_id)  # a shard of a run of this store, or a named 404
    return new_label(
        store, run_id, body.shard_id, body.assertion, body.judge, body.agree, body.note, body.reviewer.strip()
    )


def _when(label: HumanLabel) -> str:
    return label.at.strftime("%Y-%m-%d %H:%M:%S")


def heat_map(result: dict[str, Any] | None) -> dict[str, Any]:
    """Corpus x model rates of the current arm, as the reducer gave them, with a colour bucket each."""
    if result is None:
        return {"models": [], "rows": []}
    current = [s for s in result["skills"] if s["variant"] == CURRENT]
    models = sorted({m["model"] for s in current for m in s["models"]})
    rows = []
    for s in current:
        by_model = {m["model"]: m["behavioural"] for m in s["models"]}
        cells = []
        for model in models:
            rate = by_model.get(model, {}).get("rate")
            bucket = "none" if rate is None else str(min(4, int(rate * 5)))
            title = f"{s['skill']} x {model}: " + (
                "no graded shard" if rate is None else f"{by_model[model]['passed']}/{by_model[model]['total']}"
            )
            cells.append({"rate": rate, "bucket": bucket, "title": title})
        rows.append({"skill": s["skill"], "cells": cells})
    return {"models": models, "rows": rows}


def harness_matrix(result: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A sweep over several harnesses: per corpus of the current arm, each assertion's rate per harness
    (as the reducer gave them, with a colour bucket each) and the harnesses paired; empty otherwise."""
    out: list[dict[str, Any]] = []
    for s in (s for s in (result or {}).get("skills", []) if s["variant"] == CURRENT):
        matrix = s.get("harness_matrix", [])
        harnesses = list(dict.fromkeys(h for a in matrix for h in a["by_harness"]))
        if not harnesses:
            continue
        rows = []
        for a in matrix:
            rates = [a["by_harness"].get(h) for h in harnesses]
            cells = [{"rate": r, "bucket": "none" if r is None else str(min(4, int(r * 5)))} for r in rates]
            rows.append({"case_id": a["case_id"], "text": a["text"], "cells": cells})
        pairs = [c for c in (result or {}).get("harness_comparisons", []) if c["skill"] == s["skill"]]
        out.append({"skill": s["skill"], "harnesses": harnesses, "rows": rows, "pairs": pairs})
    return out


def _facets(data: ViewerData, run_id: str) -> dict[str, list[str]]:
    """The values the run's filters offer (assertions: the first ``FACET_ASSERTIONS`` distinct texts;
    the search box finds the others)."""
    plan = data.run(run_id).outline.manifest.plan
    texts = dict.fromkeys(t for case in case_assertions(plan).values() for t in case)
    return {
        "models": list(plan.rows),
        "arms": list(plan.variants),
        "states": VIEW_STATES,
        "assertions": list(texts)[:FACET_ASSERTIONS],
    }
