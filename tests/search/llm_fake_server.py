"""A scripted OpenAI-compatible server on 127.0.0.1 for the LLM tests (streaming like llama.cpp).

Each chat request takes the next step of the script (then `default`):

- `("reply", text, {options})`: options `finish` ("stop"), `usage` (True: a final usage chunk when
  the client asks for it), `timings` (llama.cpp's native counts on the last chunk, as llama-server's
  tools/server/server-task.cpp writes them), `wait` (seconds before the first chunk), `delay`
  (seconds between chunks);
- `("echo",)`: the reply is the request's system and user messages, verbatim;
- `("length", text)`: `text` then finish reason "length";
- `("status", code, message)`: an error body with that HTTP status;
- `("hang", seconds)`: headers, then one chunk every 0.05 s for `seconds` (a slow model);
- `("raw", sse_bytes)`: a recorded stream (e.g. a real server's), sent as it is.

A request whose prompt (3 characters a token, denser than kegen's estimate) plus `max_tokens`
exceeds `n_ctx` gets llama-cpp-python's 400 without taking a step. `props`/`models` choose whether
`/props` and `/v1/models` say the window. `tls=(certfile, keyfile)` serves https. The server records requests, the most requests served at
once, and how many streams it stopped because the client had left (`aborted`).
"""

from __future__ import annotations

import json
import ssl
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.search.scripted_server import JsonHandler, ScriptedServer

CHARS_PER_TOKEN = 3


class FakeLLM(ScriptedServer):
    """The server and its script; use as a context manager (`url` is the …/v1 base URL)."""

    def __init__(
        self,
        script: list[tuple[Any, ...]] | None = None,
        *,
        default: tuple[Any, ...] = ("reply", "no code today"),
        n_ctx: int = 0,
        props: bool = False,
        models: bool = False,
        tls: tuple[str, str] | None = None,
    ) -> None:
        self.n_ctx, self.props, self.models = n_ctx, props, models
        self.aborted = 0
        self.active = 0
        self.max_active = 0
        self.spans: list[tuple[float, float]] = []  # (start, end) of each chat request, monotonic
        super().__init__(script, default, _handler)
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.srv.socket = context.wrap_socket(self.srv.socket, server_side=True)


def _handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/props" and fake.props:
                self._json(200, {"default_generation_settings": {"n_ctx": fake.n_ctx}, "total_slots": 1})
            elif self.path == "/v1/models":
                card: dict[str, Any] = {"id": "m", "object": "model"}
                if fake.models:
                    card["max_model_len"] = fake.n_ctx
                self._json(200, {"object": "list", "data": [card]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            t0 = time.monotonic()
            with fake._lock:
                fake.requests.append(body)
                fake.active += 1
                fake.max_active = max(fake.max_active, fake.active)
            try:
                self._chat(body)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):  # the client left
                with fake._lock:
                    fake.aborted += 1
            finally:
                with fake._lock:
                    fake.active -= 1
                    fake.spans.append((t0, time.monotonic()))

        def _chat(self, body: dict[str, Any]) -> None:
            text_in = "".join(m["content"] for m in body["messages"])
            prompt_tokens = len(text_in) // CHARS_PER_TOKEN
            if fake.n_ctx and prompt_tokens + body.get("max_tokens", 0) > fake.n_ctx:
                self._json(
                    400,
                    {
                        "error": {
                            "message": f"This model's maximum context length is {fake.n_ctx} tokens. However,"
                            f" you requested {prompt_tokens + body['max_tokens']} tokens ({prompt_tokens} in"
                            f" the messages, {body['max_tokens']} in the completion). Please reduce the length"
                            " of the messages or completion.",
                            "type": "invalid_request_error",
                            "code": "context_length_exceeded",
                        }
                    },
                )
                return
            kind, *rest = fake.next_step()
            if kind == "status":
                self._json(rest[0], {"error": {"message": rest[1] if len(rest) > 1 else "error"}})
                return
            if kind == "raw":
                self._start_stream()
                self._chunk(rest[0])
                self._chunk(b"")
                return
            opts: dict[str, Any] = rest[1] if len(rest) > 1 else {}
            finish, delay = opts.get("finish", "stop"), opts.get("delay", 0.0)
            if kind == "echo":
                text = "\n".join(m["content"] for m in body["messages"])
            elif kind == "length":
                text, finish = rest[0], "length"
            elif kind == "hang":
                text, delay = "thinking " * int(rest[0] / 0.05), 0.05
            else:
                text = rest[0]
            time.sleep(opts.get("wait", 0.0))  # reading the prompt
            self._stream(body, text, finish, delay, prompt_tokens, opts)

        def _stream(
            self, body: dict[str, Any], text: str, finish: str, delay: float, prompt_tokens: int, opts: dict
        ) -> None:
            self._start_stream()
            pieces = [text[i : i + 16] for i in range(0, len(text), 16)]
            for piece in pieces:
                if delay:
                    time.sleep(delay)
                self._event({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
            n = len(pieces)
            last: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]
            if opts.get("usage", True) and (body.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": n}
                last.append({"choices": [], "usage": usage})
            if opts.get("timings"):  # llama-server: prompt_n counts the prompt tokens not served from cache
                cached = min(2, prompt_tokens)
                timings = {"cache_n": cached, "prompt_n": prompt_tokens - cached, "prompt_ms": 10.0,
                           "predicted_n": n, "predicted_ms": 20.0, "predicted_per_second": n / 0.02}  # fmt: skip
                last[-1]["timings"] = timings
            for event in last:
                self._event(event)
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

        def _start_stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

        def _event(self, obj: dict[str, Any]) -> None:
            self._chunk(f"data: {json.dumps({'object': 'chat.completion.chunk', **obj})}\n\n".encode())

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler
