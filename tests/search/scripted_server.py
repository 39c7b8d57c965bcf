"""What the scripted OpenAI-compatible test servers share: a threaded HTTP server on 127.0.0.1 run as a
context manager, a script of steps taken one per chat request, and JSON replies."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer:
    """A server whose chat requests take the next step of `script` (then `default`); `url` is the
    …/v1 base URL. `handler(self)` makes the request handler class."""

    def __init__(
        self,
        script: list[tuple[Any, ...]] | None,
        default: tuple[Any, ...],
        handler: Callable[[Any], type[BaseHTTPRequestHandler]],
    ) -> None:
        self.script, self.default = list(script or []), default
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), handler(self))
        self.srv.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.srv.server_address[1]}/v1"

    def __enter__(self) -> Any:
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.srv.shutdown()
        self.srv.server_close()

    def next_step(self) -> tuple[Any, ...]:
        with self._lock:
            return self.script.pop(0) if self.script else self.default


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, quiet, with a JSON reply helper."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a: object) -> None:  # quiet
        pass

    def _json(self, code: int, obj: Any) -> None:
        payload = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
