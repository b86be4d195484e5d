"""The per-shard model proxy a sandboxed agent harness reaches its model through.

:class:`ModelProxy` (``server.py``) listens on a unix socket that is bound into the sandbox;
the in-sandbox forwarder (``forwarder.py``) gives the harness a loopback base URL on the
sandbox's own network namespace and pipes each connection to that socket.
"""

from worker.proxy.forwarder import FORWARDER_SCRIPT, forwarder_command
from worker.proxy.server import ModelProxy, ProxyConfig

__all__ = ["FORWARDER_SCRIPT", "ModelProxy", "ProxyConfig", "forwarder_command"]
