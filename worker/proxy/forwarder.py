"""The in-sandbox forwarder: a loopback TCP port piped to the proxy's unix socket.

The sandbox has no network but its own loopback (bubblewrap brings up ``lo`` in the new
network namespace). A harness only knows how to reach its model over HTTP, so this small
script, run by the sandbox's ``python3`` before the harness starts, listens on
``127.0.0.1:<port>`` and copies bytes both ways between each accepted connection and a fresh
connection to the unix socket. It knows nothing of HTTP: every decision (paths, key,
budgets) is the proxy's, outside the sandbox. It prints ``ready`` once listening.
"""

from __future__ import annotations

import shlex

FORWARDER_SCRIPT = r"""
import os, socket, sys, threading
path, port = sys.argv[1], int(sys.argv[2])
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(client):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)
open(sys.argv[3], "w").close()
while True:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


def forwarder_command(socket_path: str, port: int, ready_file: str) -> str:
    """Shell text that starts the forwarder in the background and waits (5 s at most) until it listens."""
    start = f"python3 -c {shlex.quote(FORWARDER_SCRIPT)} {shlex.quote(socket_path)} {port} {shlex.quote(ready_file)}"
    wait = f"for _ in $(seq 500); do [ -e {shlex.quote(ready_file)} ] && break; sleep 0.01; done"
    return f"{start} </dev/null >/dev/null 2>&1 &\n{wait}\n"
