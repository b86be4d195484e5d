"""A worker process started ahead of its embedded cluster (see producer/launch/prestart.py and producer/launch/warm.py).

It imports the heavy modules at once (worker/warmup.py) while it waits for one JSON line: the
worker node (engine/node.py), its environment (the private Redis, the store, the work folder:
what ``EmbeddedCluster`` would have given a worker it spawned), its log file and its working
folder. Then it becomes that worker in this process (worker/boot.py).

* ``python -m worker.prestart``: started by the command itself; the line comes on stdin, and
  end-of-file instead means the command went on without a cluster: the process exits at once.
* ``python -m worker.prestart --spare SOCKET IDLE_S``: a spare left for a later command. It
  exits at once when another spare holds ``SOCKET.lock`` (serving or still importing), or
  when its imports fail; else, once imported, it listens on ``SOCKET`` for one claim from a
  process of this user, answers with its pid, stops listening, and reads the order from that
  connection; end-of-file on it at any time after the claim (the command ended or was killed)
  ends the process. With no claim for ``IDLE_S`` seconds, or when a newer spare tells it to
  retire, it removes its socket and exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import threading
from collections.abc import Mapping
from typing import Any


def become(order: Mapping[str, Any]) -> None:
    """Turn this process into the worker ``order`` describes (never returns)."""
    from engine.node import WorkerNode

    node = WorkerNode.from_json(order["node"])
    os.environ.clear()
    os.environ.update(order["env"])
    if order.get("cwd"):
        os.chdir(order["cwd"])
    log = os.open(order["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # nothing the worker runs inherits the command's pipe
    os.close(null)
    from worker.warmup import import_litellm_if_wanted

    import_litellm_if_wanted()  # a spare that left litellm out, taken by a run that may need it
    from worker.boot import leave, run_node

    leave(run_node(node))


def main() -> None:
    from worker.warmup import start_warmup

    if sys.argv[1:2] == ["--spare"]:
        serve_spare(sys.argv[2], float(sys.argv[3]))
        return
    start_warmup()
    line = sys.stdin.buffer.readline()
    if not line:
        os._exit(0)  # nothing to become; the import thread is not worth finishing
    become(json.loads(line))


def serve_spare(path: str, idle_s: float) -> None:
    """Wait as a spare on ``path`` (see the module docstring), then become the claiming run's worker."""
    from engine.unix_socket import read_line
    from worker.warmup import imported, start_warmup

    lock = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os._exit(0)  # another spare serves this key, or is on its way: no second import
    start_warmup().join()  # listening means imported: a claim gets a ready process
    if not imported():
        # A broken install (or one changing under it): a command claiming this process would
        # get a worker that fails every shard. Exit unbound; the next command spawns its own.
        os._exit(1)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead spare's socket: the lock says none is listening
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old_mask)
    listener.listen(8)
    listener.settimeout(idle_s)
    conn = _accept_claim(listener)
    with contextlib.suppress(OSError):
        os.unlink(path)
    listener.close()
    os.close(lock)  # the next spare for this key may start
    if conn is None:
        os._exit(0)
    try:
        order = json.loads(read_line(conn, limit=1 << 24))
    except (OSError, ValueError):
        os._exit(0)  # the command ended without a cluster, or sent nonsense
    threading.Thread(target=_exit_on_hangup, args=(conn,), name="spare-claimant", daemon=True).start()
    become(order)


def _accept_claim(listener: socket.socket) -> socket.socket | None:
    """The connection of the first well-formed claim by this user; None once idle for the timeout
    or when told to retire."""
    from engine.unix_socket import peer_credentials, read_line

    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            return None
        try:
            conn.settimeout(5.0)
            _pid, uid = peer_credentials(conn)
            if uid != os.getuid():
                raise ValueError("not this user")
            message = json.loads(read_line(conn))
            if message.get("retire") == 1:  # a newer spare of another key makes room
                conn.close()
                return None
            if message.get("claim") != 1:
                raise ValueError("not a claim")
            conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
            conn.settimeout(None)
            return conn
        except (OSError, ValueError, AttributeError):
            conn.close()


def _exit_on_hangup(conn: socket.socket) -> None:
    """End this process when the claiming command's end of the connection closes."""
    with contextlib.suppress(OSError):
        while conn.recv(4096):
            pass
    os._exit(1)


if __name__ == "__main__":
    main()
