"""A tiny HTTP proxy on 127.0.0.1 for the LLM client's proxy tests.

It forwards every request to one upstream address whatever host the client named (so tests can use
names such as `llm.example.test` without DNS): `CONNECT host:port` opens a tunnel (the client's TLS
goes through untouched), an absolute-URI request (`POST http://host:port/path`) is rewritten to its
path and relayed. With `credentials="user:password"` a request without the matching
`Proxy-Authorization: Basic` header gets 407. It records each request's method, target and
Proxy-Authorization header, and the Host header of relayed requests.
"""

from __future__ import annotations

import base64
import socket
import socketserver
import threading
from typing import Any
from urllib.parse import urlsplit


class FakeProxy:
    """The proxy; use as a context manager (`url` is its http:// address)."""

    def __init__(self, upstream: tuple[str, int], credentials: str | None = None) -> None:
        self.upstream = upstream
        self.auth = "Basic " + base64.b64encode(credentials.encode()).decode() if credentials else None
        self.seen: list[dict[str, Any]] = []
        self.srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _handler(self))
        self.srv.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.srv.server_address[1]}"

    def __enter__(self) -> FakeProxy:
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def _pipe(src: Any, dst: socket.socket) -> None:
    """Copy `src` (a buffered reader or a socket) into `dst` until either side closes."""
    try:
        while True:
            data = src.read1(65536) if hasattr(src, "read1") else src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _handler(proxy: FakeProxy) -> type[socketserver.StreamRequestHandler]:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            line = self.rfile.readline().decode("latin-1").rstrip("\r\n")
            if not line:
                return
            method, target, version = line.split(" ", 2)
            head: list[tuple[str, str]] = []
            while (h := self.rfile.readline().decode("latin-1").rstrip("\r\n")) != "":
                name, _, value = h.partition(":")
                head.append((name.strip(), value.strip()))
            given = next((v for n, v in head if n.lower() == "proxy-authorization"), None)
            host = next((v for n, v in head if n.lower() == "host"), None)
            proxy.seen.append({"method": method, "target": target, "auth": given, "host": host})
            if proxy.auth and given != proxy.auth:
                self.wfile.write(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'
                )
                return
            up = socket.create_connection(proxy.upstream, timeout=30)
            if method == "CONNECT":
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.wfile.flush()
            else:  # absolute URI: relay the request with its path only
                parts = urlsplit(target)
                path = parts.path + (f"?{parts.query}" if parts.query else "")
                lines = [f"{method} {path} {version}"] + [
                    f"{n}: {v}" for n, v in head if n.lower() != "proxy-authorization"
                ]
                up.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            back = threading.Thread(target=_pipe, args=(up, self.connection), daemon=True)
            back.start()
            _pipe(self.rfile, up)
            back.join(30)
            up.close()

    return Handler
