"""The HTTP mock proxy of one shard: a unix-socket HTTP proxy outside the sandbox.

A case with ``http_mocks`` (schemas/http_mocks.py) gets, inside its sandbox, the loopback
forwarder (worker/proxy/forwarder.py) on ``HTTP_PROXY_PORT`` piped to this proxy's socket, and
``HTTP_PROXY``/``HTTPS_PROXY`` pointing at it. The proxy answers each request from the case's
mocks and refuses every other one with 403; nothing is ever forwarded (still no network).
``https://`` is answered through ``CONNECT``: the proxy ends the TLS itself with a certificate
for the requested host signed by a throwaway CA made for this proxy alone, whose certificate
(never its key) the sandbox trusts through ``SSL_CERT_FILE`` and the like.

Every request is recorded here, by the product: the agent can send the proxy anything, but
cannot write the record, which lives in this process (tests/security/test_http_mock_attacks.py).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import re
import socketserver
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from schemas.http_mocks import (
    REFUSED_STATUS,
    HttpCall,
    HttpMock,
    content_type,
    excerpt,
    find_mock,
    refusal,
)

HTTP_PROXY_PORT = 8378
INNER_HTTP_DIR = "/run/skill-eval-http"
MAX_CALLS = 1_000
"""Requests recorded at most; later ones are answered the same and only counted."""
MAX_REQUEST_BYTES = 1_000_000
MAX_HOSTS = 200
"""Distinct ``https://`` hosts given a certificate per shard; a tunnel to one more is refused."""
_HOST = re.compile(r"^[A-Za-z0-9.-]{1,253}$|^\[[0-9A-Fa-f:.]+\]$")


