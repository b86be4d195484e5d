"""The ``view`` and ``label`` commands, added to the ``skill-eval`` CLI by :func:`register_commands`."""

from __future__ import annotations

import os
import socket
from typing import Annotated

import typer
from rich.console import Console

from engine.labels import labelled_answers, new_label, put_label
from engine.settings import Settings
from engine.store import LocalStore, open_store
from reducer.agreement import agreement, agreement_lines
from schemas.errors import ConfigError, StoreError
from schemas.label import COMBINED, NOTE_CHARS

StoreOpt = Annotated[str | None, typer.Option("--store", help="Artifact store (env SKILL_EVAL_STORE).")]
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _store_uri(store: str | None) -> str:
    return store or os.environ.get("SKILL_EVAL_STORE") or Settings().store


def _check_port(host: str, port: int) -> None:
    """A ``ConfigError`` naming the address when nothing can listen there (taken, not ours), so a
    busy port exits 2 like any bad flag instead of the server's own exit code."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(f"--host {host} --port {port}: cannot listen there: {exc.strerror or exc}") from exc


def register_commands(app: typer.Typer, out: Console) -> None:
    """Add ``view`` and ``label`` to the CLI."""

    @app.command()
    def view(
        store: StoreOpt = None,
        broker: Annotated[
            str | None, typer.Option("--broker", help="Redis URL for live run state (env SKILL_EVAL_BROKER_URL).")
        ] = None,
        host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback by default).")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8765,
        review: Annotated[bool, typer.Option("--review", help="Let people label verdicts agree or disagree.")] = False,
    ) -> None:
        """Browse runs, their shards, trajectories and verdicts in a web page; with --review, label verdicts."""
        import uvicorn

        from viewer.app import create_app

        uri = _store_uri(store)
        opened = open_store(uri)  # a bad URI is a named error before anything listens
        named = store or os.environ.get("SKILL_EVAL_STORE")
        if isinstance(opened, LocalStore) and not opened.root.is_dir():
            if named:  # a typo in --store would otherwise serve an empty list, silently
                raise StoreError(f"store {uri} does not exist (no folder there): name the store a run wrote")
            out.print(f"note: no run stored yet: {uri} does not exist", markup=False)
        if not 1 <= port <= 65535:  # a bad port is a bad flag, named before anything binds
            raise ConfigError(f"--port {port}: a port is 1 to 65535")
        _check_port(host, port)
        if host not in LOOPBACK:
            out.print(f"note: listening on {host}: anyone who reaches it reads every run in {uri}", markup=False)
        broker_url = broker or os.environ.get("SKILL_EVAL_BROKER_URL") or None
        application = create_app(opened, broker_url, review=review, host=host)
        out.print(f"skill-eval view: http://{host}:{port}/ (store {uri}{', review' if review else ''})", markup=False)
        uvicorn.run(application, host=host, port=port, log_level="warning")

    @app.command()
    def label(
        run_id: Annotated[str, typer.Argument(help="Run id.")],
        shard: Annotated[str, typer.Option("--shard", help="Shard id.")],
        assertion: Annotated[int, typer.Option("--assertion", help="Assertion number, counted from 1.", min=1)],
        agree: Annotated[bool, typer.Option("--agree", help="Agree with the verdict.")] = False,
        disagree: Annotated[bool, typer.Option("--disagree", help="Disagree with the verdict.")] = False,
        note: Annotated[str, typer.Option("--note", help="Why.")] = "",
        judge: Annotated[str, typer.Option("--judge", help="Judge whose answer is labelled.")] = COMBINED,
        store: StoreOpt = None,
    ) -> None:
        """Label one verdict of a run agree or disagree, as a versioned record in the store."""
        if agree == disagree:  # both given would let the last flag win silently
            raise ConfigError(
                "say --agree or --disagree" if not agree else "--agree and --disagree contradict: say one"
            )
        if len(note) > NOTE_CHARS:  # said as a bad flag, before the store is read
            raise ConfigError(f"--note: {len(note)} characters; a label's note keeps at most {NOTE_CHARS}")
        st = open_store(_store_uri(store))
        record = new_label(st, run_id, shard, assertion, judge, agree, note, "")
        passed = record.judge_passed
        key = put_label(st, record)
        word = "agrees with" if agree else "disagrees with"
        out.print(f"label: {record.reviewer} {word} {judge} ({'PASS' if passed else 'FAIL'}) -> {key}", markup=False)
        for line in agreement_lines(f for f in agreement(*labelled_answers(st, run_id)) if f.scope == "all"):
            out.print(line, markup=False, highlight=False)
