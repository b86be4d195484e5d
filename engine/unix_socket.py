"""Two small helpers for the unix sockets between a command and its warm spare (producer/launch/warm.py,
worker/prestart.py): who is at the other end, and one JSON line at a time. Standard library only:
the command's entry point uses them before its heavy imports.
"""

from __future__ import annotations

import socket
import struct


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a connected unix socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def read_line(sock: socket.socket, limit: int = 1 << 16) -> bytes:
    """One newline-terminated line from ``sock``; OSError when it closes first or sends over ``limit`` bytes."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise OSError("connection closed")
        data += chunk
        if len(data) > limit:
            raise OSError("line too long")
    return data