class _Authority:
    """A throwaway CA, and a certificate for each host the sandbox asks to reach."""

    def __init__(self, folder: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._x509, self._hashes, self._ser, self._ec, self._oid = x509, hashes, serialization, ec, NameOID
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "skill-eval HTTP mock CA")])
        ca = self._builder(self._name, self._key.public_key()).add_extension(
            x509.BasicConstraints(ca=True, path_length=0), critical=True
        )
        self.cert_pem = ca.sign(self._key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
        self._folder = folder
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def _builder(self, subject: Any, public_key: Any) -> Any:
        now = datetime.datetime.now(datetime.UTC)
        return (
            self._x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(public_key)
            .serial_number(self._x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
        )

    def context(self, host: str) -> ssl.SSLContext:
        """A server-side TLS context presenting a certificate for ``host``."""
        with self._lock:
            if host not in self._contexts:
                if len(self._contexts) >= MAX_HOSTS:
                    raise ssl.SSLError(f"over {MAX_HOSTS} hosts asked for: no certificate made")
                self._contexts[host] = self._make(host)
            return self._contexts[host]

    def _make(self, host: str) -> ssl.SSLContext:
        x509, ser = self._x509, self._ser
        key = self._ec.generate_private_key(self._ec.SECP256R1())
        try:
            alt: Any = x509.IPAddress(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            alt = x509.DNSName(host)
        subject = x509.Name([x509.NameAttribute(self._oid.COMMON_NAME, host[:64])])
        builder = self._builder(subject, key.public_key()).add_extension(x509.SubjectAlternativeName([alt]), False)
        cert = builder.sign(self._key, self._hashes.SHA256())
        # ssl loads a chain only from files: written to the host-private folder, never bound in.
        with tempfile.NamedTemporaryFile(dir=self._folder, suffix=".pem", delete=False) as f:
            f.write(key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()))
            f.write(cert.public_bytes(ser.Encoding.PEM))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(f.name)
        os.unlink(f.name)
        return context


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    recorder: HttpMockProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 60  # an idle connection of a finished sandbox does not hold a thread forever
    tunnel: str | None = None

    def log_message(self, format: str, *args: Any) -> None:
        return

    def address_string(self) -> str:
        return "sandbox"

    def do_CONNECT(self) -> None:
        host, _, port = self.path.rpartition(":")
        if not _HOST.match(host) or not port.isdigit():
            self._refuse("CONNECT", self.path, "not a host:port")
            return
        self.send_response(200, "Connection Established")
        self.end_headers()
        try:
            tls = self.server.recorder.authority.context(host).wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            call = HttpCall(method="CONNECT", url=f"https://{host}:{port}", status=0, mocked=False)
            self.server.recorder.record(call.model_copy(update={"note": f"TLS not opened: {exc}"[:300]}))
            self.close_connection = True
            return
        self.connection = tls
        self.rfile = tls.makefile("rb", self.rbufsize)  # type: ignore[assignment]
        self.wfile = socketserver._SocketWriter(tls)  # type: ignore[attr-defined]
        self.tunnel = f"https://{host}" + ("" if port == "443" else f":{port}")
        self.close_connection = False  # an HTTP/1.0 CONNECT (Python's urllib) still carries its request

    def finish(self) -> None:
        super().finish()
        if self.tunnel is not None:  # the TLS socket took the connection over: the server closes only the original
            with contextlib.suppress(OSError):
                self.connection.close()

    def _url(self) -> str:
        if self.tunnel is None and re.match(r"^https?://", self.path, re.IGNORECASE):
            return self.path
        # Inside a tunnel the host is the one CONNECT named, whatever the request line or Host say.
        base = self.tunnel or "http://" + (self.headers.get("Host") or "unknown-host")
        return base + self.path

    def _refuse(self, method: str, url: str, note: str) -> None:
        text = refusal(method, url)
        self.server.recorder.record(
            HttpCall(method=method, url=url, status=REFUSED_STATUS, mocked=False, body=excerpt(text), note=note)
        )
        self._send(REFUSED_STATUS, text.encode(), {"Content-Type": "text/plain; charset=utf-8"}, method)
        self.close_connection = True

    def _send(self, status: int, payload: bytes, headers: dict[str, str], method: str) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(payload)

    def _answer(self) -> None:
        method, url = self.command.upper(), self._url()
        length = self.headers.get("Content-Length") or "0"
        if not length.isdigit() or int(length) > MAX_REQUEST_BYTES or self.headers.get("Transfer-Encoding"):
            self._refuse(method, url, f"request body not read (over {MAX_REQUEST_BYTES} bytes or not sized)")
            return
        body = self.rfile.read(int(length))
        mock = find_mock(self.server.recorder.mocks, method, url)
        if mock is None:
            self._refuse(method, url, "no mock answers it")
            return
        payload = mock.body.encode()
        self.server.recorder.record(
            HttpCall(
                method=method,
                url=url,
                status=mock.status,
                mocked=True,
                request_body=excerpt(body),
                body=excerpt(mock.body),
            )
        )
        headers = {**mock.headers, "Content-Type": content_type(mock)}
        self._send(mock.status, payload, headers, method)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _answer


class HttpMockProxy:
    """Serves one shard's HTTP mocks on a unix socket in ``folder`` (made by the caller, host-private
    apart from what :meth:`binds` shows the sandbox); a context manager. Inert without mocks."""

    def __init__(self, mocks: tuple[HttpMock, ...], folder: Path) -> None:
        self.mocks = mocks
        self.calls: list[HttpCall] = []
        self.dropped = 0
        self._folder = folder
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.authority: _Authority

    def findings(self) -> list[str]:
        """What the record could not hold, for the trajectory's findings (empty as a rule)."""
        if not self.dropped:
            return []
        return [f"http: {len(self.calls)} requests recorded, {self.dropped} more answered but not recorded"]

    @property
    def active(self) -> bool:
        return bool(self.mocks)

    def record(self, call: HttpCall) -> None:
        with self._lock:
            if len(self.calls) < MAX_CALLS:
                self.calls.append(call)
            else:
                self.dropped += 1

    def start(self) -> None:
        if not self.active:
            return
        shown, keys = self._folder / "shown", self._folder / "keys"
        shown.mkdir(mode=0o755, parents=True)
        keys.mkdir(mode=0o700)
        os.chmod(self._folder, 0o711)
        self.authority = _Authority(keys)
        (shown / "ca.pem").write_bytes(self.authority.cert_pem)
        (shown / "ca.pem").chmod(0o644)
        self._server = _Server(str(shown / "http.sock"), _Handler)
        self._server.recorder = self
        os.chmod(shown / "http.sock", 0o666)  # the sandbox's throwaway uid connects to it
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True, name="http-mock")
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
        with contextlib.suppress(FileNotFoundError):
            (self._folder / "shown" / "http.sock").unlink()

    def __enter__(self) -> HttpMockProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def binds(self) -> list[str]:
        """bwrap arguments showing the socket and the CA certificate, read-only, at ``INNER_HTTP_DIR``."""
        if not self.active:
            return []
        shown = str(self._folder / "shown")
        return ["--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", INNER_HTTP_DIR,
                "--ro-bind", shown, INNER_HTTP_DIR]  # fmt: skip

    def env(self) -> dict[str, str]:
        """The sandbox's proxy and trust settings (loopback stays direct: the model forwarder is there)."""
        if not self.active:
            return {}
        proxy, ca = f"http://127.0.0.1:{HTTP_PROXY_PORT}", f"{INNER_HTTP_DIR}/ca.pem"
        out = {name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
        out |= {name: "127.0.0.1,localhost,::1" for name in ("NO_PROXY", "no_proxy")}
        trust = ("SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO")
        return out | dict.fromkeys(trust, ca)

    def prelude(self) -> str:
        """Shell text starting the in-sandbox forwarder to this proxy before the command."""
        if not self.active:
            return ""
        from worker.proxy.forwarder import forwarder_command

        ready = "/tmp/.skill-eval-http-ready"
        return forwarder_command(f"{INNER_HTTP_DIR}/http.sock", HTTP_PROXY_PORT, ready)
